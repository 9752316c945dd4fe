"""Evaluate retention policies: real conversations (LoCoMo layout) and held-out simulated tasks.

Commands (``python -m train.evaluate COMMAND --help`` for each):

- ``locomo FILE [FILE ...]``: stream each conversation through the runtime under every policy and
  capacity (:func:`train.locomo.replay.replay_conversation`); evidence recall (categories 1–4)
  overall and per category, and retrieval recall@k. Works on any file in LoCoMo's layout.
- ``locomo-loo FILE``: leave-one-conversation-out: for each conversation, fit the utility model on
  the other conversations' rows, export it to ONNX, and evaluate it on the held-out one through the
  runtime — the honest generalisation figure for a model that has seen real dialogue.
- ``synthetic``: held-out families of the simulator (eval templates and entities): question success,
  key-fact recall, stale answers, forget precision, constraint violations, update latency, and
  cross-user leakage with typed scopes on / off.
- ``all``: what ``make eval`` runs: synthetic + locomo on ``../shared/data/locomo/locomo-dev.json``
  (if present); writes ``OUT.json``, a Markdown summary and PNG plots next to it.

Examples:
    python -m train.evaluate locomo ../shared/data/locomo/locomo-dev.json --capacities 0.1 0.2 \\
        --policies utilitynet recency longest oracle --out reports/locomo.json
    python -m train.evaluate locomo-loo ../shared/data/locomo/locomo-dev.json --out reports/loo.json
    python -m train.evaluate synthetic --episodes 8 --capacities 0.1 0.2 --out reports/sim.json
    python -m train.evaluate all --out reports/eval.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.errors import MemirError
from runtime.scoring import Scorer

from .locomo.reader import RECALL_CATEGORIES, Conversation, load_locomo
from .locomo.replay import ConversationRun, locomo_oracle, replay_conversation

__all__ = [
    "LOCOMO_POLICIES",
    "SIM_POLICIES",
    "evaluate_locomo",
    "evaluate_synthetic",
    "locomo_table",
    "loo_locomo",
    "main",
    "summarize_locomo",
]

LOCOMO_POLICIES = ("utilitynet", "recency", "lru", "random", "longest", "generative_agents", "memorybank",
                   "memoryos", "oracle")
SIM_POLICIES = LOCOMO_POLICIES
DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"


def _bar(total: int, desc: str, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="run", leave=False, file=sys.stderr)


def locomo_policy(name: str, conv: Conversation, model: str | None) -> Scorer:
    """The scorer for one policy name on one conversation (the oracle reads its questions)."""
    if name == "oracle":
        return locomo_oracle(conv)
    if name == "utilitynet":
        from runtime.scoring import UtilityScorer
        return UtilityScorer(model)
    from runtime.scoring import make_baseline
    return make_baseline(name)  # type: ignore[return-value]


def _vectors(convs: Sequence[Conversation], emb: Any, progress: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from .locomo.rows import conversation_vectors
    out = {}
    bar = _bar(len(convs), "embed conversations", progress)
    for c in convs:
        out[c.sample_id] = conversation_vectors(c, emb)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


def evaluate_locomo(convs: Sequence[Conversation], policies: Sequence[str], capacities: Sequence[float], emb: Any, *,
                    model: str | None = None, k: int = 5, progress: bool = True,
                    scorer_for: Callable[[str, Conversation], Scorer] | None = None,
                    vectors: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> list[ConversationRun]:
    """Every (policy, capacity, conversation) run, through the runtime."""
    bad = [p for p in policies if p not in LOCOMO_POLICIES and scorer_for is None]
    if bad:
        raise MemirError(f"unknown policies {bad}; valid: {', '.join(LOCOMO_POLICIES)}")
    vectors = vectors or _vectors(convs, emb, progress)
    make = scorer_for or (lambda name, conv: locomo_policy(name, conv, model))
    runs = []
    bar = _bar(len(policies) * len(capacities) * len(convs), "locomo", progress)
    for name in policies:
        for p in capacities:
            for conv in convs:
                tv, qv = vectors[conv.sample_id]
                run = replay_conversation(conv, make(name, conv), emb, p, k=k, turn_vectors=tv, question_vectors=qv)
                run.policy = name
                runs.append(run)
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    return runs


def summarize_locomo(runs: Sequence[ConversationRun]) -> dict[str, dict[str, Any]]:
    """Pooled over conversations, per policy and capacity: ``summary[policy][str(p)]``."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        cell = out.setdefault(r.policy, {}).setdefault(str(r.capacity), {
            "cat": {str(c): [0, 0] for c in RECALL_CATEGORIES}, "ret": {str(c): [0, 0] for c in RECALL_CATEGORIES},
            "conversations": 0, "violations": 0})
        cell["conversations"] += 1
        cell["violations"] += r.violations
        for c in cell["cat"]:
            for j in (0, 1):
                cell["cat"][c][j] += r.category_counts[c][j]
                cell["ret"][c][j] += r.retrieval_counts[c][j]
    for pol in out.values():
        for cell in pol.values():
            cat, ret = cell.pop("cat"), cell.pop("ret")
            hits, pairs = sum(v[0] for v in cat.values()), sum(v[1] for v in cat.values())
            found, asked = sum(v[0] for v in ret.values()), sum(v[1] for v in ret.values())
            cell.update({
                "recall": hits / pairs if pairs else None, "n_pairs": pairs,
                "by_category": {c: (v[0] / v[1] if v[1] else None) for c, v in cat.items()},
                "retrieval_recall_at_k": found / asked if asked else None, "n_questions": asked,
                "retrieval_by_category": {c: (v[0] / v[1] if v[1] else None) for c, v in ret.items()},
            })
    return out


