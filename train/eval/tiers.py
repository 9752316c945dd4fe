"""Cold-tier recall cost on LongMemEval: what archiving vectors as float16 or int8 loses at recall@10.

Protocol, per question (answerable ones; by default the dev questions the shipped utility model
was not fit on, :func:`~train.eval.summaries.held_out_questions`; a fixed-seed sample when ``limit``
is given), for each cold format ``float32`` / ``float16`` / ``int8`` — everything through the
public API a user gets:

1. one store per format, ``MemoryStore.open(path, embedder=emb, config=StoreConfig(cold_vectors=fmt,
   promote_on_access=False))`` (so every recall sees the same archive), one scope per question;
2. every haystack turn written with ``scope.write_many`` (the session's id and date, user turns
   ``dialog_role=user``, assistant turns ``agent``); the store embeds them with ``emb`` (in the
   reported run the ONNX MiniLM behind the on-disk :class:`~train.embedcache.CachedEmbedder`, so
   the three formats start from identical float32 vectors);
3. everything archived: ``scope.retain(capacity=0, forgotten="archive", scorer=recency)`` — the
   vectors are re-encoded in the cold format; what stays working or is deleted (must-keep /
   must-forget rules) is counted, not hidden (``archived_share``);
4. ``scope.recall(question, k=10, tier="archive", update_usage=False)``, once untimed (its hits are
   the result) and then ``repeats`` timed times, the formats alternating within each round.

Metrics per format: ``recall@10`` (share of the question's ``has_answer`` turns among the hits,
averaged over questions), ``hit@10`` (share of questions with one or more), ``loss`` =
recall@10(float32) − recall@10(format) with a bootstrap 95% CI over questions, ``agreement``
(|top-10 ∩ top-10 of float32| / 10), ``mean_abs_dsim`` (mean |Δ cosine| of the hits common with
float32), ``bytes_per_vector`` (``store.backend.stats()["tiers"]["archive"]``) and the recall
latency p50/p90 in ms (the whole ``scope.recall`` call; the query's embedding comes from the cache).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime import MemoryStore, StoreConfig
from runtime.scoring import make_baseline

from ..lme.reader import LmeQuestion
from .lme import sample_questions
from .report import save_figure

__all__ = ["DEFAULT_FILE", "FORMATS", "evaluate_tiers", "load_questions", "plot_tiers", "tiers_table"]

DEFAULT_FILE = "../shared/data/longmemeval/longmemeval-s-dev.json.gz"
FORMATS: tuple[str, ...] = ("float32", "float16", "int8")
_TURN_TEXT_MAX = 20000


def load_questions(file: str | Path = DEFAULT_FILE, *, limit: int | None = None, seed: int = 0,
                   only: set[str] | None = None) -> list[LmeQuestion]:
    """The answerable questions of ``file`` (:func:`~train.eval.lme.sample_questions`), by default the S dev split."""
    return sample_questions(file, limit=limit, seed=seed, only=only)


def evaluate_tiers(questions: Sequence[LmeQuestion], emb: Any, *, k: int = 10, formats: Sequence[str] = FORMATS,
                   repeats: int = 5, boot: int = 2000, seed: int = 0, workdir: str | Path | None = None,
                   progress: bool = True) -> dict[str, Any]:
    """Run the protocol of the module docstring; returns the JSON payload (``summary`` per format,
    ``per_question``, ``questions``). ``formats[0]`` is the reference (float32 by default)."""
    formats = tuple(formats)
    ref = formats[0]
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    times: dict[str, list[float]] = {f: [] for f in formats}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        stores = {f: MemoryStore.open(Path(tmp) / f"tiers-{f}.sqlite", embedder=emb,
                                      config=StoreConfig(cold_vectors=f, promote_on_access=False)) for f in formats}
        try:
            for n, q in enumerate(questions):
                rows.append(_one_question(stores, q, k, repeats, n, times))
                if progress:
                    r = rows[-1]
                    print(f"  {n + 1}/{len(questions)} {q.question_id}: {r['turns']} turns, recall@{k} "
                          + " ".join(f"{f} {r[f]['recall']:.2f}" for f in formats)
                          + f", {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
            stats = {f: s.backend.stats()["tiers"] for f, s in stores.items()}
        finally:
            for s in stores.values():
                s.close()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(rows), size=(boot, len(rows))) if rows and boot else None
    summary = {}
    for f in formats:
        arch = stats[f].get("archive", {})
        rec = np.array([r[f]["recall"] for r in rows], dtype=float)
        loss = np.array([r[ref]["recall"] - r[f]["recall"] for r in rows], dtype=float)
        dsim = [d for r in rows for d in r[f]["dsim"]]
        lat = np.array(times[f], dtype=float)
        summary[f] = {
            "bytes_per_vector": round(arch["vector_bytes"] / arch["memories"], 1) if arch.get("memories") else None,
            "archive_formats": arch.get("formats", {}),
            f"recall@{k}": _r(rec.mean()) if rows else None,
            f"hit@{k}": _r(np.mean([r[f]["hit"] for r in rows])) if rows else None,
            "loss": _r(loss.mean()) if rows else None,
            "loss_ci95": ([_r(x) for x in np.percentile(loss[idx].mean(axis=1), [2.5, 97.5])]
                          if idx is not None else None),
            "questions_changed": int(sum(r[f]["recall"] != r[ref]["recall"] for r in rows)),
            "agreement": _r(np.mean([r[f]["agreement"] for r in rows])) if rows else None,
            "mean_abs_dsim": float(f"{np.mean(dsim):.3g}") if dsim else None,
            "max_abs_dsim": float(f"{np.max(dsim):.3g}") if dsim else None,
            "recall_ms_p50": round(float(np.percentile(lat, 50)), 2) if len(lat) else None,
            "recall_ms_p90": round(float(np.percentile(lat, 90)), 2) if len(lat) else None,
            "archived_share": _r(np.mean([r[f]["archived"] / r["turns"] for r in rows])) if rows else None,
        }
    return {"questions": len(rows), "turns": int(sum(r["turns"] for r in rows)),
            "evidence_turns": int(sum(r["evidence"] for r in rows)), "k": k, "reference": ref,
            "repeats": repeats, "bootstrap": boot, "seconds": round(time.perf_counter() - t0, 1),
            "encoder": getattr(emb, "encoder_id", None) or type(emb).__name__,
            "summary": summary,
            "per_question": [{"question_id": r["question_id"], "question_type": r["question_type"],
                              "turns": r["turns"], "evidence": r["evidence"],
                              **{f: {x: r[f][x] for x in ("recall", "hit", "agreement", "archived")} for f in formats}}
                             for r in rows]}


def _r(x: Any) -> float:
    return round(float(x), 4)


def _one_question(stores: dict[str, MemoryStore], q: LmeQuestion, k: int, repeats: int, n: int,
                  times: dict[str, list[float]]) -> dict[str, Any]:
    formats = list(stores)
    scorer = make_baseline("recency")
    scopes = {}
    turn_of: dict[str, dict[str, str]] = {}
    evidence = {t.turn_id for t in q.turns if t.has_answer}
    for f, store in stores.items():
        me = store.scope(user_id=q.question_id)
        ids: dict[str, str] = {}
        for s in q.sessions:
            recs = me.write_many([{"content": t.content[:_TURN_TEXT_MAX] or "(empty)", "session_id": f"s{s.number}",
                                   "timestamp": s.date, "dialog_role": "user" if t.role == "user" else "agent",
                                   "source_entity": t.role} for t in s.turns])
            ids.update({r.id: t.turn_id for t, r in zip(s.turns, recs)})
        me.retain(capacity=0, forgotten="archive", scorer=scorer)  # type: ignore[arg-type]
        scopes[f] = me
        turn_of[f] = ids
    hits = {f: scopes[f].recall(q.question, k=k, tier="archive", update_usage=False) for f in formats}
    order = formats[n % len(formats):] + formats[:n % len(formats)]
    for _ in range(repeats):
        for f in order:
            t = time.perf_counter()
            scopes[f].recall(q.question, k=k, tier="archive", update_usage=False)
            times[f].append(1000 * (time.perf_counter() - t))
        order = order[1:] + order[:1]
    top = {f: [turn_of[f].get(h.record.id, h.record.id) for h in hits[f]] for f in formats}
    sim = {f: {turn_of[f].get(h.record.id, h.record.id): float(h.score.similarity) for h in hits[f]} for f in formats}
    ref = formats[0]
    out: dict[str, Any] = {"question_id": q.question_id, "question_type": q.question_type, "turns": q.n_turns,
                           "evidence": len(evidence)}
    for f in formats:
        found = evidence & set(top[f])
        common = set(top[f]) & set(top[ref])
        out[f] = {"recall": round(len(found) / len(evidence), 4) if evidence else 0.0, "hit": bool(found),
                  "agreement": round(len(common) / k, 4),
                  "dsim": [abs(sim[f][t] - sim[ref][t]) for t in sorted(common)],
                  "archived": scopes[f].count(tier="archive")}
    return out


def tiers_table(payload: dict[str, Any]) -> str:
    """A Markdown table of the summary."""
    k = payload["k"]
    head = (f"| format | bytes/vector | recall@{k} | hit@{k} | loss vs {payload['reference']} (95% CI) | "
            f"top-{k} agreement | mean abs Δsim | recall p50 ms |")
    lines = [head, "|" + "---|" * 8]
    for f, v in payload["summary"].items():
        ci = v["loss_ci95"]
        lines.append(f"| {f} | {v['bytes_per_vector']} | {v[f'recall@{k}']:.4f} | {v[f'hit@{k}']:.4f} | "
                     f"{v['loss']:+.4f}" + (f" [{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else "")
                     + f" | {v['agreement']:.4f} | {v['mean_abs_dsim']} | {v['recall_ms_p50']} |")
    return "\n".join(lines)


def plot_tiers(payload: dict[str, Any], path: str | Path) -> Path:
    """Bars of recall@k / hit@k and of bytes per vector per format; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = payload["k"]
    fmts = list(payload["summary"])
    s = payload["summary"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.8))
    x = np.arange(len(fmts))
    for j, (key, lab) in enumerate(((f"recall@{k}", f"evidence recall@{k}"), (f"hit@{k}", f"hit@{k}"))):
        bars = a1.bar(x + (j - 0.5) * 0.38, [s[f][key] or 0.0 for f in fmts], 0.38, label=lab)
        a1.bar_label(bars, fmt="%.3f", fontsize=8)
    a1.set_xticks(x, fmts)
    a1.set_ylim(0, 1.1)
    a1.legend(fontsize=8, frameon=False, loc="upper center", ncol=2)
    a1.set_title("archive recall (tier='archive')", fontsize=9)
    bars = a2.bar(x, [s[f]["bytes_per_vector"] or 0.0 for f in fmts], 0.5, color="tab:gray")
    a2.bar_label(bars, fmt="%.0f", fontsize=8)
    a2.set_xticks(x, fmts)
    a2.set_title("bytes per archived vector", fontsize=9)
    fig.suptitle(f"Cold-tier vector formats, LongMemEval dev: {payload['questions']} questions, "
                 f"{payload['turns']} turns ({payload['encoder']})", fontsize=9)
    return save_figure(fig, path)
