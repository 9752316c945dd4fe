"""Typed events, questions and episodes, with the ground truth kept apart from what an agent sees.

An :class:`Event` carries everything needed to build a :class:`runtime.record.MemIR` record
(:meth:`Event.to_memir`) plus a :class:`Truth` that only hindsight labelling and evaluation may read:
the policy, the features and the store never see it (``to_memir`` does not copy it).

A :class:`Question` is asked *between* events: ``step = s`` means after event ``s - 1`` and before
event ``s``, so every event a question may need has ``step < s``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from runtime.record import DialogRole, Flag, MemIR, Metadata, Provenance, RoleContext, SourceType

from .text import Split

__all__ = ["Episode", "Event", "Kind", "Question", "Truth"]


class Kind(StrEnum):
    """Ground-truth category of an event (what the simulator meant it to be)."""

    core_instruction = "core_instruction"  # standing rule / task goal; flagged core_instruction
    key_fact = "key_fact"                  # first statement of a slot value
    update = "update"                      # a later value that supersedes the previous version
    distractor = "distractor"              # look-alike: same topic and slot style, never the answer
    chitchat = "chitchat"                  # small talk
    temporary = "temporary"                # timestamps, progress logs, short-lived holds
    secret = "secret"                      # a credential with a TTL (expires_at set)
    tool_result = "tool_result"            # tool output; useful only when it carries a slot value
    inference = "inference"                # the agent's own reasoning; useful when it states a slot


@dataclass(frozen=True, slots=True)
class Truth:
    """Hindsight ground truth of one event. Never shown to a policy, never written into MemIR.

    Attributes:
        kind: what the event is.
        fact_key: slot identity ("trip.hotel") for rules, facts, updates and slot-stating tool
            results and inferences; ``None`` otherwise.
        version: 1 for a first statement, 2, 3… for updates; 0 when not a slot value.
        supersedes: event id of the previous version (updates only).
        superseded_by: event id of the next version, if one comes later in the episode.
        lookalike_of: for distractors, the ``fact_key`` they imitate.
        value: the slot value stated (or the rule text), for answer checking.
    """

    kind: Kind
    fact_key: str | None = None
    version: int = 0
    supersedes: str | None = None
    superseded_by: str | None = None
    lookalike_of: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One observed event of an episode (a dialog turn, a tool output, a system message…).

    Attributes mirror MemIR: ``source_type``/``user_id``/``session_id``/``timestamp``/
    ``source_entity``/``trigger``/``derived_from`` go to provenance; ``active_role``/``sub_role``/
    ``dialog_role``/``task_id`` to role context; ``confidence``/``expires_at``/``tags``/``flags`` to
    metadata. ``phase`` is the task phase the agent is in (its changes are retention triggers).
    """

    event_id: str
    task_id: str
    step: int
    content: str
    source_type: SourceType
    dialog_role: DialogRole
    active_role: str
    sub_role: str | None
    phase: str
    session_id: str
    user_id: str
    timestamp: datetime
    expires_at: datetime | None
    flags: tuple[Flag, ...]
    tags: tuple[str, ...]
    source_entity: str
    trigger: str
    derived_from: tuple[str, ...]
    confidence: float
    truth: Truth

    @property
    def kind(self) -> Kind:
        """Shortcut for ``truth.kind``."""
        return self.truth.kind

    def to_memir(self, *, agent_id: str = "sim") -> MemIR:
        """The MemIR record an agent would write for this event (ground truth is not copied)."""
        return MemIR(
            id=self.event_id,
            content=self.content,
            created_at=self.timestamp,
            provenance=Provenance(
                type=self.source_type, user_id=self.user_id, agent_id=agent_id, session_id=self.session_id,
                timestamp=self.timestamp, source_entity=self.source_entity, trigger=self.trigger,
                derived_from=list(self.derived_from)),
            role_context=RoleContext(active_role=self.active_role, sub_role=self.sub_role,
                                     dialog_role=self.dialog_role, task_id=self.task_id),
            metadata=Metadata(confidence=self.confidence, expires_at=self.expires_at, tags=list(self.tags),
                              flags=list(self.flags)),
        )


