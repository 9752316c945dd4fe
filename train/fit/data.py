"""Data side of the fit: group-wise split, batch sampler, the LightningDataModule, ranking metrics.

Split by episode (a group) so validation never sees a decision from a training episode; input
normalisation statistics come from the training rows only. Batches never cut a decision group (the
listwise loss ranks within one, and its sessions compete for their share within it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from runtime.errors import ValidationError
from utilitynet.model import normalization_stats

from ..dataset.groups import FitData

__all__ = ["average_precision", "group_recall", "roc_auc", "UtilityDataModule"]


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Rank-based (Mann–Whitney) ROC AUC with tied scores averaged; NaN when one class is absent."""
    s, pos = np.asarray(scores, np.float64), np.asarray(positive, bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    _, inv, counts = np.unique(s[order], return_inverse=True, return_counts=True)
    avg_rank = (np.cumsum(counts) - (counts - 1) / 2.0)[inv]  # 1-based mean rank of each tie block
    ranks = np.empty_like(avg_rank)
    ranks[order] = avg_rank
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def average_precision(scores: np.ndarray, positive: np.ndarray) -> float:
    """Mean precision at each positive when rows are sorted by score (NaN without positives)."""
    pos = np.asarray(positive, bool)[np.argsort(-np.asarray(scores, np.float64), kind="mergesort")]
    if not pos.any():
        return float("nan")
    hits = np.cumsum(pos)
    return float(np.mean(hits[pos] / (np.flatnonzero(pos) + 1)))


def group_recall(scores: np.ndarray, y: np.ndarray, decisions: np.ndarray, kept: np.ndarray) -> float:
    """Share of the positive label mass ranked in the top *k* of its decision group, over every group
    with positives; *k* = what the collecting policy kept there, or the number of positives if more
    (NaN without positives). The retention question itself: does the cut keep what was asked about?"""
    s, lab = np.asarray(scores, np.float64), np.asarray(y, np.float64)
    dec, kep = np.asarray(decisions), np.asarray(kept, bool)
    hit = total = 0.0
    order = np.lexsort((-s, dec))
    d, lab_o, kep_o = dec[order], lab[order], kep[order]
    starts = np.r_[0, np.flatnonzero(d[1:] != d[:-1]) + 1, len(d)]
    for lo, hi in zip(starts[:-1], starts[1:]):
        pos = lab_o[lo:hi]
        mass = float(pos.sum())
        if mass <= 0:
            continue
        k = max(int(kep_o[lo:hi].sum()), int((pos > 0.5).sum()), 1)
        hit += float(pos[:k].sum())
        total += mass
    return hit / total if total else float("nan")


# -------------------------------------------------------------------------------------------- data
class IndexBatches(Sampler[torch.Tensor]):
    """Yields whole batches of row indices (one gather per batch), shuffled per epoch, rank-sharded.

    With ``rank_groups``, rows of one decision stay contiguous inside one batch (groups are
    shuffled, then packed; unshuffled, they keep their order), so the ranking loss sees the whole
    group; cuts snap to group boundaries.

    Every epoch yields exactly ``len(self)`` batches: Lightning validates when an epoch's batch count
    reaches the length it read once before training, so an epoch one batch short (a cut snapped past
    the last group start) would skip validation, and early stopping would then fail on a missing
    ``val_loss``. Where snapping leaves fewer batches, the largest batches are split at a group
    boundary until the count is ``min(ceil(n / batch_size), number of groups)``.
    """

    def __init__(self, idx: np.ndarray, batch_size: int, *, shuffle: bool, seed: int,
                 rank_groups: np.ndarray | None = None, rank: int = 0, world: int = 1) -> None:
        self.idx, self.bs, self.shuffle, self.seed = idx, batch_size, shuffle, seed
        self.rank_groups, self.rank, self.world, self.epoch = rank_groups, rank, world, 0
        self._groups = len(np.unique(rank_groups[idx])) if rank_groups is not None and len(idx) else 0

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at every epoch start: a new, reproducible order per epoch."""
        self.epoch = epoch

    def _batches(self) -> list[np.ndarray]:
        idx, n = self.idx, len(self.idx)
        rng = np.random.default_rng([self.seed, self.epoch])
        cuts = np.arange(self.bs, n, self.bs)
        if self.rank_groups is not None and n:
            g = self.rank_groups[idx]
            if self.shuffle:
                key = rng.permutation(int(g.max()) + 1)[g]  # a random order of the groups …
                order = np.lexsort((rng.random(n), key))    # … and of the rows within each group
            else:
                key, order = g, np.argsort(g, kind="stable")
            idx, key = idx[order], key[order]
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            # Snap every nominal cut forward to the next group start, so no group is split.
            at = np.searchsorted(starts, cuts)
            cuts = np.unique(starts[at[at < len(starts)]])
            cuts = _split_to(cuts[cuts > 0], starts, n, self._count(n))
        elif self.shuffle:
            idx = rng.permutation(idx)
        batches = [b for b in np.split(idx, cuts) if len(b)]
        if self.world > 1:  # pad cyclically so every rank steps the same number of times
            batches += batches[: (-len(batches)) % self.world]
            batches = batches[self.rank::self.world]
        return batches

    def __iter__(self) -> Iterator[torch.Tensor]:
        return (torch.from_numpy(b) for b in self._batches())

    def _count(self, n: int) -> int:
        """Batches per epoch before sharding: one per ``batch_size`` rows, at most one per group."""
        count = math.ceil(n / self.bs)
        return min(count, self._groups) if self.rank_groups is not None and n else count

    def __len__(self) -> int:
        return math.ceil(self._count(len(self.idx)) / self.world)


def _split_to(cuts: np.ndarray, starts: np.ndarray, n: int, count: int) -> np.ndarray:
    """``cuts`` with cuts added at group ``starts`` until they make ``count`` batches of ``n`` rows:
    each added cut splits the largest batch that holds more than one group, at the start nearest its
    middle."""
    out = [int(c) for c in cuts]
    inner = starts[starts > 0]
    while len(out) + 1 < count:
        bounds = [0, *out, n]
        best = None
        for lo, hi in sorted(zip(bounds[:-1], bounds[1:]), key=lambda b: b[0] - b[1]):
            inside = inner[(inner > lo) & (inner < hi)]
            if len(inside):
                best = int(inside[np.argmin(np.abs(inside - (lo + hi) / 2))])
                break
        if best is None:  # cannot happen while count <= number of groups
            break
        out = sorted([*out, best])
    return np.asarray(out, dtype=np.int64)


def group_split(groups: np.ndarray, val_frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    uniq = np.unique(groups)
    if len(uniq) < 2:
        raise ValidationError(f"need at least 2 episode groups to split train/val, got {len(uniq)}",
                              field="groups")
    n_val = min(max(1, round(val_frac * len(uniq))), len(uniq) - 1)
    val_groups = np.random.default_rng(seed).permutation(uniq)[:n_val]
    is_val = np.isin(groups, val_groups)
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


class UtilityDataModule(pl.LightningDataModule):
    """Rows in memory as one ``TensorDataset``; train/val are index sets split by group (episode).

    Args:
        data: the rows (:class:`~train.dataset.FitData`; ``X`` shared with the tensors, not copied, when
            float32 and writable).
        batch_size, val_frac, seed, num_workers: as in :class:`FitConfig`.
        embedding_dim: width of the trailing embedding block (left unnormalised).

    After ``setup()``: ``train_idx``/``val_idx`` (row indices) and ``norm_stats`` (mean, std of
    the **training** rows only — validation statistics must not leak into the model). Each batch is
    ``(x, y, w, decision, session, kept)``.
    """

    def __init__(self, data: FitData, *, batch_size: int = 1024, val_frac: float = 0.2, seed: int = 0,
                 num_workers: int = 0, embedding_dim: int = 0) -> None:
        super().__init__()
        if not isinstance(data, FitData):
            raise ValidationError("UtilityDataModule takes a train.dataset.FitData", field="data")
        X = data.X
        self.X = X if X.flags.writeable else X.copy()  # torch.from_numpy needs a writable buffer
        self.y, self.w = data.y, data.w
        self.groups = data.groups
        self.rank_groups = np.unique(data.decisions, return_inverse=True)[1].reshape(-1)
        self.sessions = np.unique(data.sessions, return_inverse=True)[1].reshape(-1)
        self.kept = data.kept
        self.batch_size, self.val_frac, self.seed = batch_size, val_frac, seed
        self.num_workers, self.embedding_dim = num_workers, embedding_dim
        self.train_idx: np.ndarray | None = None
        self.val_idx: np.ndarray | None = None
        self.norm_stats: tuple[np.ndarray, np.ndarray] | None = None
        self._data: TensorDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        """Split by group and build the tensors (idempotent: Lightning may call it again)."""
        if self._data is not None:
            return
        self.train_idx, self.val_idx = group_split(self.groups, self.val_frac, self.seed)
        self.norm_stats = normalization_stats(self.X[self.train_idx], self.embedding_dim)
        self._data = TensorDataset(torch.from_numpy(self.X), torch.from_numpy(self.y),
                                   torch.from_numpy(self.w),
                                   torch.from_numpy(np.asarray(self.rank_groups, np.int64)),
                                   torch.from_numpy(np.asarray(self.sessions, np.int64)),
                                   torch.from_numpy(self.kept))

    def _loader(self, idx: np.ndarray, *, train: bool) -> DataLoader:
        assert self._data is not None, "call setup() first"
        t = self.trainer
        rank, world = (t.global_rank, t.world_size) if (t is not None and train) else (0, 1)
        sampler = IndexBatches(idx, self.batch_size, shuffle=train, seed=self.seed,
                               rank_groups=self.rank_groups, rank=rank, world=world)
        # batch_size=None: the sampler already yields whole index batches; TensorDataset gathers them.
        return DataLoader(self._data, sampler=sampler, batch_size=None, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_idx, train=True)  # type: ignore[arg-type]

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_idx, train=False)  # type: ignore[arg-type]
