"""The real data a training run learns from, and what it is allowed to be used for.

A run names every source it was configured with — used, or skipped and why — in its log and its
model card, with the licence that governs a model fit on it:

- the simulator (always; generated);
- LongMemEval rows (MIT): the shipped directory ``data/lme`` of precomputed rows, split by question
  into ``lme`` (training) and ``lme-validation`` (round selection and promotion) rows;
- your own chat logs (:mod:`train.logs`), labelled;
- LoCoMo-layout conversations (CC BY-NC 4.0): research presets only; a model fit on them carries
  that restriction in its card and is never the shipped default.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .dataset import load_rounds, read_manifest, to_numpy

__all__ = ["LME_VALIDATION", "RealRows", "Source", "load_lme_rows"]

LME_TRAIN = "lme"
LME_VALIDATION = "lme-validation"


@dataclass
class Source:
    """One configured source: ``used`` or skipped (``reason``), what it held, its licence."""

    name: str
    used: bool
    license: str
    detail: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    def line(self) -> str:
        state = "used" if self.used else f"SKIPPED ({self.reason})"
        facts = ", ".join(f"{k} {v}" for k, v in self.detail.items() if not isinstance(v, (list, dict)))
        return f"source {self.name}: {state}{'; ' + facts if facts else ''}; licence: {self.license}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "used": self.used, "license": self.license, "detail": self.detail,
                "reason": self.reason}


@dataclass
class RealRows:
    """Precomputed real rows: training rows, and the validation rows selection is made on."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray
    groups: np.ndarray
    decisions: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray

    @property
    def has_validation(self) -> bool:
        return len(self.y_val) > 0 and 0 < float(self.y_val.sum()) < len(self.y_val)


def load_lme_rows(path: str | Path | None, n_features: int) -> tuple[RealRows | None, Source]:
    """The shipped LongMemEval rows at ``path`` (a round-format directory), checked against their
    manifest; a missing directory is a skipped source, said out loud."""
    lic = "MIT (LongMemEval, Wu et al. 2025)"
    if path is None:
        return None, Source("longmemeval", False, lic, reason="not in this preset")
    p = Path(path)
    if not (p / "rows.parquet").is_file():
        return None, Source("longmemeval", False, lic, {"path": str(p)},
                            reason=f"no rows at {p} (build them with `python -m train.lme.build_rows`)")
    ds = load_rounds([p])
    X, y, w, g = to_numpy(ds)
    if X.shape[1] != n_features:
        return None, Source("longmemeval", False, lic, {"path": str(p)},
                            reason=f"rows have {X.shape[1]} features, this run computes {n_features}: rebuild them")
    from .dataset import decision_groups
    fam = np.asarray(ds["family"])
    val = fam == LME_VALIDATION
    ids = np.asarray(ds["episode_id"])
    man = read_manifest(p)
    detail = {"path": str(p), "rows": int(len(y)), "training questions": int(len(set(ids[~val].tolist()))),
              "validation questions": int(len(set(ids[val].tolist()))), "sha256": man.get("sha256", "")[:16]}
    rows = RealRows(X[~val], y[~val], w[~val], g[~val], decision_groups(ds)[~val], X[val], y[val])
    return rows, Source("longmemeval", True, lic, detail)


def warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
