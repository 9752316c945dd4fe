"""Retention over a scope: gather → score → rules → solve → apply → record (seed 001 §3, §5.2).

``Scope.retain`` delegates here. The decision is stored (inputs' digest, solver, time, objective,
constraints tight/slack, the marginal utility at the cut, and per item the reason code and score
breakdown) so ``Scope.explain(id)`` can answer "why is this here / why was it dropped, and when",
and ``Scope.state_at(decision_id)`` replays the working set after any decision (time travel).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from utilitynet.context import ScoringContext

from .errors import ValidationError
from .memir import MemIR, new_id, utcnow
from .retention import RetentionProblem, solve
from .rules import DEFAULT_RULES, RuleSet, load_rules
from .scoring import Scorer

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["RetentionDecision", "Triggers", "retain", "approx_tokens"]

CapacityFn = Callable[[Sequence[MemIR], np.ndarray], int]


def approx_tokens(text: str) -> int:
    """Token estimate for budgets (≈ 4 characters per token, ≥ 1), cheap and tokenizer-free."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True)
class RetentionDecision:
    """The outcome of one ``retain`` call (also stored in the ``decisions`` table)."""

    decision_id: str
    at: datetime
    kept: list[str]
    archived: list[str]
    deleted: list[str]
    redacted: list[str]
    objective: float
    method: str
    status: str
    solve_ms: float
    total_ms: float
    capacity: int | None
    explanation: dict[str, Any] = field(repr=False)
    items: dict[str, dict[str, Any]] = field(repr=False)


@dataclass
class Triggers:
    """When to run retention (seed 001 §5.2): on events, every N writes, at a fill watermark.

    Attributes:
        events: event names that trigger an update (task phase change, new instruction, key tool result).
        every_n_writes: run after this many writes since the last decision (0 = never on count).
        watermark: run when working memories ≥ watermark × capacity (0 < watermark ≤ 1).
    """

    events: frozenset[str] = frozenset({"task_phase_change", "new_instruction", "key_tool_result"})
    every_n_writes: int = 50
    watermark: float = 0.9
    writes_since: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.watermark <= 1:
            raise ValidationError("Triggers.watermark must be in (0, 1]", field="watermark")
        if self.every_n_writes < 0:
            raise ValidationError("Triggers.every_n_writes must be >= 0", field="every_n_writes")

    def note_write(self, n: int = 1) -> None:
        self.writes_since += n

    def due(self, *, working: int, capacity: int | None, event: str | None = None) -> str | None:
        """The reason retention is due now (``"event:<name>"``, ``"every_n_writes"``, ``"watermark"``) or None."""
        if event is not None and event in self.events:
            return f"event:{event}"
        if self.every_n_writes and self.writes_since >= self.every_n_writes:
            return "every_n_writes"
        if capacity is not None and working >= self.watermark * capacity:
            return "watermark"
        return None

    def reset(self) -> None:
        self.writes_since = 0


def _digest(records: Sequence[MemIR], utility: np.ndarray, capacity: Any) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(r.id.encode())
    h.update(np.asarray(utility, np.float64).tobytes())
    h.update(repr(capacity).encode())
    return h.hexdigest()[:16]


