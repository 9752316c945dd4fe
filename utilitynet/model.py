"""The utility network: a small MLP over ``featurize`` output (seed 001 §4.2). Plain ``nn.Module``.

Input: the float32 matrix of :func:`utilitynet.features.featurize` — named features first, the
unit embedding last. The embedding block is read through a projection, or not at all
(``embedding_proj=0``, the default since schema v3: on conversations it has never seen, a model that reads
the raw embedding learns its training corpus's topics and ranks worse — issue 23's ablation), joined with
the normalised named features, then 1–3 hidden layers and a head with **two outputs** per memory (see
:mod:`utilitynet.session` for how they make a utility):

- ``logit`` *c*: how likely the memory is worth keeping at all;
- ``session_logit`` *b*: how strongly it claims to be the one memory of its session worth keeping.

``members > 1`` makes an ensemble of that many independently initialised MLPs whose outputs are averaged
(cheaper than it sounds: the MLP is a few thousand weights; it steadies the ranking on conversations unlike
the training data). The learned session weight *w* (softplus of a parameter) is exported in the model's
metadata. Input normalisation (mean/std) lives in buffers, so the exported ONNX graph carries it and the
runtime feeds raw features.

Lightning lives in ``train/``; this module only needs torch.

Example:
    >>> from utilitynet.features import spec_for
    >>> cfg = UtilityNetConfig.for_spec(spec_for(384, "all-MiniLM-L6-v2"))
    >>> net = UtilityNet(cfg)
    >>> logit, session_logit = net(torch.zeros(2, cfg.in_features))
    >>> logit.shape, session_logit.shape
    (torch.Size([2]), torch.Size([2]))
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
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
        members: ensemble size (≥ 1): that many MLPs, outputs averaged.
        session_weight: initial session weight *w* (≥ 0; learned during the fit).
        ignore: named features the model does not read (zeroed after normalisation), e.g.
            :data:`utilitynet.features.DYNAMIC_FEATURES` for a model whose utilities never change with
            time or with the other memories held.
        feature_names: the named features in column order (needed with ``ignore``).
    """

    in_features: int
    embedding_dim: int
    embedding_proj: int = 0
    hidden: tuple[int, ...] = (64, 32)
    dropout: float = 0.2
    activation: Literal["gelu", "relu"] = "gelu"
    layer_norm: bool = True
    members: int = 1
    session_weight: float = 0.5
    ignore: tuple[str, ...] = ()
    feature_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(self.hidden))  # YAML gives lists
        object.__setattr__(self, "ignore", tuple(self.ignore))
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
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
        if not isinstance(self.members, int) or self.members < 1:
            problems.append(f"members must be an int >= 1, got {self.members!r}")
        if not (0.0 <= float(self.session_weight) < 1e3):
            problems.append(f"session_weight must be in [0, 1000), got {self.session_weight}")
        if self.ignore:
            if len(self.feature_names) != self.in_features - self.embedding_dim:
                problems.append(f"ignore needs feature_names: the {self.in_features - self.embedding_dim} named "
                                f"features in column order, got {len(self.feature_names)}")
            else:
                unknown = [n for n in self.ignore if n not in self.feature_names]
                if unknown:
                    problems.append(f"ignore names unknown features {unknown[:5]}")
        if problems:
            raise ValueError("invalid UtilityNetConfig — " + "; ".join(problems))

    @property
    def n_meta(self) -> int:
        """Number of named (non-embedding) features at the front of the input."""
        return self.in_features - self.embedding_dim

    @classmethod
    def for_spec(cls, spec: FeatureSpec, **overrides: Any) -> UtilityNetConfig:
        """A config whose input matches ``spec`` (other fields default or from ``overrides``)."""
        names = tuple(spec.names[:spec.n_features - spec.embedding_dim])
        return cls(in_features=spec.n_features, embedding_dim=spec.embedding_dim,
                   **{"feature_names": names if overrides.get("ignore") else (), **overrides})

    def to_dict(self) -> dict[str, Any]:
        """JSON/YAML-ready dict (tuples as lists)."""
        d = asdict(self)
        for k in ("hidden", "ignore", "feature_names"):
            d[k] = list(getattr(self, k))
        return d


class _Member(nn.Module):
    """One MLP of the ensemble: [meta ‖ proj(embedding)] → hidden layers → (c, b)."""

    def __init__(self, config: UtilityNetConfig) -> None:
        super().__init__()
        act: type[nn.Module] = nn.GELU if config.activation == "gelu" else nn.ReLU
        self.n_meta = config.n_meta
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
        self.head = nn.Linear(width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x[:, :self.n_meta]
        if self.embed_proj is not None:
            h = torch.cat([h, self.embed_proj(x[:, self.n_meta:])], dim=1)
        return self.head(self.body(h))


class UtilityNet(nn.Module):
    """Normalise → ``members`` MLPs → mean of their (logit, session_logit) per row.

    Args:
        config: the architecture (see :class:`UtilityNetConfig`).
    """

    feature_mean: torch.Tensor
    feature_std: torch.Tensor
    input_mask: torch.Tensor | None

    def __init__(self, config: UtilityNetConfig) -> None:
        super().__init__()
        self.config = config
        # Buffers, not parameters: set from training data, saved in state_dict and in the ONNX graph.
        self.register_buffer("feature_mean", torch.zeros(config.in_features))
        self.register_buffer("feature_std", torch.ones(config.in_features))
        mask: torch.Tensor | None = None
        if config.ignore:
            mask = torch.ones(config.in_features)
            for name in config.ignore:
                mask[config.feature_names.index(name)] = 0.0
        self.register_buffer("input_mask", mask)  # None: every column is read (and no mask in the graph)
        self.members = nn.ModuleList(_Member(config) for _ in range(config.members))
        # w = softplus(raw): the session weight stays >= 0 whatever the optimiser does.
        w0 = float(config.session_weight)
        raw = math.log(math.expm1(w0)) if w0 > 1e-6 else -14.0
        self.session_weight_raw = nn.Parameter(torch.tensor(raw))

    @property
    def session_weight(self) -> torch.Tensor:
        """The learned session weight *w* ≥ 0 (a scalar tensor)."""
        return F.softplus(self.session_weight_raw)

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

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x``: (batch, in_features) float32 → ``(logit, session_logit)``, each (batch,)."""
        x = (x - self.feature_mean) / self.feature_std
        if self.input_mask is not None:
            x = x * self.input_mask
        out = self.members[0](x)
        for m in self.members[1:]:
            out = out + m(x)
        out = out / len(self.members)
        return out[:, 0], out[:, 1]


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
