r"""Fit the utility MLP on labelled retention rows with Lightning (seed 001 §4.2).

:func:`run` takes training matrices (from :func:`train.dataset.to_numpy`), splits them **by
episode** (a validation row never shares an episode with a training row, so the score measures
generalisation to unseen trajectories, not memorised neighbours), fits
:class:`UtilityLitModule` — a thin wrapper around the plain :class:`utilitynet.model.UtilityNet` —
on the log-utility :math:`s = \log σ(c) + w · \text{share}_\text{session}(b)` (:mod:`utilitynet.session`,
the share computed among the memories of each session in each decision group, as a decision does):
a **listwise** loss within each decision group (softmax cross-entropy: the positives should take the
group's mass — retention is a ranking under a cap) plus weighted BCE on the utility ``exp(s)`` against
the soft hindsight labels (keeps utilities calibrated for rule bonuses); ``objective="pairwise"``
(RankNet) and ``"pointwise"`` (BCE only) are there for ablations. It early-stops on ``val_loss``,
keeps the best checkpoint, logs CSV, and returns the best model in eval mode.

Batches are drawn by index (one fancy-indexing gather per batch, no per-row collation), which is
what makes CPU epochs take seconds: workers would only add IPC, so ``num_workers`` defaults to 0.

Scaling out is Lightning's job, through :class:`FitConfig`'s Trainer fields — no code changes:

* one node, 4 GPUs:     ``FitConfig(accelerator="gpu", devices=4, strategy="ddp")``
* 2 nodes × 8 GPUs:     ``FitConfig(accelerator="gpu", devices=8, num_nodes=2, strategy="ddp")``, started on
  every node by ``torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500
  <script>`` or by SLURM ``srun`` (Lightning reads either environment; ``MASTER_ADDR``/``MASTER_PORT``/
  ``NODE_RANK`` work too).
* mixed precision on GPU: ``precision="bf16-mixed"`` (or ``"16-mixed"``).
* CPU processes (checks the distributed path without GPUs): ``FitConfig(devices=2, strategy="ddp")``
  (re-launches the calling script per rank) or ``strategy="ddp_spawn"`` (spawns; works from a REPL).

The ``"ddp"`` launcher re-runs the calling script on every rank, so call :func:`run` under
``if __name__ == "__main__":``; every rank returns a :class:`FitResult` with the same best model.

Under DDP each rank trains on a disjoint, equally sized slice of every epoch's shuffled batches
(``use_distributed_sampler=False``, because our sampler shards itself), and every rank scores the
whole validation split (it is small; this keeps AUC exact without gathering ragged tensors).

Example:
    >>> X, y, w, groups = to_numpy(load_rounds(["data/round_000"]))                 # doctest: +SKIP
    >>> res = run(FitConfig(max_epochs=20), X, y, w, groups, spec=spec, out_dir="out")  # doctest: +SKIP
    >>> res.best_val_loss, res.metrics["val_auc"]                                    # doctest: +SKIP
"""

from __future__ import annotations

import csv
import math
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger

from runtime.errors import ValidationError
from utilitynet.features import AMBIENT_FEATURES, DYNAMIC_FEATURES, KIND_FEATURES, FeatureSpec
from utilitynet.model import UtilityNet, UtilityNetConfig

from ..dataset.groups import FitData
from .data import UtilityDataModule, average_precision, group_recall, roc_auc

__all__ = ["INPUTS", "OBJECTIVES", "FitConfig", "FitResult", "UtilityDataModule", "UtilityLitModule", "average_precision",
           "group_recall", "roc_auc", "run"]

OBJECTIVES = ("listwise", "pairwise", "pointwise")
INPUTS: dict[str, tuple[str, ...]] = {"all": (), "events": AMBIENT_FEATURES, "static": DYNAMIC_FEATURES,
                                      "portable": KIND_FEATURES}
"""``FitConfig.inputs`` → the named features the model does not read."""