def retain(scope: "Scope", *, capacity: int | CapacityFn | None, scorer: Scorer | None = None,
           rules: RuleSet | str | dict[str, Any] | None = None, budget_tokens: int | None = None,
           candidates: Sequence[str | MemIR | dict[str, Any]] = (), method: str = "auto",
           forgotten: Literal["archive", "delete"] = "archive", now: datetime | None = None,
           ctx: ScoringContext | None = None, on_infeasible: Literal["raise", "overflow"] = "raise",
           overflow_penalty: float | None = None, apply: bool = True, trigger: str | None = None
           ) -> RetentionDecision:
    """Decide which working memories (plus unsaved ``candidates``) to keep, and apply it.

    See ``Scope.retain`` for the argument docs.
    """
    t0 = time.perf_counter()
    now = now or utcnow()
    ruleset = DEFAULT_RULES if rules is None else (rules if isinstance(rules, RuleSet) else load_rules(rules))
    if scorer is None:
        from .scorer import UtilityScorer
        scorer = UtilityScorer()
    recs: list[MemIR]
    recs, vecs, seqs = scope.list_with_vectors(tier="working", include_expired=True, now=now)
    prepared = [scope._prepare(c) for c in candidates]
    if prepared:
        need = [i for i, (_, v) in enumerate(prepared) if v is None]
        enc: Any = scope._store.embedder.encode([prepared[i][0].content for i in need]) if need else []
        cand_vecs = [v for _, v in prepared]
        for j, i in enumerate(need):
            cand_vecs[i] = np.asarray(enc[j], np.float32)
        recs = recs + [r for r, _ in prepared]
        vecs = np.vstack([vecs.reshape(-1, scope._store.embedder.dim)] + [np.asarray(cand_vecs, np.float32)])
        top = int(seqs.max()) if len(seqs) else 0
        seqs = np.concatenate([seqs, np.arange(top + 1, top + 1 + len(prepared))])
    n_existing = len(recs) - len(prepared)
    step = int(seqs.max()) if len(seqs) else 0
    if ctx is None:
        ctx = ScoringContext(now=now, step=step, record_steps=seqs)
    elif ctx.record_steps is None:
        ctx = ScoringContext(now=ctx.now, step=ctx.step, record_steps=seqs, goal_embedding=ctx.goal_embedding,
                             recent_embedding=ctx.recent_embedding, stage=ctx.stage, extras=ctx.extras)
    model_u = np.asarray(scorer.score(recs, vecs, ctx), dtype=np.float64) if recs else np.zeros(0)
    compiled = ruleset.compile(recs, now)
    utility = model_u + np.asarray(compiled.bonus, dtype=np.float64)
    k = capacity(recs, utility) if callable(capacity) else capacity
    weights = np.array([approx_tokens(r.content) for r in recs], float) if budget_tokens is not None else None
    problem = RetentionProblem(
        utility=utility, capacity=k, weights=weights, budget=budget_tokens,
        must_keep=compiled.must_keep, must_forget=compiled.must_forget, implies=compiled.implies,
        excludes=compiled.excludes, quotas=[_quota(q) for q in compiled.quotas],
        item_ids=[r.id for r in recs], overflow_penalty=overflow_penalty, on_infeasible=on_infeasible)
    t_solve = time.perf_counter()
    result = solve(problem, method=method)  # type: ignore[arg-type]  # validated by solve()
    solve_ms = (time.perf_counter() - t_solve) * 1000
    keep = np.asarray(result.keep, dtype=bool)
    expl = result.explanation.to_dict()
    reasons = _item_reasons(expl, len(recs))
    items: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(recs):
        items[r.id] = {
            "kept": bool(keep[i]), "reason": reasons[i], "utility": float(utility[i]),
            "model_utility": float(model_u[i]), "bonuses": compiled.bonus_reasons[i],
            "rule": compiled.must_keep.get(i) or compiled.must_forget.get(i),
            "candidate": i >= n_existing,
        }
    decision_id = new_id("dec")
    kept_ids = [r.id for i, r in enumerate(recs) if keep[i]]
    archived: list[str] = []
    deleted: list[str] = []
    redacted: list[str] = []
    if not apply:
        return RetentionDecision(
            decision_id=decision_id, at=now, kept=kept_ids, archived=[], deleted=[], redacted=[],
            objective=float(result.objective), method=str(result.method), status=str(result.status),
            solve_ms=solve_ms, total_ms=(time.perf_counter() - t0) * 1000, capacity=k, explanation=expl,
            items=items)
    store = scope._store
    # One transaction for the whole decision: new candidates, archive/delete, and the decision
    # record land together or not at all (a crash never leaves half a decision applied).
    with store._lock, store._tx():
        archived, deleted, redacted = _apply(scope, recs, prepared, n_existing, keep, compiled.must_forget,
                                             items, forgotten)
        decision = RetentionDecision(
            decision_id=decision_id, at=now, kept=kept_ids, archived=archived, deleted=deleted, redacted=redacted,
            objective=float(result.objective), method=str(result.method), status=str(result.status),
            solve_ms=solve_ms, total_ms=(time.perf_counter() - t0) * 1000, capacity=k, explanation=expl,
            items=items)
        _record(scope, decision, scorer.name, _digest(recs, utility, k), trigger, len(recs))
    if (deleted or redacted) and store.path != ":memory:":
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # old page images leave the WAL too
    return decision


def _quota(q: tuple[list[int], int, int | None, str]) -> Any:
    from .retention import Quota
    members, lo, hi, name = q
    return Quota(members=members, min=lo, max=hi, name=name)


def _item_reasons(expl: dict[str, Any], n: int) -> list[str]:
    items = expl.get("items")
    if isinstance(items, list) and len(items) == n:
        return [str(it.get("reason", "")) for it in items]
    if isinstance(items, dict):
        return [str(v.get("reason", "")) for v in items.values()]
    return [""] * n


def _apply(scope: "Scope", recs: list[MemIR], prepared: list[tuple[MemIR, Any]], n_existing: int,
           keep: np.ndarray, must_forget: dict[int, str], items: dict[str, dict[str, Any]],
           forgotten: str) -> tuple[list[str], list[str], list[str]]:
    """Write kept candidates, archive or delete the rest, hard-delete must-forget items."""
    store = scope._store
    archived, deleted, redacted = [], [], []
    new_kept = [(prepared[i - n_existing][0], prepared[i - n_existing][1])
                for i in range(n_existing, len(recs)) if keep[i]]
    if new_kept:
        scope._insert([r for r, _ in new_kept], [v for _, v in new_kept])
    t, tp = scope._tenant("memories")
    with store._lock, store._tx() as conn:
        conn.executemany(f"UPDATE memories SET utility = ?, retention_reason = ? WHERE {t} AND id = ?",
                         [(items[r.id]["utility"], items[r.id]["reason"], *tp, r.id)
                          for i, r in enumerate(recs) if keep[i]])
        for i in range(n_existing):
            if keep[i]:
                continue
            rid = recs[i].id
            if i in must_forget or forgotten == "delete":
                rep = scope.forget(rid, cascade="redact", reason=items[rid]["reason"] or "forgotten", scrub=False)
                deleted += rep["deleted"]
                redacted += rep["redacted"]
            else:
                conn.execute(f"UPDATE memories SET tier = 'archive', utility = ?, retention_reason = ? "
                             f"WHERE {t} AND id = ?", (items[rid]["utility"], items[rid]["reason"], *tp, rid))
                archived.append(rid)
    return archived, deleted, redacted


