"""Conversation benchmarks in LoCoMo's layout, on the production path: every policy and capacity
streamed through the public API (:func:`train.locomo.replay.replay_conversation`), pooled per
policy and category; and leave-one-conversation-out fits of the utility model."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime.errors import MemirError
from runtime.scoring import Scorer

from ..locomo.reader import RECALL_CATEGORIES, Conversation, load_locomo
from ..locomo.replay import ConversationRun, locomo_oracle, replay_conversation
from ..stream import budget_order, budget_text
from ..workers import progress_bar

__all__ = ["DEFAULT_LOCOMO", "LOCOMO_POLICIES", "LOO_FIT", "evaluate_locomo", "load_all", "locomo_payload",
           "locomo_policy", "locomo_table", "loo_locomo", "summarize_locomo", "progress_bar", "write_json",
           "embedder"]

LOCOMO_POLICIES = ("utilitynet", "recency", "lru", "random", "longest", "generative_agents", "memorybank",
                   "memoryos", "oracle")
SIM_POLICIES = LOCOMO_POLICIES
DEFAULT_LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


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
    from ..locomo.rows import conversation_vectors
    out = {}
    bar = progress_bar(len(convs), "embed conversations", progress)
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
                    vectors: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                    budgets: Sequence[float] = ()) -> list[ConversationRun]:
    """Every (policy, budget, conversation) run, through the runtime: each of ``capacities`` a share of
    the conversation's turns, each of ``budgets`` a share of its tokens."""
    bad = [p for p in policies if p not in LOCOMO_POLICIES and scorer_for is None]
    if bad:
        raise MemirError(f"unknown policies {bad}; valid: {', '.join(LOCOMO_POLICIES)}")
    vectors = vectors or _vectors(convs, emb, progress)
    make = scorer_for or (lambda name, conv: locomo_policy(name, conv, model))
    runs = []
    settings = [(p, "turns") for p in capacities] + [(p, "tokens") for p in budgets]
    bar = progress_bar(len(policies) * len(settings) * len(convs), "locomo", progress)
    for name in policies:
        for p, unit in settings:
            for conv in convs:
                tv, qv = vectors[conv.sample_id]
                run = replay_conversation(conv, make(name, conv), emb, p, k=k, turn_vectors=tv, question_vectors=qv,
                                          unit=unit)
                run.policy = name
                runs.append(run)
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    return runs


def summarize_locomo(runs: Sequence[ConversationRun]) -> dict[str, dict[str, Any]]:
    """Pooled over conversations, per policy and budget: ``summary[policy][label]``, the label ``"0.1"``
    (a share of the turns) or ``"0.1 tokens"`` (a share of the tokens)."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        cell = out.setdefault(r.policy, {}).setdefault(r.label, {
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
    """Plain-text table: policy × budget × category (evidence recall) + retrieval recall@k."""
    cats = [str(c) for c in RECALL_CATEGORIES]
    head = f"{'policy':<18} {'p':>12} {'recall':>7} " + " ".join(f"{'cat' + c:>6}" for c in cats) + f" {'ret@k':>7}"
    lines = [head, "-" * len(head)]
    f = (lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "  -  ")
    for pol, caps in summary.items():
        for p, cell in sorted(caps.items(), key=lambda kv: budget_order(kv[0])):
            lines.append(f"{pol:<18} {budget_text(p):>12} {f(cell['recall']):>7} "
                         + " ".join(f"{f(cell['by_category'][c]):>6}" for c in cats)
                         + f" {f(cell['retrieval_recall_at_k']):>7}")
    return "\n".join(lines)


def load_all(files: Sequence[str]) -> list[Conversation]:
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


def embedder(kind: str = "onnx") -> Any:
    if kind == "hash":  # the fast test double (no model files); figures are not comparable
        from runtime.encoders import HashEmbedder
        return HashEmbedder(dim=64)
    from runtime.encoders import load_default_embedder
    return load_default_embedder()


def write_json(out: str | Path, payload: dict[str, Any]) -> None:
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

    from ..dataset import FitData, RowBatch, fit_data, load_rounds
    from ..fit import FitConfig
    from ..fit import run as fit_run
    from ..locomo.rows import add_conversation_rows

    if len(convs) < 3:
        raise MemirError(f"leave-one-out needs >= 3 conversations, got {len(convs)}")
    spec = spec_for(emb.dim, emb.encoder_id)
    vectors = _vectors(convs, emb, progress)
    rows = RowBatch(spec)
    bar = progress_bar(len(convs), "collect rows", progress)
    for c in convs:
        add_conversation_rows(rows, c, emb, vectors=vectors[c.sample_id])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    table = rows.to_table()
    real = fit_data(table)
    conv_of = np.asarray(table["episode_id"].to_numpy(zero_copy_only=False))
    sim = fit_data(load_rounds(list(sim_rounds))) if sim_rounds else None
    cfg = FitConfig(**{**LOO_FIT, **(fit_overrides or {})})
    runs: list[ConversationRun] = []
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        for c in convs:
            part = real.take(np.flatnonzero(conv_of != c.sample_id))
            data = FitData.concat([part, sim]) if sim is not None else part
            fitted = fit_run(cfg, data, spec=spec, out_dir=Path(tmp) / c.sample_id)
            path = export_onnx(fitted.model, spec, Path(tmp) / c.sample_id / "utilitynet.onnx")
            scorer = UtilityScorer(path)

            def fixed(name: str, conv: Conversation, s: Scorer = scorer) -> Scorer:
                return s

            runs += evaluate_locomo([c], ["utilitynet-loo"], capacities, emb, k=k, progress=False,
                                    scorer_for=fixed, vectors=vectors)
    runs += evaluate_locomo(convs, list(baselines), capacities, emb, k=k, progress=progress, vectors=vectors)
    return runs




def locomo_payload(runs: Sequence[ConversationRun], args: dict[str, Any]) -> dict[str, Any]:
    """The JSON written by ``python -m train.eval locomo``."""
    return {"args": args, "runs": [r.to_dict() for r in runs], "summary": summarize_locomo(runs)}