def locomo_table(summary: dict[str, dict[str, Any]]) -> str:
    """Plain-text table: policy × capacity × category (evidence recall) + retrieval recall@k."""
    cats = [str(c) for c in RECALL_CATEGORIES]
    head = f"{'policy':<18} {'p':>5} {'recall':>7} " + " ".join(f"{'cat' + c:>6}" for c in cats) + f" {'ret@k':>7}"
    lines = [head, "-" * len(head)]
    f = (lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "  -  ")
    for pol, caps in summary.items():
        for p, cell in sorted(caps.items(), key=lambda kv: float(kv[0])):
            lines.append(f"{pol:<18} {float(p):>5.2f} {f(cell['recall']):>7} "
                         + " ".join(f"{f(cell['by_category'][c]):>6}" for c in cats)
                         + f" {f(cell['retrieval_recall_at_k']):>7}")
    return "\n".join(lines)


def _load_all(files: Sequence[str]) -> list[Conversation]:
    convs: list[Conversation] = []
    for f in files:
        cs, repairs = load_locomo(f)
        if repairs:
            print(f"{f}: repaired {len(repairs)} evidence ids", file=sys.stderr)
        convs += cs
    ids = [c.sample_id for c in convs]
    if len(set(ids)) != len(ids):
        raise MemirError("the files repeat a sample_id; pass each conversation once")
    return convs


def _embedder(kind: str = "onnx") -> Any:
    if kind == "hash":  # the fast test double (no model files); figures are not comparable
        from runtime.encoders import HashEmbedder
        return HashEmbedder(dim=64)
    from runtime.encoders import load_default_embedder
    return load_default_embedder()


def _write(out: str | Path, payload: dict[str, Any]) -> None:
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(payload, indent=1, default=float))


# --------------------------------------------------------------------------- leave-one-conversation-out
LOO_FIT = {"hidden": (16,), "embedding_proj": 1, "weight_decay": 1.0, "dropout": 0.2, "max_epochs": 20,
           "patience": 3, "val_frac": 0.25, "batch_size": 512, "lr": 2e-3, "rank_weight": 1.0}
"""The strongly regularised fit used for LOO (5 conversations are little data). Measured LOO on the dev
split (p = 0.1 / 0.2): embedding_proj 2 + weight_decay 0.1: 0.416 / 0.655; embedding_proj 1 + weight_decay 1:
0.417 / 0.661; + pairwise rank loss within each decision (rank_weight 1): 0.422 / 0.670 (0.410 / 0.654 with
another batch order: ±0.01 is seed noise); unweighted positives instead of 1 + pairs citing: 0.391 / 0.618."""