_ACCELERATORS = ("cpu", "gpu", "cuda", "mps", "tpu", "auto")
_PRECISIONS = ("64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
_RANK_MARGIN = 0.05  # label gap below which two items are not ordered (soft labels are noisy)


@dataclass(frozen=True)
class FitConfig:
    """Everything :func:`run` needs besides the data; bad values raise ``ValidationError`` naming each field.

    Attributes:
        batch_size: rows per optimisation step (≥ 1; 1024+ keeps CPU epochs fast).
        lr: AdamW learning rate (> 0).
        weight_decay: AdamW decoupled weight decay on weight matrices (≥ 0; biases/norms get none).
        max_epochs: upper bound on epochs (≥ 1).
        patience: epochs without a ``val_loss`` improvement before early stopping (≥ 1).
        val_frac: fraction of *episodes* (groups) held out for validation, in (0, 1).
        seed: seeds the split, the batch order, dropout and init (everything is reproducible).
        hidden: hidden layer sizes of the MLP (1–3 layers; see ``UtilityNetConfig``).
        dropout: dropout after each hidden layer, in [0, 1).
        embedding_proj: width the sentence embedding is projected to (≥ 0; 0 = not used).
        objective: ``"listwise"`` (softmax cross-entropy within each decision group), ``"pairwise"``
            (RankNet between items of one decision) or ``"pointwise"`` (BCE only).
        rank_weight: weight of the ranking term (listwise or pairwise) added to the BCE term (≥ 0).
        bce_weight: weight of the BCE term on the utility against the soft labels (≥ 0).
        members: ensemble size of the model (≥ 1; outputs averaged).
        session_share: let the memories of a session compete for its share (the model's second output,
            :mod:`utilitynet.session`); ``False`` fixes the session weight at 0 (an ablation).
        session_weight: the session weight's starting value (learned; ≥ 0).
        inputs: which named features the model reads (:data:`INPUTS`): ``"all"``; ``"events"``: not the
            ambient ones (:data:`utilitynet.features.AMBIENT_FEATURES`: age, position, redundancy with and
            similarity to the other memories held), so a utility changes only when something happens to the
            memory or to the task (a recall, a flag, a declared TTL or half-life, a goal or stage); or
            ``"static"``: none that change after a memory is written
            (:data:`utilitynet.features.DYNAMIC_FEATURES`); or ``"portable"``: not the ones that tell the
            kind of conversation apart (:data:`utilitynet.features.KIND_FEATURES`).
        accelerator: Lightning accelerator: "cpu" | "gpu" | "cuda" | "mps" | "tpu" | "auto".
        devices: devices per node (int ≥ 1, a list of ids, or "auto").
        strategy: Lightning strategy ("auto", "ddp", "ddp_spawn", "fsdp", …).
        num_nodes: number of machines (≥ 1; > 1 needs a distributed strategy such as "ddp").
        precision: Lightning precision: "32-true" | "bf16-mixed" | "16-mixed" | "64-true" | "16-true" |
            "bf16-true".
        log_every_n_steps: CSV/progress logging interval in optimisation steps (≥ 1).
        num_workers: DataLoader worker processes (≥ 0; 0 is fastest for in-memory tensors).
        deterministic: ask torch for deterministic kernels during the fit (restored afterwards).
    """

    batch_size: int = 1024
    lr: float = 2e-3
    weight_decay: float = 1e-4
    max_epochs: int = 30
    patience: int = 4
    val_frac: float = 0.2
    seed: int = 0
    hidden: tuple[int, ...] = (128, 64)
    dropout: float = 0.1
    embedding_proj: int = 0
    objective: str = "listwise"
    rank_weight: float = 1.0
    bce_weight: float = 0.2
    members: int = 1
    session_share: bool = True
    session_weight: float = 0.5
    inputs: str = "all"
    accelerator: str = "cpu"
    devices: int | str | tuple[int, ...] = 1
    strategy: str = "auto"
    num_nodes: int = 1
    precision: str = "32-true"
    log_every_n_steps: int = 50
    num_workers: int = 0
    deterministic: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(self.hidden))  # YAML gives lists
        if isinstance(self.devices, list):
            object.__setattr__(self, "devices", tuple(self.devices))
        p: list[tuple[str, str]] = []

        def need(ok: bool, name: str, what: str) -> None:
            if not ok:
                p.append((name, f"{name} must be {what}, got {getattr(self, name)!r}"))

        need(self.batch_size >= 1, "batch_size", ">= 1")
        need(self.lr > 0 and math.isfinite(self.lr), "lr", "a finite number > 0")
        need(self.weight_decay >= 0, "weight_decay", ">= 0")
        need(self.max_epochs >= 1, "max_epochs", ">= 1")
        need(self.patience >= 1, "patience", ">= 1")
        need(0 < self.val_frac < 1, "val_frac", "in (0, 1)")
        need(1 <= len(self.hidden) <= 3 and all(int(h) >= 1 for h in self.hidden), "hidden",
             "1–3 positive sizes")
        need(0 <= self.dropout < 1, "dropout", "in [0, 1)")
        need(self.embedding_proj >= 0, "embedding_proj", ">= 0 (0 = the embedding is not used)")
        need(self.objective in OBJECTIVES, "objective", f"one of {OBJECTIVES}")
        need(self.rank_weight >= 0 and math.isfinite(self.rank_weight), "rank_weight", "a finite number >= 0")
        need(self.bce_weight >= 0 and math.isfinite(self.bce_weight), "bce_weight", "a finite number >= 0")
        need(self.objective == "pointwise" or self.rank_weight + self.bce_weight > 0, "rank_weight",
             "> 0 or bce_weight > 0 (some loss)")
        need(self.objective != "pointwise" or self.bce_weight > 0, "bce_weight", "> 0 for the pointwise objective")
        need(isinstance(self.members, int) and self.members >= 1, "members", "an int >= 1")
        need(isinstance(self.session_share, bool), "session_share", "true or false")
        need(0 <= self.session_weight < 1e3, "session_weight", "in [0, 1000)")
        need(self.inputs in INPUTS, "inputs", f"one of {tuple(INPUTS)}")
        need(self.accelerator in _ACCELERATORS, "accelerator", f"one of {_ACCELERATORS}")
        need(self.devices == "auto" or (isinstance(self.devices, int) and self.devices >= 1)
             or (isinstance(self.devices, tuple) and len(self.devices) > 0), "devices",
             "an int >= 1, a non-empty list of device ids, or 'auto'")
        need(isinstance(self.strategy, str) and bool(self.strategy), "strategy", "a Lightning strategy name")
        need(self.num_nodes >= 1, "num_nodes", ">= 1")
        need(self.precision in _PRECISIONS, "precision", f"one of {_PRECISIONS}")
        need(self.log_every_n_steps >= 1, "log_every_n_steps", ">= 1")
        need(self.num_workers >= 0, "num_workers", ">= 0")
        if p:
            raise ValidationError("invalid FitConfig — " + "; ".join(m for _, m in p), field=p[0][0],
                                  problems=p)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FitConfig:
        """Build from a YAML/JSON mapping; unknown keys are an error that lists the valid ones."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(d) - known)
        if extra:
            raise ValidationError(f"unknown FitConfig keys {extra}; valid keys: {sorted(known)}",
                                  field=extra[0])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """JSON/YAML-ready dict (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


# ------------------------------------------------------------------------------------------ losses
def _dense(codes: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Codes renumbered 0..k-1 within this batch (the global codes may be large)."""
    uniq, inv = torch.unique(codes, return_inverse=True)
    return inv, int(uniq.numel())


def segment_log_softmax(v: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """``v_i − log Σ_{j: seg_j = seg_i} e^{v_j}`` (the torch twin of :func:`utilitynet.session.session_log_share`)."""
    inv, k = _dense(seg)
    top = torch.full((k,), -torch.inf, dtype=v.dtype, device=v.device)
    top = top.scatter_reduce(0, inv, v.detach(), reduce="amax", include_self=True)
    z = torch.zeros(k, dtype=v.dtype, device=v.device).index_add(0, inv, torch.exp(v - top[inv]))
    return v - top[inv] - torch.log(z[inv])


def log_utility(logit: torch.Tensor, session_logit: torch.Tensor, sessions: torch.Tensor,
                weight: torch.Tensor) -> torch.Tensor:
    """``log σ(c) + w · share_session(b)``: what the runtime computes (:func:`utilitynet.session.log_utility`)."""
    return F.logsigmoid(logit) + weight * segment_log_softmax(session_logit, sessions)


def weighted_bce_log(s: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Weighted BCE of the utility ``p = exp(s)`` (``s ≤ 0``) against soft labels, from ``s`` directly."""
    s = s.clamp(max=-1e-6)
    log1mp = torch.log(-torch.expm1(s))
    return (-(y * s + (1 - y) * log1mp) * w).sum() / w.sum()


def weighted_bce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (F.binary_cross_entropy_with_logits(logits, y, reduction="none") * w).sum() / w.sum()


def listwise_loss(s: torch.Tensor, y: torch.Tensor, w: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy within each decision group: ``−Σ t_i log softmax_g(s)_i / Σ t_i`` with target
    mass ``t = y·w``, averaged over the groups that hold any (groups without positives add nothing),
    each weighted by its rows' mean sample weight (so a source given less weight counts for less)."""
    lsm = segment_log_softmax(s, g)
    inv, k = _dense(g)
    t = y * w
    zeros = torch.zeros(k, dtype=s.dtype, device=s.device)
    mass = zeros.index_add(0, inv, t)
    per = zeros.index_add(0, inv, -t * lsm)
    gw = zeros.index_add(0, inv, w) / zeros.index_add(0, inv, torch.ones_like(w))
    has = mass > 0
    if not bool(has.any()):
        return s.sum() * 0.0  # keeps the graph (and DDP's gradient sync) intact
    return (gw[has] * per[has] / mass[has]).sum() / gw[has].sum()


def pairwise_rank_loss(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
                        g: torch.Tensor) -> torch.Tensor:
    """RankNet loss over pairs of one decision (contiguous runs of ``g``) whose labels differ.

    Pairs are enumerated per run (Σ size² of them, not batch²), weighted by the label gap and
    the mean sample weight of the pair.
    """
    _, sizes = torch.unique_consecutive(g, return_counts=True)
    starts = torch.cumsum(sizes, 0) - sizes
    row_size = torch.repeat_interleave(sizes, sizes)
    row_start = torch.repeat_interleave(starts, sizes)
    i = torch.repeat_interleave(torch.arange(len(g), device=g.device), row_size)
    first = torch.cumsum(row_size, 0) - row_size  # position of each row's first pair
    j = row_start[i] + torch.arange(len(i), device=g.device) - torch.repeat_interleave(first, row_size)
    gap = y[i] - y[j]
    keep = gap > _RANK_MARGIN
    if not bool(keep.any()):
        return logits.sum() * 0.0  # keeps the graph (and DDP's gradient sync) intact
    i, j, gap = i[keep], j[keep], gap[keep]
    pw = gap * 0.5 * (w[i] + w[j])
    return (F.softplus(logits[j] - logits[i]) * pw).sum() / pw.sum()


class UtilityLitModule(pl.LightningModule):
    """Lightning wrapper: owns a :class:`UtilityNet`, the losses, validation metrics and AdamW.

    Rebuildable from its checkpoint alone (``UtilityLitModule.load_from_checkpoint(path).net``):
    the model config is a hyper-parameter and the normalisation statistics are buffers.

    Args:
        model_config: the net's architecture (a ``UtilityNetConfig`` or its ``to_dict()``).
        lr, weight_decay, objective, rank_weight, bce_weight, session_share: as in :class:`FitConfig`.
    """

    def __init__(self, model_config: UtilityNetConfig | Mapping[str, Any], lr: float = 2e-3,
                 weight_decay: float = 1e-4, objective: str = "listwise", rank_weight: float = 1.0,
                 bce_weight: float = 0.2, session_share: bool = True) -> None:
        super().__init__()
        cfg = model_config if isinstance(model_config, UtilityNetConfig) else UtilityNetConfig(**model_config)
        self.save_hyperparameters({"model_config": cfg.to_dict(), "lr": lr, "weight_decay": weight_decay,
                                   "objective": objective, "rank_weight": rank_weight, "bce_weight": bce_weight,
                                   "session_share": session_share})
        self.net = UtilityNet(cfg)
        if not session_share:  # the ablation: every memory stands alone, w stays ~0
            with torch.no_grad():
                self.net.session_weight_raw.fill_(-30.0)
            self.net.session_weight_raw.requires_grad_(False)
        self.history: list[dict[str, float]] = []  # one entry per validation epoch
        self._val: list[tuple[torch.Tensor, ...]] = []
        self._t_epoch = 0.0
        self._last_epoch_s = float("nan")

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(x)  # type: ignore[no-any-return]

    def log_utility(self, x: torch.Tensor, sessions: torch.Tensor) -> torch.Tensor:
        """The log-utility of each row, its session share taken among its session's rows in ``x``."""
        c, b = self.net(x)
        return log_utility(c, b, sessions, self.net.session_weight)

    def losses(self, s: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
               g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(total, bce, rank)`` for log-utilities ``s`` of rows labelled ``y`` (weights ``w``, groups ``g``)."""
        h = self.hparams
        bce = weighted_bce_log(s, y, w)
        if h["objective"] == "pointwise":
            return bce, bce, s.sum() * 0.0
        rank = listwise_loss(s, y, w, g) if h["objective"] == "listwise" else pairwise_rank_loss(s, y, w, g)
        return h["bce_weight"] * bce + h["rank_weight"] * rank, bce, rank

    def training_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> torch.Tensor:
        x, y, w, g, sess, _ = batch
        loss, bce, rank = self.losses(self.log_utility(x, sess), y, w, g)
        self.log("train_bce", bce, on_step=False, on_epoch=True, batch_size=len(y))
        self.log("train_rank", rank, on_step=False, on_epoch=True, batch_size=len(y))
        self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=True, batch_size=len(y))
        return loss

    def on_train_epoch_start(self) -> None:
        self._t_epoch = time.perf_counter()

    def on_validation_epoch_start(self) -> None:
        # Validation runs at the end of each training epoch: the time so far is pure training.
        if not self.trainer.sanity_checking:
            self._last_epoch_s = time.perf_counter() - self._t_epoch

    def validation_step(self, batch: tuple[torch.Tensor, ...], batch_idx: int) -> None:
        x, y, w, g, sess, kept = batch
        self._val.append((self.log_utility(x, sess).detach().float().cpu(), y.cpu(), w.cpu(), g.cpu(), kept.cpu()))

    def on_validation_epoch_end(self) -> None:
        if not self._val:
            return
        s, y, w, g, kept = (torch.cat(t) for t in zip(*self._val))
        self._val.clear()
        loss, _, _ = self.losses(s, y, w, g)
        sn, pos = s.numpy(), y.numpy() > 0.5
        m = {"val_loss": float(loss), "val_auc": roc_auc(sn, pos), "val_ap": average_precision(sn, pos),
             "val_recall": group_recall(sn, y.numpy(), g.numpy(), kept.numpy()),
             "session_weight": float(self.net.session_weight.detach())}
        self.log_dict(m, prog_bar=True, sync_dist=self.trainer.world_size > 1)
        self.log("epoch_seconds", self._last_epoch_s, sync_dist=self.trainer.world_size > 1)
        if not self.trainer.sanity_checking:
            self.history.append({"epoch": float(self.current_epoch), **m,
                                 "epoch_seconds": self._last_epoch_s})

    def configure_optimizers(self) -> torch.optim.Optimizer:
        # No decay on biases and LayerNorm gains (1-D parameters): decaying them only hurts.
        decay = [p for p in self.parameters() if p.ndim >= 2]
        rest = [p for p in self.parameters() if p.ndim < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": self.hparams["weight_decay"]},
                                  {"params": rest, "weight_decay": 0.0}], lr=self.hparams["lr"])


# --------------------------------------------------------------------------------------------- run
def _history_from_csv(path: Path) -> list[dict[str, float]]:
    keys = ("epoch", "val_loss", "val_auc", "val_ap", "val_recall", "session_weight", "epoch_seconds")
    with path.open() as f:
        return [{k: float(r[k]) if r.get(k) else float("nan") for k in keys}
                for r in csv.DictReader(f) if r.get("val_loss")]


@dataclass
class FitResult:
    """What :func:`run` produced.

    Attributes:
        model: the best ``UtilityNet`` (lowest ``val_loss``), on CPU, in eval mode.
        model_config: its architecture.
        best_val_loss: weighted BCE on the validation split at the best epoch.
        metrics: validation metrics at the best epoch (``val_loss``, ``val_auc``, ``val_ap``,
            ``epoch``) plus ``train_rows_per_s`` (median over epochs).
        epochs_run: epochs trained (≤ ``max_epochs``; fewer when early stopping fired).
        checkpoint_path: the best Lightning checkpoint.
        log_dir: the CSV logger's directory (``metrics.csv``, ``hparams.yaml``).
        n_train, n_val: rows; n_train_groups, n_val_groups: episodes on each side.
        seconds: wall time of ``trainer.fit``.
        history: per-epoch validation metrics.
    """

    model: UtilityNet
    model_config: UtilityNetConfig
    best_val_loss: float
    metrics: dict[str, float]
    epochs_run: int
    checkpoint_path: Path
    log_dir: Path
    n_train: int
    n_val: int
    n_train_groups: int
    n_val_groups: int
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (everything but the model)."""
        return {"best_val_loss": self.best_val_loss, "metrics": self.metrics, "epochs_run": self.epochs_run,
                "checkpoint_path": str(self.checkpoint_path), "log_dir": str(self.log_dir),
                "n_train": self.n_train, "n_val": self.n_val, "n_train_groups": self.n_train_groups,
                "n_val_groups": self.n_val_groups, "seconds": self.seconds,
                "model_config": self.model_config.to_dict(), "history": self.history}


def run(cfg: FitConfig, data: FitData, *, spec: FeatureSpec, out_dir: str | os.PathLike[str]) -> FitResult:
    """Split by group, fit with early stopping, and return the best model.

    Writes ``out_dir/checkpoints/best.ckpt`` and ``out_dir/logs/{metrics.csv,hparams.yaml}``.

    Args:
        cfg: the fit configuration.
        data: the rows and their groupings (:class:`train.dataset.FitData`: :func:`train.dataset.fit_data`
            of collected rounds, the shipped real rows, or both joined with ``FitData.concat``).
        spec: the feature spec ``X`` was made with (sets the model's input and embedding widths).
        out_dir: where checkpoints and logs go (created).

    Raises:
        ValidationError: shapes that do not match ``spec``, or a single split group.
    """
    if not isinstance(data, FitData):
        raise ValidationError("run() takes a train.dataset.FitData (train.dataset.fit_data(rounds))", field="data")
    if data.X.ndim != 2 or data.X.shape[1] != spec.n_features:
        raise ValidationError(f"X must have shape (n, {spec.n_features}) for feature spec v{spec.version}, "
                              f"got {data.X.shape}", field="X")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    dm = UtilityDataModule(data, batch_size=cfg.batch_size, val_frac=cfg.val_frac, seed=cfg.seed,
                           num_workers=cfg.num_workers, embedding_dim=spec.embedding_dim)
    dm.setup("fit")
    assert dm.train_idx is not None and dm.val_idx is not None and dm.norm_stats is not None
    net_cfg = UtilityNetConfig.for_spec(spec, hidden=cfg.hidden, dropout=cfg.dropout,
                                        embedding_proj=cfg.embedding_proj, members=cfg.members,
                                        session_weight=cfg.session_weight,
                                        ignore=INPUTS[cfg.inputs])
    lit = UtilityLitModule(net_cfg, lr=cfg.lr, weight_decay=cfg.weight_decay, objective=cfg.objective,
                           rank_weight=cfg.rank_weight, bce_weight=cfg.bce_weight, session_share=cfg.session_share)
    lit.net.set_normalization(*dm.norm_stats)

    ckpt = ModelCheckpoint(dirpath=out / "checkpoints", filename="best", monitor="val_loss", mode="min",
                           save_top_k=1, enable_version_counter=False)
    logger = CSVLogger(save_dir=out, name="logs", version="")
    show = not os.environ.get("CI")
    n_batches = math.ceil(len(dm.train_idx) / cfg.batch_size)
    # Trainer(deterministic=...) flips a process-global torch flag; the caller gets theirs back after.
    was_det = torch.are_deterministic_algorithms_enabled()
    was_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    trainer = pl.Trainer(
        accelerator=cfg.accelerator,
        devices=list(cfg.devices) if isinstance(cfg.devices, tuple) else cfg.devices,
        strategy=cfg.strategy, num_nodes=cfg.num_nodes, precision=cfg.precision,  # type: ignore[arg-type]
        max_epochs=cfg.max_epochs, logger=logger, deterministic=cfg.deterministic,
        callbacks=[EarlyStopping("val_loss", patience=cfg.patience, mode="min"), ckpt],
        log_every_n_steps=min(cfg.log_every_n_steps, n_batches),
        enable_progress_bar=show, enable_model_summary=show, num_sanity_val_steps=0,
        use_distributed_sampler=False, default_root_dir=out)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # Batches are tensor gathers in the main process: workers would only add IPC.
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            trainer.fit(lit, datamodule=dm)
    finally:
        torch.use_deterministic_algorithms(was_det, warn_only=was_warn)
    seconds = time.perf_counter() - t0

    best_path = Path(ckpt.best_model_path)
    state = torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"]
    lit.load_state_dict(state)
    model = lit.net.cpu().eval()
    # ddp_spawn trains in child processes: then the CSV log is the only record of the epochs.
    hist = lit.history or _history_from_csv(Path(logger.log_dir) / "metrics.csv")
    if not hist:
        raise RuntimeError(f"no validation epoch was logged under {logger.log_dir}; is the val split empty?")
    best = min(hist, key=lambda h: h["val_loss"])
    speeds = [len(dm.train_idx) / h["epoch_seconds"] for h in hist if h["epoch_seconds"] > 0]
    metrics = {**best, "train_rows_per_s": float(np.median(speeds)) if speeds else float("nan")}
    metrics.pop("epoch_seconds", None)
    return FitResult(model=model, model_config=net_cfg, best_val_loss=float(best["val_loss"]),
                     metrics=metrics,
                     epochs_run=len(hist), checkpoint_path=best_path,
                     log_dir=Path(logger.log_dir),
                     n_train=len(dm.train_idx), n_val=len(dm.val_idx),
                     n_train_groups=len(np.unique(dm.groups[dm.train_idx])),
                     n_val_groups=len(np.unique(dm.groups[dm.val_idx])), seconds=seconds, history=hist)
