"""Fit the utility model on collected rounds (and the shipped real rows), on one machine or many.

``make train`` fits inside its loop on one machine. To fit on more — a bigger preset, your own logs,
a cluster — collect the rounds once (``python -m train.loop``), then run this fit under a launcher;
every rank reads the same rows, Lightning's DDP splits the batches, and rank 0 exports the model::

    # 2 nodes × 1 process each (run on every node; torchrun sets the ranks)
    torchrun --nnodes 2 --nproc-per-node 1 --node-rank $NODE_RANK \\
        --master-addr $MASTER --master-port 29500 \\
        -m train.fit --preset default --rounds data/round_* --num-nodes 2 --out checkpoints/multinode

    # SLURM: Lightning reads the SLURM_* variables itself
    srun --nodes 2 --ntasks-per-node 1 python -m train.fit --preset default --rounds data/round_* \\
        --num-nodes 2 --out checkpoints/multinode

    # one machine, 2 CPU processes (gloo): what the slow DDP test runs
    python -m train.fit --preset default --rounds data/round_* --devices 2 --out /tmp/fit

The result is ``OUT/utilitynet.onnx`` (with the feature spec in its metadata) and ``OUT/fit.json``;
promote it by copying it over ``checkpoints/utilitynet.onnx`` once you have compared it
(``python -m train.eval``), or set ``$MEMIR_MODEL``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from runtime.errors import MemirError


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.fit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="default", help="preset whose fit settings and real rows are used")
    ap.add_argument("--rounds", nargs="+", required=True, help="round directories (data/round_NNN)")
    ap.add_argument("--no-real-rows", action="store_true", help="fit on the rounds only (no data/lme rows)")
    ap.add_argument("--devices", type=int, default=None, help="processes per node (default: the preset's)")
    ap.add_argument("--num-nodes", type=int, default=None, help="machines (default: the preset's)")
    ap.add_argument("--epochs", type=int, default=None, help="max epochs (default: the preset's)")
    ap.add_argument("--strategy", default=None, help="Lightning strategy (default: ddp when devices × nodes > 1)")
    ap.add_argument("--out", required=True, help="output directory")
    a = ap.parse_args(argv)
    try:
        from utilitynet.export import export_onnx
        from utilitynet.features import spec_for

        from ..config import load_preset
        from ..dataset import FitData, fit_data, load_rounds, load_spec
        from ..sources import load_lme_rows
        from .lightning import run

        cfg = load_preset(a.preset)
        fit = cfg.fit
        devices = a.devices if a.devices is not None else fit.devices
        nodes = a.num_nodes if a.num_nodes is not None else fit.num_nodes
        multi = (devices if isinstance(devices, int) else 2) * nodes > 1
        fit = replace(fit, devices=devices, num_nodes=nodes, max_epochs=a.epochs or fit.max_epochs,
                      strategy=a.strategy or ("ddp" if multi and fit.strategy == "auto" else fit.strategy))
        spec = load_spec(a.rounds)
        data = fit_data(load_rounds(a.rounds), source_weights={"sim": cfg.sim_weight})
        real, source = (None, None) if a.no_real_rows else load_lme_rows(cfg.lme_rows, spec_for(
            spec.embedding_dim, spec.encoder_id))
        if real is not None:
            data = FitData.concat([data, real.train])
        y = data.y
        out = Path(a.out)
        res = run(fit, data, spec=spec, out_dir=out / "lightning")
    except MemirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
        return 0
    path = export_onnx(res.model, spec, out / "utilitynet.onnx", metadata={"rows": int(len(y))})
    (out / "fit.json").write_text(json.dumps({
        "model": str(path), "rows": int(len(y)), "best_val_loss": res.best_val_loss, "epochs": res.epochs_run,
        "devices": devices, "num_nodes": nodes, "strategy": fit.strategy, "metrics": res.metrics,
        "real_rows": None if source is None else source.to_dict()}, indent=2, default=float))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