def loo_locomo(convs: Sequence[Conversation], capacities: Sequence[float], emb: Any, *, k: int = 5,
               baselines: Sequence[str] = ("recency", "longest", "oracle"), fit_overrides: dict[str, Any] | None = None,
               sim_rounds: Sequence[str] = (), work_dir: str | Path | None = None,
               progress: bool = True) -> list[ConversationRun]:
    """Leave-one-conversation-out runs of the utility model (policy ``"utilitynet-loo"``) + baselines.

    Args:
        convs: at least 3 conversations (2 to train with a validation split, 1 to test).
        sim_rounds: ``data/round_NNN`` directories whose simulated rows are added to every fold.
    """
    import tempfile

    from runtime.scoring import UtilityScorer
    from utilitynet.export import export_onnx
    from utilitynet.features import spec_for

    from .dataset import RowBatch, decision_groups, load_rounds, to_numpy
    from .fit import FitConfig
    from .fit import run as fit_run
    from .locomo.rows import add_conversation_rows

    if len(convs) < 3:
        raise MemirError(f"leave-one-out needs >= 3 conversations, got {len(convs)}")
    spec = spec_for(emb.dim, emb.encoder_id)
    vectors = _vectors(convs, emb, progress)
    rows = RowBatch(spec)
    bar = _bar(len(convs), "collect rows", progress)
    for c in convs:
        add_conversation_rows(rows, c, emb, vectors=vectors[c.sample_id])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    table = rows.to_table()
    X, y, w, g = to_numpy(table)
    rg = decision_groups(table)
    if sim_rounds:
        sim = load_rounds(list(sim_rounds))
        Xs, ys, ws, gs = to_numpy(sim)
        X, y, w, g = np.vstack([X, Xs]), np.concatenate([y, ys]), np.concatenate([w, ws]), np.concatenate([g, gs])
        rg = np.concatenate([rg, decision_groups(sim) + rg.max() + 1])
    cfg = FitConfig(**{**LOO_FIT, **(fit_overrides or {})})
    runs: list[ConversationRun] = []
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        for c in convs:
            train = g != c.sample_id
            fitted = fit_run(cfg, X[train], y[train], w[train], g[train], spec=spec, out_dir=Path(tmp) / c.sample_id,
                             rank_groups=rg[train] if cfg.rank_weight > 0 else None)
            path = export_onnx(fitted.model, spec, Path(tmp) / c.sample_id / "utilitynet.onnx")
            scorer = UtilityScorer(path)
            runs += evaluate_locomo([c], ["utilitynet-loo"], capacities, emb, k=k, progress=False,
                                    scorer_for=lambda name, conv, s=scorer: s, vectors=vectors)
    runs += evaluate_locomo(convs, list(baselines), capacities, emb, k=k, progress=progress, vectors=vectors)
    return runs


# --------------------------------------------------------------------------- synthetic
def evaluate_synthetic(episodes: int, capacities: Sequence[float], policies: Sequence[str], *, model: str | None,
                       preset: str = "default", progress: bool = True) -> dict[str, Any]:
    """Held-out families (eval split) of the simulator: per policy × capacity metrics + leakage."""
    from dataclasses import replace

    from runtime.scoring import UtilityScorer, default_model_path, make_baseline

    from .config import load_preset
    from .eval.synthetic import evaluate_policies, leakage_check
    from .label import OracleScorer
    from .loop import make_embedder
    from .simulate import generate

    cfg = load_preset(preset)
    eps = generate(replace(cfg.eval_sim, n_episodes=episodes))
    emb = make_embedder(cfg)
    facts: dict[str, Any] = {}
    for name in policies:
        if name == "utilitynet":
            path = Path(model) if model else default_model_path()
            if not path.is_file():
                print(f"skipping utilitynet: no model at {path} (run `make train`)", file=sys.stderr)
                continue
            scorer = UtilityScorer(path)
            facts[name] = lambda ep, s=scorer: s
        elif name == "oracle":
            facts[name] = lambda ep: OracleScorer(ep, emb, cfg.label)
        else:
            facts[name] = lambda ep, n=name: make_baseline(n)
    rows = evaluate_policies(eps, facts, emb, cfg.agent, capacities, progress=progress)
    return {"episodes": len(eps), "families": sorted({e.family for e in eps}), "rows": rows,
            "leakage": leakage_check(eps, emb)}


