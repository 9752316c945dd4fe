"""Fit across processes: the same fit with Lightning's DDP (2 CPU processes, gloo) and alone.

Lightning starts the other ranks by running this module again, which is why it must be a module
run as ``__main__`` (not a function called from a test). The data is synthetic and seeded, so both
fits see the same rows; the DDP fit's rank 0 writes the result.

Across nodes it is the same fit: set ``fit.num_nodes``/``fit.devices``/``fit.strategy: ddp`` in a
preset and start one process per node with ``torchrun`` (``--nnodes``, ``--node_rank``,
``--master_addr``) or under SLURM (``srun``), which Lightning detects.

Example:
    python -m train.fit.ddp_check --devices 2 --out /tmp/ddp.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from utilitynet.features import spec_for

from ..dataset.groups import FitData
from .lightning import FitConfig, run

__all__ = ["main", "synthetic_rows"]


def synthetic_rows(n: int = 6000, seed: int = 0) -> FitData:
    """Rows whose label depends on a few named features (a learnable problem), in 60 split groups of
    decision groups of 20 rows (4 sessions of 5 each)."""
    spec = spec_for(16, "ddp-check")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, spec.n_features)).astype(np.float32)
    logit = 2.0 * X[:, 0] - 1.5 * X[:, 5] + X[:, 9]
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    rows = np.arange(n)
    return FitData(X, y, np.ones(n, np.float32), (rows // 20) % 60, rows // 20, rows // 5, np.zeros(n, bool))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.fit.ddp_check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=2, help="processes (CPU ranks)")
    ap.add_argument("--strategy", default="ddp")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--objective", default="pointwise", choices=("pointwise", "listwise", "pairwise"))
    ap.add_argument("--out", required=True, help="JSON result written by rank 0")
    a = ap.parse_args(argv)
    data = synthetic_rows()
    # Pointwise, without the session share: the validation loss is then a plain BCE, comparable across
    # the two runs and against a constant predictor (~0.69). The listwise objective runs the same code
    # path through DDP (batches of whole decision groups on every rank).
    cfg = FitConfig(devices=a.devices, strategy=a.strategy, max_epochs=a.epochs, patience=4, batch_size=256,
                    hidden=(16,), embedding_proj=2, deterministic=False, objective=a.objective,
                    bce_weight=1.0 if a.objective == "pointwise" else 0.2, session_share=a.objective != "pointwise")
    with tempfile.TemporaryDirectory(prefix="memir-ddp-") as tmp:
        res = run(cfg, data, spec=spec_for(16, "ddp-check"), out_dir=Path(tmp) / "fit")
    import torch.distributed as dist
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    if rank == 0:
        Path(a.out).write_text(json.dumps({"devices": a.devices, "strategy": a.strategy,
                                           "best_val_loss": res.best_val_loss, "epochs": res.epochs_run,
                                           "val_recall": res.metrics.get("val_recall"),
                                           "world_size": dist.get_world_size() if dist.is_initialized() else 1}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