@dataclass(frozen=True, slots=True)
class Question:
    """A later question that needs one specific fact (the version current at ``step``).

    Attributes:
        question_id: unique id within the episode set.
        step: asked after event ``step - 1`` and before event ``step``.
        timestamp: when it is asked.
        user_id: who asks; the answer is among this user's events only.
        session_id: the session it is asked in.
        text: the question, paraphrased (shares topic words with the fact, not its sentence).
        fact_key: the slot asked about.
        answer_value: the current value (or rule text).
        answer_event_ids: the event(s) stating the current version at ``step``.
        stale_event_ids: superseded versions of the same slot (a stale answer).
        lookalike_event_ids: distractors for the slot and other users' versions of it, before ``step``.
    """

    question_id: str
    step: int
    timestamp: datetime
    user_id: str
    session_id: str
    text: str
    fact_key: str
    answer_value: str
    answer_event_ids: tuple[str, ...]
    stale_event_ids: tuple[str, ...]
    lookalike_event_ids: tuple[str, ...]


@dataclass(frozen=True)
class Episode:
    """One simulated long-horizon task: events in step order and the questions asked along the way.

    Attributes:
        episode_id: unique id (``<family>.<split>.<seed>``); also the MemIR ``task_id``.
        family: family name.
        split: which template/entity split produced it.
        seed: the seed it was generated from (``generate_episode(family, seed, split)`` rebuilds it).
        goal: the task statement (also the first core-instruction event).
        active_role: the agent's role for the task.
        user_ids: users taking part (several only in multi-user families).
        events: events, ``events[i].step == i``.
        questions: questions sorted by step.
    """

    episode_id: str
    family: str
    split: Split
    seed: int
    goal: str
    active_role: str
    user_ids: tuple[str, ...]
    events: tuple[Event, ...]
    questions: tuple[Question, ...]

    @cached_property
    def _index(self) -> dict[str, Event]:
        return {e.event_id: e for e in self.events}

    def event(self, event_id: str) -> Event:
        """The event with ``event_id`` (KeyError if not in this episode)."""
        return self._index[event_id]

    def needed_event_ids(self) -> frozenset[str]:
        """Ids of events that answer at least one question."""
        return frozenset(i for q in self.questions for i in q.answer_event_ids)

    def timeline(self) -> Iterator[Event | Question]:
        """Events and questions interleaved in the order an agent meets them."""
        qs = iter(self.questions)
        q = next(qs, None)
        for e in self.events:
            while q is not None and q.step <= e.step:
                yield q
                q = next(qs, None)
            yield e
        while q is not None:
            yield q
            q = next(qs, None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (datetimes as ISO strings, enums as values)."""
        d = asdict(self)
        for e in d["events"]:
            e["timestamp"] = e["timestamp"].isoformat()
            e["expires_at"] = e["expires_at"].isoformat() if e["expires_at"] else None
            e["source_type"], e["dialog_role"] = str(e["source_type"]), str(e["dialog_role"])
            e["flags"] = [str(f) for f in e["flags"]]
            e["truth"]["kind"] = str(e["truth"]["kind"])
        for q in d["questions"]:
            q["timestamp"] = q["timestamp"].isoformat()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        """Inverse of :meth:`to_dict`."""
        def ev(raw: dict[str, Any]) -> Event:
            x: dict[str, Any] = dict(raw)
            x["timestamp"] = datetime.fromisoformat(x["timestamp"])
            x["expires_at"] = datetime.fromisoformat(x["expires_at"]) if x["expires_at"] else None
            x["source_type"], x["dialog_role"] = SourceType(x["source_type"]), DialogRole(x["dialog_role"])
            x["flags"] = tuple(Flag(f) for f in x["flags"])
            x["truth"] = Truth(**{**x["truth"], "kind": Kind(x["truth"]["kind"])})
            kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in x.items()}
            return Event(**kw)

        def qu(raw: dict[str, Any]) -> Question:
            x: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
            return Question(**{**x, "timestamp": datetime.fromisoformat(x["timestamp"])})

        top = {f.name: d[f.name] for f in fields(cls)}
        top["user_ids"] = tuple(top["user_ids"])
        top["events"] = tuple(ev(e) for e in d["events"])
        top["questions"] = tuple(qu(q) for q in d["questions"])
        return cls(**top)