def sim_table(rows: Sequence[dict[str, Any]]) -> str:
    keys = ("success", "key_fact_recall", "stale_answer_rate", "forget_precision", "constraint_violations",
            "update_ms_p50")
    head = f"{'policy':<18} {'p':>5} " + " ".join(f"{k[:12]:>12}" for k in keys)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['policy']:<18} {r['capacity']:>5.2f} " + " ".join(f"{float(r[k]):>12.3f}" for k in keys))
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m train.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lo = sub.add_parser("locomo", help="conversation benchmark (LoCoMo layout)",
                        description="Example: python -m train.evaluate locomo conv.json --capacities 0.1 0.2 "
                                    "--policies utilitynet recency longest oracle --out out.json")
    lo.add_argument("files", nargs="+")
    lo.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2])
    lo.add_argument("--policies", nargs="+", default=list(LOCOMO_POLICIES), choices=LOCOMO_POLICIES)
    lo.add_argument("--model", default=None, help="ONNX utility model (default: checkpoints/utilitynet.onnx)")
    lo.add_argument("--k", type=int, default=5, help="hits per question for retrieval recall@k")
    lo.add_argument("--out", required=True)
    loo = sub.add_parser("locomo-loo", help="leave-one-conversation-out fit + evaluation of the utility model",
                         description="Example: python -m train.evaluate locomo-loo conv.json --out loo.json")
    loo.add_argument("files", nargs="+")
    loo.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2])
    loo.add_argument("--k", type=int, default=5)
    loo.add_argument("--sim-rounds", nargs="*", default=[], help="data/round_NNN dirs of simulated rows to add")
    loo.add_argument("--fit", default="{}", help='JSON overrides of the LOO FitConfig, e.g. \'{"weight_decay": 1}\'')
    loo.add_argument("--out", required=True)
    sy = sub.add_parser("synthetic", help="held-out simulated families",
                        description="Example: python -m train.evaluate synthetic --episodes 8 --out sim.json")
    sy.add_argument("--episodes", type=int, default=16)
    sy.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2])
    sy.add_argument("--policies", nargs="+", default=list(SIM_POLICIES), choices=SIM_POLICIES)
    sy.add_argument("--model", default=None)
    sy.add_argument("--preset", default="default")
    sy.add_argument("--out", required=True)
    al = sub.add_parser("all", help="synthetic + locomo dev split; JSON, Markdown and plots (make eval)",
                        description="Example: python -m train.evaluate all --out reports/eval.json")
    al.add_argument("--out", default="reports/eval.json")
    al.add_argument("--episodes", type=int, default=16)
    al.add_argument("--capacities", nargs="+", type=float, default=[0.1, 0.2, 0.3])
    al.add_argument("--preset", default="default", help="train preset whose eval_sim/agent/encoder are used")
    al.add_argument("--locomo", nargs="*", default=[str(DEFAULT_LOCOMO)])
    al.add_argument("--model", default=None)
    for p in (lo, loo, sy, al):
        p.add_argument("--no-progress", action="store_true", help="no progress bars")
    for p in (lo, loo):
        p.add_argument("--encoder", choices=("onnx", "hash"), default="onnx",
                       help="onnx = all-MiniLM-L6-v2 (production); hash = fast test double")
    return ap


def _locomo_payload(runs: Sequence[ConversationRun], args: dict[str, Any]) -> dict[str, Any]:
    return {"args": args, "runs": [r.to_dict() for r in runs], "summary": summarize_locomo(runs)}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    progress = not args.no_progress
    t0 = time.perf_counter()
    try:
        if args.cmd in ("locomo", "locomo-loo"):
            convs = _load_all(args.files)
            emb = _embedder(args.encoder)
            if args.cmd == "locomo":
                runs = evaluate_locomo(convs, args.policies, args.capacities, emb, model=args.model, k=args.k,
                                       progress=progress)
            else:
                runs = loo_locomo(convs, args.capacities, emb, k=args.k, fit_overrides=json.loads(args.fit),
                                  sim_rounds=args.sim_rounds, progress=progress)
            payload = _locomo_payload(runs, {k: v for k, v in vars(args).items() if k != "no_progress"})
            _write(args.out, payload)
            print(locomo_table(payload["summary"]))
        elif args.cmd == "synthetic":
            res = evaluate_synthetic(args.episodes, args.capacities, args.policies, model=args.model,
                                     preset=args.preset, progress=progress)
            _write(args.out, {"synthetic": res})
            print(sim_table(res["rows"]))
        else:
            from .eval.report import write_report
            payload = {"synthetic": evaluate_synthetic(args.episodes, args.capacities, SIM_POLICIES,
                                                       model=args.model, preset=args.preset, progress=progress)}
            files = [f for f in args.locomo if Path(f).is_file()]
            if files:
                convs = _load_all(files)
                runs = evaluate_locomo(convs, LOCOMO_POLICIES if _has_model(args.model) else
                                       [p for p in LOCOMO_POLICIES if p != "utilitynet"],
                                       args.capacities, _embedder(), model=args.model, progress=progress)
                payload["locomo"] = _locomo_payload(runs, {"files": files, "capacities": args.capacities})
            _write(args.out, payload)
            md = write_report(payload, Path(args.out))
            print(md)
    except MemirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - t0:.0f}s -> {args.out}", file=sys.stderr)
    return 0


def _has_model(model: str | None) -> bool:
    from runtime.scoring import default_model_path
    ok = Path(model).is_file() if model else default_model_path().is_file()
    if not ok:
        print("no utility model found (run `make train`): utilitynet is left out", file=sys.stderr)
    return ok


if __name__ == "__main__":
    raise SystemExit(main())
