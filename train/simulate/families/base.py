"""The shape of a task family: its role, phases, standing rules and fact slots.

A family is data, not code: the generator reads these specs and the shared templates. Every
phrase list a family declares is split between train and eval by the same rule as the templates
(:func:`~train.simulate.text.split_items`); rule bodies and goals come as explicit (train, eval) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..pools import validate_spec
from ..text import Split, split_items

__all__ = ["FamilySpec", "RuleSpec", "SlotSpec"]

Via = Literal["user", "doc", "tool"]


@dataclass(frozen=True)
class SlotSpec:
    """One fact slot ("trip.hotel"): a value the task may later need, that may change.

    Attributes:
        key: slot identity, ``<family prefix>.<topic>``; the ground-truth ``fact_key``.
        nouns: ways to name the slot in text; ``nouns[0]`` is used in statements, any in questions.
        value: value spec (see :mod:`train.simulate.pools`).
        phase: the task phase (also the ``sub_role``) the slot belongs to.
        via: where the value usually comes from: the user, a document, or a tool result.
        parents: slots this one is derived from; non-empty = stated by the agent's own inference.
        updatable: whether later updates may supersede it (derived slots never are).
    """

    key: str
    nouns: tuple[str, ...]
    value: str
    phase: str
    via: Via = "user"
    parents: tuple[str, ...] = ()
    updatable: bool = True

    @property
    def topic(self) -> str:
        """The topic tag of the slot (last segment of the key)."""
        return self.key.rsplit(".", 1)[-1]

    @property
    def derived(self) -> bool:
        """True when the value is the agent's inference from ``parents``."""
        return bool(self.parents)


@dataclass(frozen=True)
class RuleSpec:
    """A standing (core) instruction: must be followed for the whole task, never superseded.

    Attributes:
        key: ground-truth ``fact_key`` of the rule, ``<prefix>.rule.<name>``.
        noun: how a later question names it ("spending cap").
        bodies: the rule text as a (train, eval) pair; may contain ``{v}``.
        value: value spec for ``{v}``, or ``None`` when the rule has no parameter.
    """

    key: str
    noun: str
    bodies: tuple[str, str]
    value: str | None = None

    @property
    def topic(self) -> str:
        return self.key.rsplit(".", 1)[-1]

    def body(self, split: Split) -> str:
        """The rule phrasing used in ``split``."""
        return self.bodies[0 if split == "train" else 1]


@dataclass(frozen=True)
class FamilySpec:
    """A family of long-horizon tasks.

    Attributes:
        name: registry name ("travel").
        domain: domain tag put on every event.
        active_role: the agent's role for the whole task (``RoleContext.active_role``).
        phases: task phases in order; also the sub-roles.
        goals: the task statement as a (train, eval) pair, with ``{user}``.
        ctx: short context phrases ("for the trip"), split by index.
        docs: documents the agent reads, split by index.
        tools: tool names, shared (tool ids are not surface forms a user writes).
        systems: systems that credentials belong to, shared.
        rules: standing instructions the task may start with.
        slots: fact slots (including derived ones).
        chatter: family-flavoured small talk, split by index.
        multi_user: several users interleave; every slot and rule is per user.
    """

    name: str
    domain: str
    active_role: str
    phases: tuple[str, ...]
    goals: tuple[str, str]
    ctx: tuple[str, ...]
    docs: tuple[str, ...]
    tools: tuple[str, ...]
    systems: tuple[str, ...]
    rules: tuple[RuleSpec, ...]
    slots: tuple[SlotSpec, ...]
    chatter: tuple[str, ...] = ()
    multi_user: bool = False
    _by_key: dict[str, SlotSpec] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_key.update({s.key: s for s in self.slots})
        self.validate()

    def slot(self, key: str) -> SlotSpec:
        """The slot with ``key`` (KeyError lists the family's slots)."""
        try:
            return self._by_key[key]
        except KeyError:
            raise KeyError(f"family {self.name!r} has no slot {key!r}; slots: {sorted(self._by_key)}") from None

    def validate(self) -> None:
        """Check the spec is usable (every problem collected, raised once as ``ValueError``)."""
        problems: list[str] = []
        keys = [s.key for s in self.slots] + [r.key for r in self.rules]
        if len(set(keys)) != len(keys):
            problems.append("slot/rule keys must be unique")
        for s in self.slots:
            if s.phase not in self.phases:
                problems.append(f"slot {s.key}: phase {s.phase!r} not in phases {self.phases}")
            if not s.nouns:
                problems.append(f"slot {s.key}: needs at least one noun")
            for p in s.parents:
                if p not in self._by_key or self._by_key[p].derived:
                    problems.append(f"slot {s.key}: parent {p!r} must be a non-derived slot of the family")
            try:
                validate_spec(s.value)
            except (KeyError, ValueError) as e:
                problems.append(f"slot {s.key}: {e}")
        for r in self.rules:
            if ("{v}" in r.bodies[0] or "{v}" in r.bodies[1]) != (r.value is not None):
                problems.append(f"rule {r.key}: bodies use {{v}} iff value is set")
        for name in ("ctx", "docs", "chatter"):
            try:
                for split in ("train", "eval"):
                    split_items(getattr(self, name), split)  # type: ignore[arg-type]
            except ValueError as e:
                problems.append(f"{name}: {e}")
        if len([s for s in self.slots if not s.derived]) < 4 or len(self.rules) < 2:
            problems.append("a family needs at least 4 non-derived slots and 2 rules")
        if problems:
            raise ValueError(f"family {self.name!r} is invalid: " + "; ".join(problems))
