"""The one retention plan: (records, vectors, context, policy) -> RetentionProblem -> typed decision.

``Scope.retain``, ``memir score``, the evaluators (LoCoMo, LongMemEval, the simulator) and the
training loop's collector all decide through :class:`RetentionPlan`; there is no second pipeline.
What differs between them is only where the inputs come from (a scope's working set and live
context, or a dump's records) — never how utilities are scored, how rules compile, or how the
solver's answer becomes a decision.

The decision time context the utility model sees is built by :func:`scoring_context` from what an
agent using the store has: each record's write step in its scope, the decision time, the rolling
recent-context vector (the unit mean of the last ``recent_window`` memories written, any tier), and
the goal and task stage the agent set (``scope.task(goal=...)``).

Example:
    >>> plan = RetentionPlan(RetentionPolicy(capacity=2), FakeScorer())           # doctest: +SKIP
    >>> d = plan.decide(records, vectors, steps=np.arange(len(records)), now=now,  # doctest: +SKIP
    ...                 user_id="u1", agent_id="default", trigger="explicit")
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import numpy as np

from utilitynet.columns import RecordColumns
from utilitynet.context import ScoringContext

from ..errors import ValidationError
from ..record.memir import MemIR, new_id
from ..scoring.scorer import Scorer
from .decision import Action, Bonus, Constraint, Cut, CutItem, ItemDecision, RetentionDecision
from .policy import RetentionPolicy
from .rules import CompiledRules, RuleSet, RuleView
from .solver import REASON_CODES, RetentionProblem, RetentionResult, solve, violations
from .solver.explain import Explanation

__all__ = ["ItemColumns", "ItemTable", "ScoredProblem", "RetentionPlan", "approx_tokens", "audit", "recent_context", "scoring_context"]


def approx_tokens(text: str) -> int:
    """Token estimate for budgets (≈ 4 characters per token, ≥ 1), cheap and tokenizer-free."""
    return max(1, (len(text) + 3) // 4)


def approx_tokens_array(lengths: np.ndarray) -> np.ndarray:
    """:func:`approx_tokens` of texts of these lengths (characters), as floats."""
    return np.maximum(1, (np.asarray(lengths, dtype=np.int64) + 3) // 4).astype(float)


@dataclass(frozen=True)
class ItemTable:
    """The items of one decision held column-wise: what a batch scorer (``memir score``, a data
    engine's block) hands the plan instead of MemIR objects. The scorer reads ``columns``, the
    rules read ``view``, budgets read ``content_lengths``; nothing else is needed.

    Attributes:
        ids: the record ids, row-aligned with everything else.
        columns: what :meth:`~runtime.scoring.UtilityScorer.score_columns` reads.
        view: what the rules read.
        content_lengths: characters per content (the token estimate of budgets).
    """

    ids: Sequence[str]
    columns: RecordColumns
    view: RuleView
    content_lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def slice(self, start: int, stop: int) -> ItemTable:
        """Items ``start:stop`` (views where the columns allow)."""
        return ItemTable(ids=self.ids[start:stop], columns=self.columns.slice(start, stop),
                         view=self.view.slice(start, stop), content_lengths=self.content_lengths[start:stop])


@dataclass(frozen=True)
class ItemColumns:
    """Per-item results of a solved plan as arrays (row-aligned with the plan's items): what
    :meth:`RetentionPlan.to_decision` turns into :class:`ItemDecision` objects, and what a batch
    scorer writes out directly.

    Attributes:
        kept: bool. action: the planned action per item (``keep``/``write``/``archive``/``delete``/``skip``).
        reason: the :class:`~runtime.retention.Reason` value per item.
        utility: model utility (decayed by decay rules) + rule bonuses (what the solver used).
            model_utility: the scorer's.
    """

    kept: np.ndarray
    action: list[str]
    reason: list[str]
    utility: np.ndarray
    model_utility: np.ndarray


def recent_context(vectors: np.ndarray) -> np.ndarray | None:
    """The recent-context vector: unit mean of the most recent memories' unit vectors (``None`` if none)."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2 or len(v) == 0:
        return None
    m = v.mean(axis=0)
    n = float(np.linalg.norm(m))
    return (m / max(n, 1e-12)).astype(np.float32)


def scoring_context(*, now: datetime, steps: np.ndarray, recent: np.ndarray | None = None,
                    goal: np.ndarray | None = None, stage: float | None = None,
                    session: np.ndarray | None = None, skip_redundancy: bool = False) -> ScoringContext:
    """The decision context, from what the agent has (see the module docstring).

    Args:
        now: decision time.
        steps: each record's write step in its scope (row-aligned with the records).
        recent: the recent-context vector (:func:`recent_context`), if any.
        goal: unit embedding of the task goal, if the agent set one.
        stage: task progress in [0, 1], if the agent set it.
        session: per record, the session-context features stored when its session closed (NaN rows
            for the open session).
        skip_redundancy: skip the O(n²) redundancy features (huge batches).
    """
    st = np.asarray(steps, dtype=np.int64)
    return ScoringContext(now=now, step=int(st.max()) if len(st) else 0, record_steps=st, goal_embedding=goal,
                          recent_embedding=recent, stage=0.0 if stage is None else float(stage),
                          extras={"skip_redundancy": 1.0} if skip_redundancy else {}, session_context=session)


@dataclass(frozen=True)
class ScoredProblem:
    """A retention problem ready to solve, and what produced it.

    Attributes:
        records: the items (working memories, then candidates), row-aligned with everything else:
            MemIR records, or an :class:`ItemTable` (batch scoring).
        ids: the item ids.
        candidate: True for unsaved candidates.
        model_utility: the scorer's utilities.
        compiled: the rules evaluated on ``records``.
        problem: the :class:`~runtime.retention.RetentionProblem` (utility = model + bonuses).
        capacity, budget_tokens: the limits used.
    """

    records: tuple[MemIR, ...] | ItemTable
    ids: tuple[str, ...]
    candidate: np.ndarray
    model_utility: np.ndarray
    compiled: CompiledRules
    problem: RetentionProblem
    capacity: int | None
    budget_tokens: int | None


class RetentionPlan:
    """Turns inputs into a problem and a solved problem into a typed decision, for one policy.

    Args:
        policy: the :class:`RetentionPolicy` (capacity, budget, rules, method, actions).
        scorer: the utility scorer (the policy's own scorer is not consulted here: the caller
            resolves the default model once and passes it).
    """

    def __init__(self, policy: RetentionPolicy, scorer: Scorer) -> None:
        self.policy = policy
        self.scorer = scorer
        self.rules: RuleSet = policy.ruleset

    def build(self, records: Sequence[MemIR] | ItemTable, vectors: np.ndarray, ctx: ScoringContext, *,
              candidate: np.ndarray | None = None, model_utility: np.ndarray | None = None) -> ScoredProblem:
        """Score, compile the rules and state the problem. ``records`` are MemIR records or, from a
        batch scorer, an :class:`ItemTable` (scored with the scorer's ``score_columns``).
        ``model_utility``: the scorer's utilities when the caller already has them (a batch scorer
        scores many scopes in one call with ``score_segments``); the scorer is then not called."""
        table = records if isinstance(records, ItemTable) else None
        n = len(records)
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != n:
            raise ValidationError(f"vectors must be ({n}, d), got {vecs.shape}", field="vectors")
        cand = np.zeros(n, dtype=bool) if candidate is None else np.asarray(candidate, dtype=bool)
        if not n:
            model_u = np.zeros(0, dtype=np.float64)
        elif model_utility is not None:
            model_u = np.asarray(model_utility, dtype=np.float64)
        elif table is not None:
            score_columns = getattr(self.scorer, "score_columns", None)
            if score_columns is None:
                raise ValidationError(f"scorer {self.scorer.name!r} cannot score columns (no score_columns): "
                                      "pass MemIR records instead", field="scorer")
            model_u = np.asarray(score_columns(table.columns, vecs, ctx), dtype=np.float64)
        else:
            model_u = np.asarray(self.scorer.score(records, vecs, ctx), dtype=np.float64)  # type: ignore[arg-type]
        if model_u.shape != (n,) or not np.isfinite(model_u).all():
            raise ValidationError(f"scorer {self.scorer.name!r} must return {n} finite utilities, got shape "
                                  f"{model_u.shape}", field="scorer")
        if table is not None:
            view, ids, lengths = table.view, tuple(table.ids), table.content_lengths
        else:
            recs: Sequence[MemIR] = records  # type: ignore[assignment]
            view = RuleView.from_records(recs)
            ids, lengths = tuple(view.ids), np.array([len(c) for c in view.content], dtype=np.int64)
        compiled = self.rules.compile(view, ctx.now)
        utility = compiled.utility(model_u)
        cap = self.policy.capacity
        k: int | None
        if callable(cap):
            if table is not None:
                raise ValidationError("a capacity function needs MemIR records; batch scoring takes a number",
                                      field="capacity")
            k = int(cap(records, utility))  # type: ignore[arg-type]
        else:
            k = cap
        budget = self.policy.budget_tokens
        weights = approx_tokens_array(lengths) if budget is not None else None
        problem = RetentionProblem(
            utility=utility, capacity=k, weights=weights, budget=budget,
            must_keep=compiled.must_keep, must_forget=compiled.must_forget, implies=compiled.implies,
            excludes=compiled.excludes, quotas=compiled.quotas, item_ids=list(ids),
            overflow_penalty=self.policy.overflow_penalty, on_infeasible=self.policy.on_infeasible)
        held = table if table is not None else tuple(records)  # type: ignore[arg-type]
        return ScoredProblem(held, ids, cand, model_u, compiled, problem, k, budget)

    def solve(self, plan: ScoredProblem) -> RetentionResult:
        """Run the policy's solver on the plan's problem."""
        return solve(plan.problem, method=self.policy.method)

    def decide(self, records: Sequence[MemIR], vectors: np.ndarray, ctx: ScoringContext, *, user_id: str,
               agent_id: str, trigger: str, candidate: np.ndarray | None = None,
               decision_id: str | None = None, expired: Sequence[str] = ()) -> RetentionDecision:
        """Build, solve and turn the answer into a decision whose actions are the planned ones
        (``keep``/``write``/``archive``/``delete``/``skip``; the store turns a ``delete`` of a memory
        others derive from into ``redact`` when it applies the decision). ``expired``: archived
        memories past their TTL, which leave with this decision (the TTL holds in the archive too)."""
        t0 = time.perf_counter()
        plan = self.build(records, vectors, ctx, candidate=candidate)
        result = self.solve(plan)
        return self.to_decision(plan, result, at=ctx.now, user_id=user_id, agent_id=agent_id, trigger=trigger,
                                decision_id=decision_id, started=t0, expired=expired)

    def item_columns(self, plan: ScoredProblem, result: RetentionResult) -> ItemColumns:
        """Per-item results of a solved plan as arrays (the one place actions are assigned)."""
        keep = np.asarray(result.keep, dtype=bool)
        n = len(plan.ids)
        action = np.full(n, self.policy.forgotten, dtype=object)
        for i, a in plan.compiled.forget_action.items():
            action[i] = a
        action[keep] = "keep"
        action[plan.candidate] = np.where(keep[plan.candidate], "write", "skip")
        expl = result.explanation
        reasons = [r.value for r in REASON_CODES]
        return ItemColumns(kept=keep, action=action.tolist(),
                           reason=[reasons[c] for c in np.asarray(expl.reason_codes).tolist()],
                           utility=np.asarray(plan.problem.utility, dtype=np.float64),
                           model_utility=np.asarray(plan.model_utility, dtype=np.float64))

    def to_decision(self, plan: ScoredProblem, result: RetentionResult, *, at: datetime, user_id: str, agent_id: str,
                    trigger: str, decision_id: str | None = None, started: float | None = None,
                    expired: Sequence[str] = ()) -> RetentionDecision:
        """The typed decision of a solved plan (planned actions; nothing applied); ``expired`` as in
        :meth:`decide`."""
        expl = result.explanation
        cols = self.item_columns(plan, result)
        items: dict[str, ItemDecision] = {}
        kept: list[str] = []
        archived: list[str] = []
        deleted: list[str] = []
        written: list[str] = []
        for i, rid in enumerate(plan.ids):
            action = cast(Action, cols.action[i])
            {"keep": kept, "write": kept, "archive": archived, "delete": deleted}.get(action, []).append(rid)
            if action == "write":
                written.append(rid)
            info = expl.item(i)
            items[rid] = ItemDecision(
                memory_id=rid, kept=bool(cols.kept[i]), reason=expl.reason(i), action=action,
                utility=float(cols.utility[i]), model_utility=float(cols.model_utility[i]),
                bonuses=[Bonus(rule=nm, add=float(a)) for nm, a in plan.compiled.adjustments(i, cols.model_utility[i])],
                rule=plan.compiled.must_keep.get(i) or plan.compiled.must_forget.get(i),
                cause=info["cause"], candidate=bool(plan.candidate[i]))
        total_ms = (time.perf_counter() - started) * 1000 if started is not None else result.solve_ms
        return RetentionDecision(
            decision_id=decision_id or new_id("dec"), at=at, user_id=user_id, agent_id=agent_id, trigger=trigger,
            scorer=self.scorer.name, method=result.method, engine=result.engine, status=result.status,
            objective=float(result.objective), capacity=plan.capacity, budget_tokens=plan.budget_tokens,
            kept=kept, archived=archived, deleted=deleted, written=written, n_items=len(plan.ids),
            constraints=[_constraint(c) for c in expl.constraints], cut=_cut(expl),
            overflow={k: float(v) for k, v in result.overflow.items()}, upper_bound=result.upper_bound,
            gap=result.gap, items=items, inputs_digest=digest(plan), solve_ms=result.solve_ms, total_ms=total_ms,
            expired=list(expired))


def _constraint(c: dict[str, Any]) -> Constraint:
    keep = ("name", "kind", "slack", "tight", "used", "limit", "count", "min", "max", "soft")
    return Constraint(**{k: c[k] for k in keep if k in c})


def _cut(expl: Explanation) -> Cut:
    def item(x: dict[str, Any] | None) -> CutItem | None:
        return None if x is None else CutItem(memory_id=str(x["item"]), utility=x["utility"])

    return Cut(worst_kept=item(expl.cut["worst_kept"]), best_dropped=item(expl.cut["best_dropped"]),
               marginal_utility=expl.cut["marginal_utility"])


def digest(plan: ScoredProblem) -> str:
    """A short digest of a plan's inputs (ids, utilities, limits): equal inputs, equal digest."""
    h = hashlib.sha256()
    for rid in plan.ids:
        h.update(rid.encode())
    h.update(np.asarray(plan.problem.utility, np.float64).tobytes())
    h.update(repr((plan.capacity, plan.budget_tokens)).encode())
    return h.hexdigest()[:16]


def audit(records: Sequence[MemIR], kept_ids: Sequence[str] | set[str], rules: RuleSet, *, now: datetime,
          capacity: int | None = None, budget_tokens: int | None = None) -> list[str]:
    """Hard-rule violations of a kept set, recomputed from the records and the rules alone.

    Independent of the solver and of the reason codes it reports, so a real violation shows: the
    rules are compiled afresh on ``records`` and every must-keep, must-forget, implication,
    exclusion and quota is checked on the kept set. The capacity counts as violated only when more
    is kept than the hard rules force (must-keep items and what they imply).

    Returns:
        The names of the violated rules (empty = none).
    """
    kept = set(kept_ids)
    c = rules.compile(records, now)
    x = np.array([r.id in kept for r in records], dtype=bool)
    problem = RetentionProblem(utility=np.zeros(len(records)), must_keep=c.must_keep, must_forget=c.must_forget,
                               implies=c.implies, excludes=c.excludes, quotas=c.quotas,
                               item_ids=[r.id for r in records])
    out = violations(problem, x, limits=False)
    out += [q.name or "quota" for q in problem.quotas if q.max is not None and int(x[list(q.members)].sum()) > q.max]
    forced = set(c.must_keep)
    frontier = list(forced)
    succ: dict[int, list[int]] = {}
    for a, b, _ in c.implies:
        succ.setdefault(a, []).append(b)
    while frontier:
        for b in succ.get(frontier.pop(), []):
            if b not in forced:
                forced.add(b)
                frontier.append(b)
    if capacity is not None and int(x.sum()) > max(capacity, len(forced)):
        out.append(f"capacity(K={capacity}): kept {int(x.sum())}, the rules force {len(forced)}")
    if budget_tokens is not None:
        used = sum(approx_tokens(r.content) for r, k in zip(records, x) if k)
        forced_tokens = sum(approx_tokens(records[i].content) for i in forced)
        if used > max(budget_tokens, forced_tokens):
            out.append(f"budget(B={budget_tokens}): kept {used} tokens")
    return out
