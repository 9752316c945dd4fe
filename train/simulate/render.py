"""Wording and metadata: turn a :class:`~train.simulate.schedule.Plan` into events and questions.

Observable metadata (source type, dialog role, confidence, flags) follows *who produced* an event,
not its ground-truth kind: a user's fact and a user's look-alike look the same on paper, which is
what makes usefulness something to learn. The exceptions are the ones a real system has too:
core instructions carry the ``core_instruction`` flag, secrets and short-lived holds an
``expires_at``, and some tool results a ``key_result`` flag (noisily: a few noise results have it).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from runtime.record import DialogRole, Flag, SourceType

from .events import Episode, Event, Kind, Question, Truth
from .families import FamilySpec, RuleSpec, SlotSpec
from .pools import draw_value, pool, secret_string
from .schedule import Instance, Item, Plan
from .text import Split, fill, split_items, templates

__all__ = ["render_episode"]

_START = datetime(2024, 1, 1, tzinfo=UTC)
_VIA: dict[str, tuple[SourceType, DialogRole, str]] = {
    "user": (SourceType.direct_interaction, DialogRole.user, "user_message"),
    "system": (SourceType.direct_interaction, DialogRole.system, "system_prompt"),
    "doc": (SourceType.external_ingest, DialogRole.tool, "document_read"),
    "tool": (SourceType.external_ingest, DialogRole.tool, "tool_call"),
    "agent": (SourceType.derived_inference, DialogRole.agent, "agent_reasoning"),
    "reply": (SourceType.direct_interaction, DialogRole.agent, "agent_reply"),
    "status": (SourceType.system_feedback, DialogRole.system, "status_update"),
}
_CONFIDENCE: dict[str, tuple[float, float, float]] = {  # (P(exactly 1.0), low, high) per producer
    "user": (0.7, 0.7, 1.0), "system": (1.0, 1.0, 1.0), "doc": (0.3, 0.8, 1.0), "tool": (0.3, 0.9, 1.0),
    "agent": (0.0, 0.5, 0.95), "reply": (1.0, 1.0, 1.0), "status": (1.0, 1.0, 1.0),
}
_TTL_MINUTES = (15, 30, 45, 60, 120, 240, 480, 720)
_HOLD_MINUTES = (5, 10, 15, 20, 30, 45)


def _clock(rng: np.random.Generator, n: int) -> tuple[list[datetime], np.ndarray]:
    """Timestamps and session index per step: minutes apart inside a session, hours–days between."""
    n_sess = int(rng.integers(3, 4 + n // 60))
    session = np.zeros(n, dtype=int)
    for c in rng.choice(np.arange(1, n), size=n_sess - 1, replace=False):
        session[int(c):] += 1
    minutes = rng.exponential(1.5, n) + 0.1
    gaps = np.flatnonzero(np.diff(session)) + 1
    minutes[gaps] = rng.uniform(2 * 60, 72 * 60, len(gaps))
    minutes[0] = 0.0
    start = _START + timedelta(days=int(rng.integers(0, 365)), hours=int(rng.integers(7, 11)))
    offsets = np.cumsum(minutes)
    return [start + timedelta(minutes=float(m)) for m in offsets], session


class _Renderer:
    def __init__(self, fam: FamilySpec, plan: Plan, rng: np.random.Generator, split: Split, episode_id: str):
        self.fam, self.plan, self.rng, self.split, self.eid = fam, plan, rng, split, episode_id
        self.T = templates(split)
        self.ctx, self.docs = split_items(fam.ctx, split), split_items(fam.docs, split)
        self.chat_user = self.T.chat_user + split_items(fam.chatter, split)
        self.n = len(plan.items)
        self.ts, self.session = _clock(rng, self.n)
        self.user_ids = [f"u{int(rng.integers(16**8)):08x}" for _ in range(plan.n_users)]
        names: list[str] = []
        while len(names) < plan.n_users:  # distinct first names: users greet each other's agent by them
            name = draw_value("person", rng, split)
            if name.split()[0] not in {x.split()[0] for x in names}:
                names.append(name)
        self.names = names
        self.others = [f for f in pool("first", split) if f not in {x.split()[0] for x in names}]
        self.history: dict[tuple[int, str], list[tuple[str, int, str]]] = {}
        self.lookalikes: dict[tuple[int, str], list[tuple[str, int]]] = {}

    # -- helpers ---------------------------------------------------------------------------------
    def pick(self, seq: tuple[str, ...] | list[str]) -> str:
        return seq[int(self.rng.integers(len(seq)))]

    def phase(self, step: int) -> str:
        ph = self.fam.phases
        return ph[min(step * len(ph) // self.n, len(ph) - 1)]

    def session_id(self, step: int, user: int) -> str:
        base = f"{self.eid}.s{int(self.session[step])}"
        return f"{base}.u{user}" if self.fam.multi_user else base

    def confidence(self, via: str) -> float:
        p1, lo, hi = _CONFIDENCE[via]
        return 1.0 if self.rng.random() < p1 else round(float(self.rng.uniform(lo, hi)), 3)

    def urgent(self, text: str, p: float) -> str:
        return self.pick(self.T.urgent_prefix) + text if self.rng.random() < p else text

    def current(self, user: int, key: str) -> tuple[str, int, str] | None:
        h = self.history.get((user, key))
        return h[-1] if h else None

    # -- one event ---------------------------------------------------------------------------------
    def render(self, step: int, it: Item) -> Event:
        fam, u = self.fam, it.user
        entity: str | None = None
        flags: list[Flag] = []
        expires: datetime | None = None
        derived: tuple[str, ...] = ()
        topic: str | None = None
        sub_role = self.phase(step)
        via = it.via
        inst = it.inst
        if it.kind is Kind.core_instruction and inst is None:  # the task goal
            content = fill(fam.goals[0 if self.split == "train" else 1], user=self.names[u])
            truth = Truth(Kind.core_instruction, f"{fam.name}.goal", 1, value=content)
            flags.append(Flag.core_instruction)
            topic = "goal"
        elif inst is not None and it.kind is not Kind.distractor:
            content, truth, via, entity, derived, flags = self.slot_event(step, it, inst)
            topic = inst.spec.topic
            if isinstance(inst.spec, SlotSpec):
                sub_role = inst.spec.phase
        elif it.kind is Kind.distractor:
            assert inst is not None and it.value is not None
            spec = inst.spec
            noun = spec.noun if isinstance(spec, RuleSpec) else spec.nouns[0]
            entity = self.pick(self.docs) if via == "doc" else self.pick(fam.tools) if via == "tool" else None
            tpl = {"user": self.T.lookalike_user, "doc": self.T.lookalike_doc, "tool": self.T.lookalike_tool}[via]
            content = self.urgent(fill(self.pick(tpl), noun=noun, v=it.value, name=self.pick(self.others),
                                       doc=entity or "", tool=entity or ""), 0.04)
            truth = Truth(Kind.distractor, lookalike_of=spec.key, value=it.value)
            self.lookalikes.setdefault((u, spec.key), []).append((self.event_id(step), step))
            topic = spec.topic
            if isinstance(spec, SlotSpec):
                sub_role = spec.phase
        else:
            content, via, entity, expires, derived, topic, flags = self.filler(step, it)
            truth = Truth(it.kind)
        if entity is None:
            entity = self.names[u] if via == "user" else "assistant" if via in ("agent", "reply") else "system"
        source, role, trigger = _VIA[via]
        return Event(
            event_id=self.event_id(step), task_id=self.eid, step=step, content=content, source_type=source,
            dialog_role=role, active_role=fam.active_role, sub_role=sub_role, phase=self.phase(step),
            session_id=self.session_id(step, u), user_id=self.user_ids[u], timestamp=self.ts[step],
            expires_at=expires, flags=tuple(flags), tags=(fam.domain, topic) if topic else (fam.domain,),
            source_entity=entity, trigger=trigger, derived_from=derived, confidence=self.confidence(via),
            truth=truth)

    def event_id(self, step: int) -> str:
        return f"{self.eid}.e{step:04d}"

    def slot_event(self, step: int, it: Item, inst: Instance
                   ) -> tuple[str, Truth, str, str | None, tuple[str, ...], list[Flag]]:
        spec, u, v, via = inst.spec, it.user, it.value, it.via
        entity: str | None = None
        flags: list[Flag] = []
        derived: tuple[str, ...] = ()
        prev = self.current(u, spec.key)
        if isinstance(spec, RuleSpec):
            body = spec.body(self.split).replace("{v}", v or "")
            content = fill(self.pick(self.T.core), rule=body)
            truth = Truth(Kind.core_instruction, spec.key, 1, value=body)
            flags.append(Flag.core_instruction)
            v = body
        elif v is None:
            raise AssertionError(f"slot item {spec.key} planned without a value")
        elif spec.derived:
            parents = [self.current(u, p) for p in spec.parents]
            live = [(p, c) for p, c in zip(spec.parents, parents) if c is not None]
            pkey, (_, _, pval) = live[int(self.rng.integers(len(live)))]
            content = fill(self.pick(self.T.infer_useful), pnoun=self.fam.slot(pkey).nouns[0], p=pval,
                           noun=spec.nouns[0], v=v)
            derived = tuple(c[0] for _, c in live)
            truth = Truth(it.kind, spec.key, 1, value=v)
        else:
            entity = self.pick(self.docs) if via == "doc" else self.pick(self.fam.tools) if via == "tool" else None
            if it.kind is Kind.update:
                assert prev is not None
                tpl = self.T.update_tool if via == "tool" else self.T.fact_doc if via == "doc" else self.T.update_user
                truth = Truth(Kind.update, spec.key, it.version, supersedes=prev[0], value=v)
            else:
                tpl = self.T.fact_tool if via == "tool" else self.T.fact_doc if via == "doc" else self.T.fact_user
                truth = Truth(it.kind, spec.key, it.version, value=v)
            content = fill(self.pick(tpl), noun=spec.nouns[0], v=v, old=prev[2] if prev else "",
                           ctx=self.pick(self.ctx), doc=entity or "", tool=entity or "")
            if via == "user":
                content = self.urgent(content, 0.12)
            if via == "tool" and self.rng.random() < 0.6:
                flags.append(Flag.key_result)
        assert v is not None
        self.history.setdefault((u, spec.key), []).append((self.event_id(step), step, v))
        return content, truth, via, entity, derived, flags

    def filler(self, step: int, it: Item
               ) -> tuple[str, str, str | None, datetime | None, tuple[str, ...], str | None, list[Flag]]:
        rng, T, u, ts = self.rng, self.T, it.user, self.ts[step]
        tool = self.pick(self.fam.tools)
        if it.kind in (Kind.tool_result, Kind.temporary):  # numbers for status lines, drawn in one call
            n, m, pct, ms, mins, code = rng.integers((2, 60, 5, 40, 0, 0), (60, 120, 96, 2500, 6, 16**6))
            nums = {"n": str(n), "m": str(m), "pct": str(pct), "ms": str(ms), "tool": tool,
                    "time": f"{ts.hour:02d}:{ts.minute:02d}", "mins": str(_HOLD_MINUTES[mins]), "code": f"{code:06x}"}
        if it.kind is Kind.secret:
            ttl = _TTL_MINUTES[int(rng.integers(len(_TTL_MINUTES)))]
            ttl_text = f"{ttl} minutes" if ttl < 60 else f"{ttl // 60} hour{'s' if ttl >= 120 else ''}"
            content = fill(self.pick(T.secret), system=self.pick(self.fam.systems), key=secret_string(rng),
                           ttl=ttl_text)
            via = "user" if rng.random() < 0.6 else "tool"
            return content, via, tool if via == "tool" else None, ts + timedelta(minutes=ttl), (), None, []
        if it.kind is Kind.tool_result:
            flags = [Flag.key_result] if rng.random() < 0.08 else []
            return fill(self.pick(T.tool_noise), **nums), "tool", tool, None, (), None, flags
        if it.kind is Kind.temporary:
            via = "status" if rng.random() < 0.6 else "tool"
            if rng.random() < 0.25:
                content = fill(self.pick(T.temp_ttl), **nums)
                return content, via, tool if via == "tool" else None, ts + timedelta(minutes=int(nums["mins"])), (), None, []
            return fill(self.pick(T.temp), **nums), via, tool if via == "tool" else None, None, (), None, []
        if it.kind is Kind.inference:
            mine = [i for i in self.plan.instances if i.user == u and isinstance(i.spec, SlotSpec)]
            known = [i for i in mine if self.current(u, i.spec.key) is not None]
            if known and rng.random() < 0.6:
                inst = known[int(rng.integers(len(known)))]
                eid, _, val = self.current(u, inst.spec.key)  # type: ignore[misc]
                spec = inst.spec
                assert isinstance(spec, SlotSpec)
                content = fill(self.pick(T.infer_noise_value), pnoun=spec.nouns[0], p=val)
                return content, "agent", None, None, (eid,), spec.topic, []
            spec = self.pick_spec(mine)
            return fill(self.pick(T.infer_noise), pnoun=spec.nouns[0]), "agent", None, None, (), spec.topic, []
        if rng.random() < 0.7:  # chit-chat
            return self.urgent(self.pick(self.chat_user), 0.03), "user", None, None, (), None, []
        return self.pick(T.chat_agent), "reply", None, None, (), None, []

    def pick_spec(self, mine: list[Instance]) -> SlotSpec:
        specs = [i.spec for i in mine] or [s for s in self.fam.slots if not s.derived]
        spec = specs[int(self.rng.integers(len(specs)))]
        assert isinstance(spec, SlotSpec)
        return spec

    # -- questions -----------------------------------------------------------------------------------
    def question(self, j: int, step: int, inst: Instance) -> Question:
        u, spec, T = inst.user, inst.spec, self.T
        hist = [h for h in self.history[(u, spec.key)] if h[1] < step]
        assert hist, f"question at step {step} about {spec.key} precedes its first statement"
        looks = [e for e, s in self.lookalikes.get((u, spec.key), []) if s < step]
        for v in range(self.plan.n_users):  # another user's value of the same slot is a look-alike
            if v != u:
                looks += [e for e, s, _ in self.history.get((v, spec.key), []) if s < step]
        if isinstance(spec, RuleSpec):
            text = fill(self.pick(T.rule_question), noun=spec.noun)
        else:
            noun = spec.nouns[0] if self.rng.random() < 0.6 else self.pick(spec.nouns)
            text = fill(self.pick(T.question), noun=noun, ctx=self.pick(self.ctx))
        if self.fam.multi_user and self.rng.random() < 0.4:
            text = fill(self.pick(T.multi_user_hello), first=self.names[u].split()[0]) + text
        t0 = self.ts[step - 1]
        when = t0 + (self.ts[step] - t0) / 2 if step < self.n else t0 + timedelta(minutes=1)
        return Question(
            question_id=f"{self.eid}.q{j:03d}", step=step, timestamp=when, user_id=self.user_ids[u],
            session_id=self.session_id(step - 1, u), text=text, fact_key=spec.key, answer_value=hist[-1][2],
            answer_event_ids=(hist[-1][0],), stale_event_ids=tuple(h[0] for h in hist[:-1]),
            lookalike_event_ids=tuple(sorted(looks)))


def render_episode(fam: FamilySpec, plan: Plan, rng: np.random.Generator, split: Split, episode_id: str,
                   seed: int) -> Episode:
    """Word every planned item, link versions, and resolve each question's answer at its step."""
    r = _Renderer(fam, plan, rng, split, episode_id)
    events = [r.render(step, it) for step, it in enumerate(plan.items)]
    successor = {e.truth.supersedes: e.event_id for e in events if e.truth.supersedes}
    events = [replace(e, truth=replace(e.truth, superseded_by=successor[e.event_id]))
              if e.event_id in successor else e for e in events]
    questions = [r.question(j, step, q.inst) for j, (step, q) in enumerate(plan.questions)]
    return Episode(episode_id=episode_id, family=fam.name, split=split, seed=seed, goal=events[0].content,
                   active_role=fam.active_role, user_ids=tuple(r.user_ids), events=tuple(events),
                   questions=tuple(questions))
