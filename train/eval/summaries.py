"""Summary coverage on LongMemEval (issue 15): do the evidence turns' facts survive in the session
summaries when the raw turns are demoted to the archive?

Protocol, per question (answerable ones, ``*_abs`` left out; a fixed-seed sample when ``limit`` is
given): every haystack session is written through the public API (``write_many``, the session's
id and date, user turns ``dialog_role=user``, assistant turns ``agent``) into a scope whose policy
has ``SummaryPolicy(enabled=True)``; each session closes when the next one starts (the last with
``end_session``), so the store makes its summary with the scope's utility scorer and archives the
summarised turns. Then, for every evidence turn (``has_answer``):

- key facts: :func:`runtime.retention.key_facts` of the turn (numbers, ids/codes, capitalised
  words that do not start a sentence); a turn without any falls back to its content words
  (lower-case alphabetic tokens of ≥ 5 letters outside :data:`STOP`);
- fact recall: the share of those found, as whole tokens (case-sensitive for facts, case-insensitive
  for content words), in the working-tier summary of the turn's session (:func:`fact_recall`);
- covered: fact recall ≥ ``threshold`` (0.5). ``coverage`` = covered share of all evidence turns;
  ``coverage_demoted`` = covered share of the evidence turns that were archived (their raw text
  left working memory — the case the summary exists for); ``demoted`` = share archived.

The shipped utility model was fit on part of this dev split (its card: 261 training, 68
validation questions), so by default only its validation questions are evaluated
(:func:`held_out_questions`); ``--questions all`` includes the in-sample ones.

Baselines in the same run, with the same budget (``max_sentences``/``max_chars``) on the same
session turns: ``lead`` (the session's first sentences, :func:`lead_summary`) and ``longest``
(the extractive summariser ranking turns by length instead of utility).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from runtime import MemIR, MemoryStore, RetentionPolicy, SummaryPolicy
from runtime.annotate.summary import split_sentences
from runtime.retention import extract_summary, key_facts
from runtime.scoring import Scorer

from ..lme.reader import LmeQuestion
from ..lme.shipped import SPLIT_VALIDATION
from .lme import sample_questions
from .report import save_figure

__all__ = ["DEFAULT_FILE", "HELD_OUT_ROWS", "held_out_questions", "STOP", "evaluate_summaries", "fact_recall", "lead_summary", "plot_summaries"]

DEFAULT_FILE = "../shared/data/longmemeval/longmemeval-oracle-dev.json.gz"
HELD_OUT_ROWS = Path("data") / "lme" / "rows.parquet"
STOP = frozenset("""about above after again against always among another anything around because been before
being below between both could does doing during each every from further having here itself just know
like make might more most much must never other ought ourselves over really same should since some still
such than that their theirs them themselves then there these they thing things this those though through
under until very want were what when where which while will with within without would your yours yourself
also maybe sure thanks thank great good""".split())
_WORDS = re.compile(r"[a-z]{5,}")
_TURN_TEXT_MAX = 20000  # the store's default content limit is larger; LongMemEval turns fit


def _content_words(text: str) -> set[str]:
    return {w for w in _WORDS.findall(text.lower()) if w not in STOP}


def fact_recall(turn: str, summary: str) -> float | None:
    """The share of the turn's key facts found in ``summary`` (see the module docstring); ``None``
    when the turn has neither key facts nor content words."""
    facts = key_facts(turn)
    if facts:
        found = sum(1 for f in facts if re.search(r"(?<![\w])" + re.escape(f) + r"(?![\w])", summary))
        return found / len(facts)
    words = _content_words(turn)
    if not words:
        return None
    have = _content_words(summary)
    return len(words & have) / len(words)


def lead_summary(turns: Sequence[str], policy: SummaryPolicy) -> str:
    """The lead baseline: the session's first sentences, in order, within the same budget."""
    out: list[str] = []
    used = 0
    for t in turns:
        for s in split_sentences(t):
            if len(out) >= policy.max_sentences:
                return " ".join(out)
            if used + len(s) + (1 if out else 0) > policy.max_chars:
                continue
            used += len(s) + (1 if out else 0)
            out.append(s)
    return " ".join(out)


def _longest_summary(turns: Sequence[MemIR], policy: SummaryPolicy) -> str:
    return extract_summary(turns, np.array([len(t.content) for t in turns], dtype=float), policy)[0]