def _record(scope: "Scope", d: RetentionDecision, scorer_name: str, digest: str, trigger: str | None,
            n_items: int) -> None:
    payload = {
        "decision_id": d.decision_id, "at": d.at.isoformat(), "user_id": scope.user_id, "agent_id": scope.agent_id,
        "scorer": scorer_name, "inputs_digest": digest, "n_items": n_items, "capacity": d.capacity,
        "method": d.method, "status": d.status, "objective": d.objective, "solve_ms": round(d.solve_ms, 3),
        "total_ms": round(d.total_ms, 3), "trigger": trigger, "kept": d.kept,
        "counts": {"kept": len(d.kept), "archived": len(d.archived), "deleted": len(d.deleted),
                   "redacted": len(d.redacted)},
        "explanation": {k: v for k, v in d.explanation.items() if k != "items"},
    }
    store = scope._store
    with store._lock, store._tx() as conn:
        cur = conn.execute("INSERT INTO decisions(decision_id, user_id, agent_id, at, payload) VALUES (?,?,?,?,?)",
                           (d.decision_id, scope.user_id, scope.agent_id, d.at.timestamp(), json.dumps(payload)))
        rowid = cur.lastrowid
        conn.executemany("INSERT INTO decision_items(decision_rowid, memory_id, kept, reason, payload) "
                         "VALUES (?,?,?,?,?)",
                         [(rowid, mid, int(it["kept"]), it["reason"] or "", json.dumps(it))
                          for mid, it in d.items.items()])


def explain(scope: "Scope", memory_id: str) -> dict[str, Any]:
    """Why a memory is here (or was dropped), and when: its record state plus every decision about it."""
    t, tp = scope._tenant("d")
    with scope._store._lock:
        rows = scope._conn.execute(
            f"SELECT d.decision_id, d.at, d.payload, i.kept, i.reason, i.payload FROM decision_items i "
            f"JOIN decisions d ON d.id = i.decision_rowid WHERE {t} AND i.memory_id = ? ORDER BY d.at, d.id",
            tp + [memory_id]).fetchall()
        row = scope._conn.execute(
            "SELECT tier, utility, retention_reason FROM memories WHERE user_id=? AND agent_id=? AND id=?",
            tp + [memory_id]).fetchone()
    if row is None and not rows:
        from .errors import NotFoundError
        raise NotFoundError(f"no memory or decision about {memory_id!r} in this scope")
    history = []
    for dec_id, _at, dpay, kept, reason, ipay in rows:
        dp = json.loads(dpay)
        history.append({"decision_id": dec_id, "at": dp["at"], "kept": bool(kept), "reason": reason,
                        "method": dp["method"], "status": dp["status"], "capacity": dp["capacity"],
                        "trigger": dp.get("trigger"), "item": json.loads(ipay),
                        "marginal_utility": dp["explanation"].get("marginal_utility")})
    state = ("deleted" if row is None else row[0])
    summary = (f"{memory_id} is {state}"
               + (f"; last decision {history[-1]['decision_id']} at {history[-1]['at']}: "
                  f"{'kept' if history[-1]['kept'] else 'dropped'} ({history[-1]['reason']})" if history else
                  "; no retention decision has touched it yet"))
    return {"memory_id": memory_id, "state": state, "summary": summary, "history": history}


def state_at(scope: "Scope", decision_id: str) -> dict[str, Any]:
    """Time travel: the decision record and the ids kept right after it."""
    t, tp = scope._tenant("decisions")
    with scope._store._lock:
        row = scope._conn.execute(f"SELECT payload FROM decisions WHERE {t} AND decision_id = ?",
                                  tp + [decision_id]).fetchone()
    if row is None:
        from .errors import NotFoundError
        raise NotFoundError(f"no decision {decision_id!r} in this scope")
    return json.loads(row[0])


def decisions(scope: "Scope", limit: int = 20) -> list[dict[str, Any]]:
    """The scope's decisions, newest first (payload without per-item details)."""
    t, tp = scope._tenant("decisions")
    with scope._store._lock:
        rows = scope._conn.execute(f"SELECT payload FROM decisions WHERE {t} ORDER BY at DESC, id DESC LIMIT ?",
                                   tp + [int(limit)]).fetchall()
    return [json.loads(p) for (p,) in rows]
