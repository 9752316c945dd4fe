"""The utility network: a small MLP over ``featurize`` output (seed 001 §4.2). Plain ``nn.Module``.

Input: the float32 matrix of :func:`utilitynet.features.featurize` — named features first, the
unit embedding last. The embedding block is projected down first (so the few dozen metadata
features are not drowned by 384 embedding dims), concatenated with the normalised metadata, then
2–3 hidden layers. Output: one raw **logit** per memory (train with ``BCEWithLogitsLoss``; the
runtime scorer turns it into a utility with a sigmoid). Input normalisation (mean/std) lives in
buffers, so the exported ONNX graph carries it and the runtime feeds raw features.

Lightning lives in ``train/``; this module only needs torch.

Example:
    >>> from utilitynet.features import spec_for
    >>> cfg = UtilityNetConfig.for_spec(spec_for(384, "all-MiniLM-L6-v2"))
    >>> net = UtilityNet(cfg)
    >>> net(torch.zeros(2, cfg.in_features)).shape
    torch.Size([2])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from .features import FeatureSpec

__all__ = ["UtilityNet", "UtilityNetConfig", "normalization_stats"]


@dataclass(frozen=True)
class UtilityNetConfig:
    """Shape and regularisation of :class:`UtilityNet`; bad values raise one ``ValueError`` naming each field.

    Attributes:
        in_features: total input width (= ``FeatureSpec.n_features``); > embedding_dim.
        embedding_dim: width of the trailing embedding block (0 = no embedding).
        embedding_proj: width the embedding is projected to before joining the metadata; 0 = the
            embedding block is not read at all (the model sees only the named features, so it
            cannot memorise topics of its training corpus).
        hidden: sizes of the hidden layers after the join; 1–3 layers (seed 001 §4.2: 2–3 suffice).
        dropout: dropout after each hidden activation, in [0, 1).
        activation: ``"gelu"`` or ``"relu"``.
        layer_norm: LayerNorm after each hidden linear layer (stabilises the mixed-scale inputs).
    """

    in_features: int
    embedding_dim: int
    embedding_proj: int = 32
    hidden: tuple[int, ...] = (128, 64)
    dropout: float = 0.1
    activation: Literal["gelu", "relu"] = "gelu"
    layer_norm: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(self.hidden))  # YAML gives lists
        problems = []
        if self.embedding_dim < 0:
            problems.append(f"embedding_dim must be >= 0, got {self.embedding_dim}")
        if self.in_features <= max(self.embedding_dim, 0):
            problems.append(f"in_features ({self.in_features}) must exceed embedding_dim "
                            f"({self.embedding_dim}): the named features come first")
        if self.embedding_proj < 0:
            problems.append(f"embedding_proj must be >= 0 (0 = ignore the embedding), got {self.embedding_proj}")
        if not 1 <= len(self.hidden) <= 3 or any(int(h) < 1 for h in self.hidden):
            problems.append(f"hidden must be 1–3 positive layer sizes, got {self.hidden}")
        if not 0.0 <= self.dropout < 1.0:
            problems.append(f"dropout must be in [0, 1), got {self.dropout}")
        if self.activation not in ("gelu", "relu"):
            problems.append(f"activation must be 'gelu' or 'relu', got {self.activation!r}")
        if problems:
            raise ValueError("invalid UtilityNetConfig — " + "; ".join(problems))

    @property
    def n_meta(self) -> int:
        """Number of named (non-embedding) features at the front of the input."""
        return self.in_features - self.embedding_dim

    @classmethod
    def for_spec(cls, spec: FeatureSpec, **overrides: Any) -> UtilityNetConfig:
        """A config whose input matches ``spec`` (other fields default or from ``overrides``)."""
        return cls(in_features=spec.n_features, embedding_dim=spec.embedding_dim, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """JSON/YAML-ready dict (``hidden`` as a list)."""
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        return d


class UtilityNet(nn.Module):
    """MLP: normalise → [meta ‖ proj(embedding)] → hidden layers → one logit per row.

    Args:
        config: the architecture (see :class:`UtilityNetConfig`).
    """

    feature_mean: torch.Tensor
    feature_std: torch.Tensor

    def __init__(self, config: UtilityNetConfig) -> None:
        super().__init__()
        self.config = config
        # Buffers, not parameters: set from training data, saved in state_dict and in the ONNX graph.
        self.register_buffer("feature_mean", torch.zeros(config.in_features))
        self.register_buffer("feature_std", torch.ones(config.in_features))
        act: type[nn.Module] = nn.GELU if config.activation == "gelu" else nn.ReLU
        self.embed_proj: nn.Module | None = None
        width = config.n_meta
        if config.embedding_dim > 0 and config.embedding_proj > 0:
            self.embed_proj = nn.Sequential(nn.Linear(config.embedding_dim, config.embedding_proj), act())
            width += config.embedding_proj
        layers: list[nn.Module] = []
        for h in config.hidden:
            layers += [nn.Linear(width, h)]
            if config.layer_norm:
                layers += [nn.LayerNorm(h)]
            layers += [act(), nn.Dropout(config.dropout)]
            width = h
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 1)

    def set_normalization(self, mean: np.ndarray | torch.Tensor, std: np.ndarray | torch.Tensor) -> None:
        """Install per-feature input statistics (std floored at 1e-6 so constant columns stay finite)."""
        mean_t = torch.as_tensor(np.asarray(mean, dtype=np.float32))
        std_t = torch.as_tensor(np.asarray(std, dtype=np.float32)).clamp_min(1e-6)
        n = self.config.in_features
        if mean_t.shape != (n,) or std_t.shape != (n,):
            raise ValueError(f"mean/std must have shape ({n},), got {tuple(mean_t.shape)} / "
                             f"{tuple(std_t.shape)}")
        self.feature_mean.copy_(mean_t)
        self.feature_std.copy_(std_t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (batch, in_features) float32 → (batch,) logits."""
        x = (x - self.feature_mean) / self.feature_std
        m = self.config.n_meta
        h = x[:, :m]
        if self.embed_proj is not None:
            h = torch.cat([h, self.embed_proj(x[:, m:])], dim=1)
        return self.head(self.body(h)).squeeze(-1)


def normalization_stats(X: np.ndarray, embedding_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean/std of a training matrix for :meth:`UtilityNet.set_normalization`.

    The embedding block is left as is (mean 0, std 1): it is already unit-norm, and per-dimension
    standardisation would blow up near-constant dimensions of a sentence encoder.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"normalization_stats needs a non-empty 2-D matrix, got shape {X.shape}")
    mean, std = X.mean(axis=0), X.std(axis=0)
    if embedding_dim > 0:
        mean[-embedding_dim:], std[-embedding_dim:] = 0.0, 1.0
    std = np.where(std < 1e-6, 1.0, std)  # a constant column (e.g. a flag never seen) passes through
    return mean.astype(np.float32), std.astype(np.float32)
