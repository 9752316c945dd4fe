"""Build the shipped LongMemEval training rows: ``python -m train.lme.build_rows FILE --out data/lme``.

Streams every question of FILE (LongMemEval's own layout, ``.json`` or ``.json.gz``) through the
production path under the collection policies of :mod:`train.conversation_rows`, keeps each
question's rows in a cache (``--rows-cache``, one ``.npz`` per question: an interrupted build resumes
where it stopped), and writes the compact directory :mod:`train.lme.shipped` describes. Questions are
split into folds by :mod:`train.lme.folds` (questions that share evidence sessions stay together);
``--validation-fold`` is held out of every fit for round selection and promotion.

Encoding every turn of the 329-question dev split takes about an hour on two cores; the embedding
cache (``--cache``) makes every later build free of it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from runtime.errors import ValidationError

from ..conversation_rows import RowConfig
from ..embedcache import cached_embedder
from .folds import fold_of, groups
from .reader import iter_lme
from .rows import ensure_rows, load_rows, rows_path
from .shipped import write_shipped


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m train.lme.build_rows", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path, help="a LongMemEval file (.json or .json.gz)")
    ap.add_argument("--out", type=Path, default=Path("data/lme"))
    ap.add_argument("--rows-cache", type=Path, default=Path("data/lme_rows"))
    ap.add_argument("--cache", type=Path, default=Path("data/cache/embeddings"), help="embedding cache")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--validation-fold", type=int, default=0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: every CPU)")
    ap.add_argument("--held", choices=("evidence", "uniform"), default=RowConfig.held,
                    help="which held decisions become training groups (train.conversation_rows)")
    ap.add_argument("--held-decisions", type=int, default=RowConfig.held_decisions,
                    help="decisions drawn per policy and capacity with --held uniform")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    if not a.file.is_file():
        print(f"error: {a.file}: no such file", file=sys.stderr)
        return 2
    if not 0 <= a.validation_fold < a.folds:
        print(f"error: --validation-fold must be in [0, {a.folds})", file=sys.stderr)
        return 2
    try:
        cfg = RowConfig(held=a.held, held_decisions=a.held_decisions)
    except ValueError as e:
        print(f"error: {e} (--held-decisions)", file=sys.stderr)
        return 2
    emb = cached_embedder("onnx", a.cache)
    ids = [q.question_id for q in iter_lme(a.file)]
    fold = fold_of(groups(iter_lme(a.file)), a.folds)
    try:
        ensure_rows(a.file, emb, a.rows_cache, cfg, progress=not a.no_progress, total=len(ids),
                    workers=a.workers)
    except ValidationError as e:  # the rows folder holds rows of another configuration
        print(f"error: {e}", file=sys.stderr)
        return 2
    from utilitynet.features import spec_for
    rows = [load_rows(rows_path(a.rows_cache, i)) for i in ids]
    out = write_shipped(rows, fold, a.validation_fold, spec_for(emb.dim, emb.encoder_id), a.out,
                        source={"file": a.file.name, "sha256": _sha256(a.file), "questions": len(ids),
                                "folds": a.folds, "row_config": cfg.__dict__})
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {out} ({size / 1e6:.1f} MB) from {len(ids)} questions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