def held_out_questions(rows: str | Path = HELD_OUT_ROWS) -> set[str]:
    """The LongMemEval dev questions the shipped utility model was *not* fit on (its validation
    split, read from the shipped rows' ``split`` column)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = pq.read_table(rows, columns=["question_id", "split"])
    return {str(x) for x in pc.unique(t.filter(pc.equal(t["split"], SPLIT_VALIDATION))["question_id"]).to_pylist()}


def evaluate_summaries(file: str | Path = DEFAULT_FILE, *, limit: int | None = None, seed: int = 0,
                       emb: Any = None, scorer: Scorer | None = None, summaries: SummaryPolicy | None = None,
                       threshold: float = 0.5, only: set[str] | None = None, progress: bool = True
                       ) -> dict[str, Any]:
    """Run the protocol of the module docstring; returns the JSON payload (``summary`` per method,
    ``by_type``, ``args``). ``scorer``: the utility scorer (default: the shipped utility model);
    ``only``: question ids to keep (e.g. :func:`held_out_questions`)."""
    sp = summaries or SummaryPolicy(enabled=True)
    if scorer is None:
        from runtime.scoring import UtilityScorer
        scorer = UtilityScorer()
    qs = sample_questions(file, limit=limit, seed=seed, only=only)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.open(Path(tmp) / "summaries.sqlite", embedder=emb)
        try:
            for n, q in enumerate(qs):
                rows += _one_question(store, q, RetentionPolicy(scorer=scorer, summaries=sp))
                if progress and (n + 1) % 20 == 0:
                    print(f"  {n + 1}/{len(qs)} questions, {time.perf_counter() - t0:.0f}s", flush=True)
        finally:
            store.close()
    methods = ("utility", "lead", "longest")
    summary = {m: _aggregate([r for r in rows], m, threshold) for m in methods}
    by_type: dict[str, dict[str, Any]] = defaultdict(dict)
    for qt in sorted({r["question_type"] for r in rows}):
        for m in methods:
            by_type[qt][m] = _aggregate([r for r in rows if r["question_type"] == qt], m, threshold)
    return {"args": {"file": str(file), "limit": limit, "seed": seed, "threshold": threshold,
                     "policy": {k: getattr(sp, k) for k in ("min_turns", "max_turns", "max_sentences", "max_chars",
                                                            "demote_sources")},
                     "encoder": getattr(emb, "encoder_id", None) or type(emb).__name__, "scorer": scorer.name},
            "questions": len(qs), "evidence_turns": len(rows), "seconds": round(time.perf_counter() - t0, 1),
            "summary": summary, "by_type": dict(by_type)}


def _one_question(store: MemoryStore, q: LmeQuestion, policy: RetentionPolicy) -> list[dict[str, Any]]:
    sp = policy.summaries
    me = store.scope(user_id=q.question_id, policy=policy)
    ids: dict[str, str] = {}
    sids: list[str] = []
    for s in q.sessions:
        sid = f"s{s.number}"
        sids.append(sid)
        recs = me.write_many([{"content": t.content[:_TURN_TEXT_MAX] or "(empty)", "session_id": sid,
                               "timestamp": s.date, "dialog_role": "user" if t.role == "user" else "agent",
                               "source_entity": t.role} for t in s.turns])
        ids.update({t.turn_id: r.id for t, r in zip(s.turns, recs)})
    me.end_session()
    made = {str(r.provenance.session_id): r.content for r in me.list(tier="working", tags=["summary"])}
    archived = {r.id for r in me.list(tier="archive")}
    out = []
    for s, sid in zip(q.sessions, sids):
        turns = [me.get(ids[t.turn_id]) for t in s.turns]
        base = {"lead": lead_summary([t.content for t in turns], sp), "longest": _longest_summary(turns, sp)}
        for t, rec in zip(s.turns, turns):
            if not t.has_answer:
                continue
            row = {"question_id": q.question_id, "question_type": q.question_type,
                   "demoted": ids[t.turn_id] in archived}
            for m, text in (("utility", made.get(sid, "")), *base.items()):
                r = fact_recall(rec.content, text)
                row[m] = r
            out.append(row)
    return out


def _aggregate(rows: list[dict[str, Any]], method: str, threshold: float) -> dict[str, Any]:
    vals = [r[method] for r in rows if r[method] is not None]
    dem = [r[method] for r in rows if r[method] is not None and r["demoted"]]
    return {"n": len(vals), "coverage": _share(vals, threshold), "mean_fact_recall": _mean(vals),
            "coverage_demoted": _share(dem, threshold), "n_demoted": len(dem),
            "demoted": round(sum(r["demoted"] for r in rows) / len(rows), 4) if rows else None}


def _share(vals: list[float], threshold: float) -> float | None:
    return round(sum(v >= threshold for v in vals) / len(vals), 4) if vals else None


def _mean(vals: list[float]) -> float | None:
    return round(float(np.mean(vals)), 4) if vals else None


def plot_summaries(payload: dict[str, Any], path: str | Path) -> Path:
    """A bar chart of coverage and mean fact recall per method; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(payload["summary"])
    keys = ("coverage", "mean_fact_recall")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    x = np.arange(len(keys))
    w = 0.8 / len(methods)
    for j, m in enumerate(methods):
        vals = [payload["summary"][m][k] or 0.0 for k in keys]
        bars = ax.bar(x + (j - (len(methods) - 1) / 2) * w, vals, w, label=m)
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks(x, [f"coverage (recall ≥ {payload['args']['threshold']})", "mean fact recall"])
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, frameon=False)
    which = payload["args"].get("questions")
    ax.set_title(f"Summary coverage, LongMemEval dev{f' ({which})' if which else ''}: {payload['questions']} "
                 f"questions, {payload['evidence_turns']} evidence turns", fontsize=9)
    return save_figure(fig, path)
