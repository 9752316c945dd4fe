"""The real data a training run learns from, and what it is allowed to be used for.

A run names every source it was configured with — used, or skipped and why — in its log and its
model card, with the licence that governs a model fit on it:

- the simulator (always; generated);
- LongMemEval rows (MIT): the shipped directory ``data/lme`` of precomputed rows
  (:mod:`train.lme.shipped`), split by question into training and validation (round selection and
  promotion) rows;
- your own chat logs (:mod:`train.logs`), labelled;
- LoCoMo-layout conversations (CC BY-NC 4.0): research presets only; a model fit on them carries
  that restriction in its card and is never the shipped default.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from utilitynet.features import FeatureSpec

from .dataset.groups import FitData, session_segments
from .lme.shipped import SPLIT_TRAIN, SPLIT_VALIDATION, ShippedRows, read_shipped

__all__ = ["RealRows", "Source", "load_lme_rows", "shipped_fit_data"]



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

    train: FitData
    val: FitData
    has_vectors: bool = False

    @property
    def has_validation(self) -> bool:
        return len(self.val) > 0 and 0 < float(self.val.y.sum()) < len(self.val)


def shipped_fit_data(rows: ShippedRows) -> FitData:
    """One split of the shipped rows as :class:`~train.dataset.FitData` (question = split group)."""
    return FitData(rows.X, rows.y, rows.w, rows.question, rows.decision,
                   session_segments(rows.decision, rows.session), rows.kept)


def load_lme_rows(path: str | Path | None, spec: FeatureSpec) -> tuple[RealRows | None, Source]:
    """The shipped LongMemEval rows at ``path`` (:mod:`train.lme.shipped`), verified against their
    manifest and this run's feature spec; a missing directory is a skipped source, said out loud."""
    lic = "MIT (LongMemEval, Wu et al. 2025)"
    if path is None:
        return None, Source("longmemeval", False, lic, reason="not in this preset")
    p = Path(path)
    if not (p / "manifest.json").is_file():
        return None, Source("longmemeval", False, lic, {"path": str(p)},
                            reason=f"no rows at {p} (build them with `python -m train.lme.build_rows FILE`)")
    train, val, man = read_shipped(p, spec)
    detail = {"path": str(p), "rows": int(len(train.y) + len(val.y)),
              "training questions": man["questions"][SPLIT_TRAIN],
              "validation questions": man["questions"][SPLIT_VALIDATION],
              "source file": man["source"].get("file"), "sha256": man["sha256"]["rows.parquet"][:16]}
    rows = RealRows(shipped_fit_data(train), shipped_fit_data(val), train.has_vectors)
    return rows, Source("longmemeval", True, lic, detail)


def warn(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
