"""Declarative retention rules over MemIR fields, loadable from YAML (seed 001 §2.1 "行为可约束").

A rule set compiles, for one list of records, into the hard-rule pieces of a
:class:`runtime.retention.RetentionProblem` (must-keep, must-forget, implications, exclusions,
:class:`~runtime.retention.Quota` groups) plus per-item utility bonuses — every piece carrying the
rule's name, so a decision or an infeasibility error can say which rule did it. A must-forget rule
also says what happens to the item: ``delete`` (expired TTL, used secrets) or ``archive`` (a
superseded version: gone from working memory, kept in the history).

Corrections win: ``excludes: {relation: supersedes, prefer: newer}`` (in the defaults) makes the
superseded side of every pair present in a decision a must-forget-to-archive item, so the newer
version is kept over the original at every capacity — never left to the utilities.

Example YAML::

    must_keep:
      - {name: core instructions, when: {flags: [core_instruction]}}
    must_forget:
      - {name: expired TTL, when: {expired: true}}
      - {name: secrets after use, when: {sensitivity: [secret], flags: [used]}}
    implies:
      - {name: budget needs deadline, if: {tags: [budget]}, then: {tags: [deadline]}, same_tag_prefix: "project:"}
      - {name: summary needs its sources, if: {tags: [summary]}, then: {}, relation: derived_from, direction: sources}
    excludes:
      - {name: superseded versions, relation: supersedes, prefer: newer}
    quotas:
      - {name: few tool results, when: {dialog_roles: [tool]}, max: 5}
    bonuses:
      - {name: urgent, when: {flags: [urgent]}, add: 0.2}
    decays:
      - {name: unreferenced for a day, when: {}, unreferenced_hours: 24, half_life_hours: 24}

A decay rule is seed 001 §2.1's "information unreferenced for 24 hours loses retention priority":
an item it matches whose last reference (its last recall, ``usage.last_accessed_at``, or its write
when never recalled) is more than ``unreferenced_hours`` before the decision keeps
``max(floor, 0.5 ** ((idle - unreferenced_hours) / half_life_hours))`` of its model utility. The
decision shows what it took as a negative bonus under the rule's name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic import ValidationError as PydanticValidationError

from utilitynet.columns import ROLE_IDX, SENS_IDX, SRC_IDX, codes, flag_bits, timestamps, ts

from ..errors import ValidationError
from ..record.memir import DialogRole, Flag, Label, MemIR, Sensitivity, SourceType
from .solver import Quota

__all__ = ["Match", "RuleSet", "RuleView", "CompiledRules", "DEFAULT_RULES", "DecayRule", "ForgetAction", "load_rules"]

ForgetAction = Literal["delete", "archive"]


def compile_rule_regex(pattern: str) -> Any:
    """Compile a rule's ``content_regex`` with RE2, whose matching time is linear in the text, so a
    pattern like ``(a+)+$`` cannot make retention exponential. RE2 has no backreferences or
    lookaround; a pattern that needs them is refused here, at the boundary, with that reason."""
    import re2

    opts = re2.Options()
    opts.log_errors = False
    try:
        return re2.compile(pattern, opts)
    except re2.error as e:
        msg = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise ValueError(f"content_regex {pattern!r} is not accepted by the linear-time engine (RE2): {msg}; "
                         "rules cannot use backreferences or lookaround") from None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Match(_Strict):
    """A predicate over one record; every given field must hold (AND); list fields are any-of,
    except ``flags`` which must all be present."""

    flags: list[Flag] | None = None
    tags: list[Label] | None = None
    tag_prefix: str | None = None
    source_types: list[SourceType] | None = None
    dialog_roles: list[DialogRole] | None = None
    roles: list[Label] | None = None
    sub_roles: list[Label] | None = None
    sensitivity: list[Sensitivity] | None = None
    expired: bool | None = None
    min_confidence: float | None = Field(default=None, ge=0, le=1)
    max_confidence: float | None = Field(default=None, ge=0, le=1)
    attributes: dict[str, Any] | None = None
    content_regex: str | None = None

    _regex: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _regex_compiles(self) -> "Match":
        if self.content_regex is not None:
            self._regex = compile_rule_regex(self.content_regex)
        return self

    def __call__(self, r: MemIR, now: datetime) -> bool:
        """Whether one record matches (the same predicate as :meth:`mask`, on a one-row view)."""
        return bool(self.mask(RuleView.from_records([r]), now)[0])

    def mask(self, v: RuleView, now: datetime) -> np.ndarray:
        """Which rows of a column view match: a bool array, vectorised where the field allows it
        (flags, enums, confidence, expiry); tags, attributes and the regex are tested only on the
        rows every other condition already let through."""
        n = len(v)
        m = np.ones(n, dtype=bool)
        if self.flags is not None:
            need = flag_bits(self.flags)
            m &= (v.flags & need) == need
        if self.source_types is not None:
            m &= np.isin(v.source, [SRC_IDX[s.value] for s in self.source_types])
        if self.dialog_roles is not None:
            m &= np.isin(v.dialog_role, [ROLE_IDX[d.value] for d in self.dialog_roles])
        if self.sensitivity is not None:
            m &= np.isin(v.sensitivity, [SENS_IDX[s.value] for s in self.sensitivity])
        if self.expired is not None:
            exp = np.asarray(v.expires_at, dtype=np.float64)
            expired = ~np.isnan(exp) & (exp <= ts(now))
            m &= expired == self.expired
        if self.min_confidence is not None:
            m &= v.confidence >= self.min_confidence
        if self.max_confidence is not None:
            m &= v.confidence <= self.max_confidence
        tests: list[Callable[[int], bool]] = []
        if self.roles is not None:
            roles = set(self.roles)
            tests.append(lambda i: v.active_role[i] in roles)
        if self.sub_roles is not None:
            subs = set(self.sub_roles)
            tests.append(lambda i: v.sub_role[i] in subs)
        if self.tags is not None:
            want = set(self.tags)
            tests.append(lambda i: not want.isdisjoint(v.tags[i]))
        if self.tag_prefix is not None:
            prefix = self.tag_prefix
            tests.append(lambda i: any(t.startswith(prefix) for t in v.tags[i]))
        if self.attributes is not None:
            need_attrs = self.attributes
            tests.append(lambda i: all(v.attribute(i, k) == x for k, x in need_attrs.items()))
        if self._regex is not None:
            rx = self._regex
            tests.append(lambda i: rx.search(v.content[i]) is not None)
        for test in tests:
            for i in np.flatnonzero(m):
                if not test(int(i)):
                    m[i] = False
        return m


@dataclass(frozen=True)
class RuleView:
    """The fields rules read, held column-wise for one list of items (indices = positions).

    :meth:`from_records` builds it from MemIR records; a batch scorer builds it from its columns
    (``runtime.batch``), so the rules compile one way whatever holds the items.

    Attributes:
        ids, content: per item.
        flags: bit ``i`` = ``utilitynet.columns.FLAGS[i]``.
        source, dialog_role, sensitivity: codes into ``utilitynet.columns``' vocabularies.
        expires_at: POSIX seconds, NaN = no TTL. confidence: float64.
        active_role, sub_role, tags: per item (``sub_role`` may be None).
        attributes: per item ``metadata.attributes`` (a mapping or None), or None = all empty.
        derived_from: per item ``provenance.derived_from`` (ids), or None = none derived.
        referenced_at: per item the POSIX seconds of its last reference (last recall, else its
            write), or None = unknown (decay rules then decay nothing).
    """

    ids: Sequence[str]
    content: Sequence[str]
    flags: np.ndarray
    source: np.ndarray
    dialog_role: np.ndarray
    sensitivity: np.ndarray
    expires_at: np.ndarray
    confidence: np.ndarray
    active_role: Sequence[str]
    sub_role: Sequence[str | None]
    tags: Sequence[Sequence[str]]
    attributes: Sequence[Mapping[str, Any] | None] | None = None
    derived_from: Sequence[Sequence[str]] | None = None
    referenced_at: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def slice(self, start: int, stop: int) -> RuleView:
        """Items ``start:stop``."""
        return RuleView(
            ids=self.ids[start:stop], content=self.content[start:stop], flags=self.flags[start:stop],
            source=self.source[start:stop], dialog_role=self.dialog_role[start:stop],
            sensitivity=self.sensitivity[start:stop], expires_at=self.expires_at[start:stop],
            confidence=self.confidence[start:stop], active_role=self.active_role[start:stop],
            sub_role=self.sub_role[start:stop], tags=self.tags[start:stop],
            attributes=None if self.attributes is None else (self.attributes[start:stop] if any(
                self.attributes[start:stop]) else None),
            derived_from=None if self.derived_from is None else self.derived_from[start:stop],
            referenced_at=None if self.referenced_at is None else self.referenced_at[start:stop])

    def attribute(self, i: int, key: str) -> Any:
        """``metadata.attributes.get(key)`` of item ``i``."""
        a = None if self.attributes is None else self.attributes[i]
        return None if not a else a.get(key)

    @classmethod
    def from_records(cls, records: Sequence[MemIR]) -> RuleView:
        """The view of MemIR records (one pass of attribute reads)."""
        md = [r.metadata for r in records]
        rc = [r.role_context for r in records]
        attrs = [m.attributes or None for m in md]
        derived = [list(r.provenance.derived_from) for r in records]
        return cls(
            ids=[r.id for r in records], content=[r.content for r in records],
            flags=np.array([flag_bits(m.flags) if m.flags else 0 for m in md], dtype=np.int64),
            source=codes(SRC_IDX, [r.provenance.type for r in records]),
            dialog_role=codes(ROLE_IDX, [c.dialog_role for c in rc]),
            sensitivity=codes(SENS_IDX, [m.sensitivity for m in md]),
            expires_at=timestamps([m.expires_at for m in md]),
            confidence=np.array([m.confidence for m in md], dtype=np.float64),
            active_role=[c.active_role for c in rc], sub_role=[c.sub_role for c in rc],
            tags=[m.tags for m in md], attributes=attrs if any(attrs) else None,
            derived_from=derived if any(derived) else None,
            referenced_at=referenced_at(timestamps([r.created_at for r in records]),
                                        timestamps([r.usage.last_accessed_at for r in records])))


def referenced_at(created: np.ndarray, last_accessed: np.ndarray) -> np.ndarray:
    """The last reference of each item in POSIX seconds: its last recall, or its write when it was
    never recalled (NaN ``last_accessed``)."""
    c = np.asarray(created, dtype=np.float64)
    a = np.asarray(last_accessed, dtype=np.float64)
    return np.where(np.isnan(a), c, np.fmax(a, c))


class ItemRule(_Strict):
    """A must-keep or must-forget rule. ``action`` (must-forget only): ``delete`` removes the item,
    ``archive`` moves it out of working memory into the archive tier."""

    name: str
    when: Match
    action: ForgetAction = "delete"


class ImpliesRule(_Strict):
    """keep(a) ⇒ keep(b) for a matching ``if`` and b matching ``then`` that share a tag with
    ``same_tag_prefix`` (e.g. the same ``project:orion``) or the same ``same_attribute`` value.

    ``relation: derived_from`` pairs records through ``provenance.derived_from`` instead (both must be
    in the decision): ``direction: sources`` — keeping a keeps every record it derives from (a
    summary is not kept without its citations); ``direction: derived`` — keeping a keeps every
    record derived from it (a turn is not kept without its summary). At most one grouping. (``memir
    score`` tables carry no parent ids: there the relation adds no pairs.)"""

    name: str
    if_: Match = Field(alias="if")
    then: Match
    same_tag_prefix: str | None = None
    same_attribute: str | None = None
    relation: Literal["derived_from"] | None = None
    direction: Literal["sources", "derived"] | None = None

    @model_validator(mode="after")
    def _one_grouping(self) -> "ImpliesRule":
        given = [k for k in ("same_tag_prefix", "same_attribute", "relation") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of same_tag_prefix, same_attribute or relation, got {given}")
        if (self.relation is None) != (self.direction is None):
            raise ValueError("relation: derived_from needs direction: sources | derived (and direction needs it)")
        return self


class ExcludesRule(_Strict):
    """Not both: ``relation: supersedes`` pairs a record whose ``attributes.supersedes`` is another's id
    with that record; ``same_attribute: K`` excludes every pair sharing attribute K (at most one kept).

    ``prefer: newer`` (supersedes only) decides the pair instead of the utilities: the superseded
    record is archived whenever its successor is present."""

    name: str
    relation: Literal["supersedes"] | None = None
    same_attribute: str | None = None
    prefer: Literal["utility", "newer"] = "utility"

    @model_validator(mode="after")
    def _one_kind(self) -> "ExcludesRule":
        if (self.relation is None) == (self.same_attribute is None):
            raise ValueError("give exactly one of relation or same_attribute")
        if self.prefer == "newer" and self.relation != "supersedes":
            raise ValueError("prefer: newer needs relation: supersedes (which record is newer is that relation)")
        return self


class QuotaRule(_Strict):
    name: str
    when: Match
    min: int = Field(default=0, ge=0)
    max: int | None = Field(default=None, ge=0)


class BonusRule(_Strict):
    name: str
    when: Match
    add: float = 0.0


class DecayRule(_Strict):
    """Retention priority decays for items nobody referenced for ``unreferenced_hours`` (see the
    module docstring): beyond it the model utility is multiplied by
    ``max(floor, 0.5 ** ((idle - unreferenced_hours) / half_life_hours))``; ``half_life_hours``
    defaults to ``unreferenced_hours``. Several matching decay rules multiply."""

    name: str
    when: Match = Field(default_factory=Match)
    unreferenced_hours: float = Field(gt=0)
    half_life_hours: float | None = Field(default=None, gt=0)
    floor: float = Field(default=0.0, ge=0, le=1)

    def factors(self, v: RuleView, now: datetime) -> np.ndarray:
        """The multiplier per item (1 where the rule does not apply)."""
        out = np.ones(len(v), dtype=np.float64)
        if v.referenced_at is None or not len(v):
            return out
        idle_h = (ts(now) - np.asarray(v.referenced_at, dtype=np.float64)) / 3600.0
        over = self.when.mask(v, now) & np.isfinite(idle_h) & (idle_h > self.unreferenced_hours)
        h = self.half_life_hours or self.unreferenced_hours
        out[over] = np.maximum(self.floor, 0.5 ** ((idle_h[over] - self.unreferenced_hours) / h))
        return out


class RuleSet(_Strict):
    """Every rule kind, each a list of named rules."""

    must_keep: list[ItemRule] = Field(default_factory=list)
    must_forget: list[ItemRule] = Field(default_factory=list)
    implies: list[ImpliesRule] = Field(default_factory=list)
    excludes: list[ExcludesRule] = Field(default_factory=list)
    quotas: list[QuotaRule] = Field(default_factory=list)
    bonuses: list[BonusRule] = Field(default_factory=list)
    decays: list[DecayRule] = Field(default_factory=list)

    def compile(self, records: Sequence[MemIR] | RuleView, now: datetime) -> "CompiledRules":
        """Evaluate the rules on ``records`` (MemIR records or a :class:`RuleView`; indices refer to
        positions in it)."""
        v = records if isinstance(records, RuleView) else RuleView.from_records(records)
        n = len(v)
        # built here from values of the declared types: validating n-long lists per decision cost as
        # much as evaluating the rules (0.45 ms per 200 memories). Every field is given: a field left to
        # its default_factory makes pydantic inspect the factory's signature on each construction.
        c = CompiledRules.model_construct(must_keep={}, must_forget={}, forget_action={}, implies=[], excludes=[],
                                          quotas=[], bonus=[0.0] * n, bonus_reasons=[[] for _ in range(n)],
                                          decay=np.ones(n, dtype=np.float64), decay_reasons=[[] for _ in range(n)])
        for rule in self.must_forget:  # forget first: on overlap a must-forget wins the name slot
            for i in np.flatnonzero(rule.when.mask(v, now)).tolist():
                if i not in c.must_forget:
                    c.must_forget[i] = rule.name
                    c.forget_action[i] = rule.action
        for rule in self.must_keep:
            for i in np.flatnonzero(rule.when.mask(v, now)).tolist():
                c.must_keep.setdefault(i, rule.name)
        for ir in self.implies:
            a_idx = np.flatnonzero(ir.if_.mask(v, now)).tolist()
            b_idx = np.flatnonzero(ir.then.mask(v, now)).tolist()
            if ir.relation == "derived_from":
                c.implies += _derived_pairs(v, a_idx, b_idx, ir.direction == "sources", ir.name)
                continue
            key = _grouper(v, ir.same_tag_prefix, ir.same_attribute)
            for a in a_idx:
                ka = key(a)
                for b in b_idx:
                    if a != b and (ka & key(b)):
                        c.implies.append((a, b, f"{ir.name} ({v.ids[a]}⇒{v.ids[b]})"))
        for er in self.excludes:
            if v.attributes is None:
                continue  # both kinds pair items through their attributes
            if er.relation == "supersedes":
                pos: dict[str, int] | None = None
                for i in range(n):
                    old = v.attribute(i, "supersedes")
                    if not isinstance(old, str):
                        continue
                    if pos is None:
                        pos = {x: k for k, x in enumerate(v.ids)}
                    if not (old in pos and pos[old] != i):
                        continue
                    j, name = pos[old], f"{er.name} ({v.ids[i]} supersedes {old})"
                    if er.prefer == "newer":
                        if j not in c.must_forget:
                            c.must_forget[j] = name
                            c.forget_action[j] = "archive"
                    else:
                        c.excludes.append((i, j, name))
            else:
                groups: dict[Any, list[int]] = defaultdict(list)
                for i in range(n):
                    val = v.attribute(i, str(er.same_attribute))
                    if val is not None:
                        groups[val].append(i)
                for val, members in groups.items():
                    for x in range(len(members)):
                        for y in range(x + 1, len(members)):
                            c.excludes.append((members[x], members[y], f"{er.name} ({er.same_attribute}={val})"))
        for q in self.quotas:
            members = np.flatnonzero(q.when.mask(v, now)).tolist()
            if members:
                c.quotas.append(Quota(members=members, min=q.min, max=q.max, name=q.name))
        for bonus in self.bonuses:
            for i in np.flatnonzero(bonus.when.mask(v, now)).tolist():
                c.bonus[i] += bonus.add
                c.bonus_reasons[i].append((bonus.name, bonus.add))
        for dr in self.decays:
            f = dr.factors(v, now)
            for i in np.flatnonzero(f < 1.0).tolist():
                c.decay[i] *= f[i]
                c.decay_reasons[i].append((dr.name, float(f[i])))
        return c


def _derived_pairs(v: RuleView, a_idx: list[int], b_idx: list[int], to_sources: bool,
                   name: str) -> list[tuple[int, int, str]]:
    """``(a, b)`` implications along ``derived_from``: b is one of a's sources (``to_sources``), or
    a is one of b's sources."""
    if v.derived_from is None:
        return []
    pos = {x: k for k, x in enumerate(v.ids)}
    bs = set(b_idx)
    out: list[tuple[int, int, str]] = []
    as_ = set(a_idx)
    for d in (a_idx if to_sources else b_idx):  # d derives from each of its sources s
        for src in v.derived_from[d]:
            s = pos.get(src)
            if s is None or s == d:
                continue
            a, b = (d, s) if to_sources else (s, d)
            if a in as_ and b in bs:
                out.append((a, b, f"{name} ({v.ids[a]}⇒{v.ids[b]})"))
    return out


def _grouper(v: RuleView, prefix: str | None, attr: str | None) -> Any:
    def key(i: int) -> set[Any]:
        if prefix is not None:
            return {t for t in v.tags[i] if t.startswith(prefix)}
        if attr is not None:
            x = v.attribute(i, attr)
            return set() if x is None else {x}
        return {"*"}  # no grouping: every a implies every b
    return key


class CompiledRules(BaseModel):
    """Rule pieces for one record list (indices into it), with names.

    Attributes:
        must_keep, must_forget: item index -> rule name.
        forget_action: item index -> ``delete`` | ``archive`` for every must-forget item.
        implies, excludes: ``(a, b, name)`` pairs.
        quotas: :class:`~runtime.retention.Quota` groups.
        bonus: utility added per item; bonus_reasons: ``(rule name, amount)`` per item.
        decay: the factor each item's model utility is multiplied by (decay rules; 1 = none);
            decay_reasons: ``(rule name, factor)`` per item.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    must_keep: dict[int, str] = Field(default_factory=dict)
    must_forget: dict[int, str] = Field(default_factory=dict)
    forget_action: dict[int, ForgetAction] = Field(default_factory=dict)
    implies: list[tuple[int, int, str]] = Field(default_factory=list)
    excludes: list[tuple[int, int, str]] = Field(default_factory=list)
    quotas: list[Quota] = Field(default_factory=list)
    bonus: list[float] = Field(default_factory=list)
    bonus_reasons: list[list[tuple[str, float]]] = Field(default_factory=list)
    decay: np.ndarray = Field(default_factory=lambda: np.ones(0, dtype=np.float64))
    decay_reasons: list[list[tuple[str, float]]] = Field(default_factory=list)

    def utility(self, model_utility: np.ndarray) -> np.ndarray:
        """What the solver maximises: the model utility, decayed, plus the bonuses."""
        u = np.asarray(model_utility, dtype=np.float64)
        d = self.decay if len(self.decay) == len(u) else 1.0
        return u * d + np.asarray(self.bonus, dtype=np.float64)

    def adjustments(self, i: int, model_utility: float) -> list[tuple[str, float]]:
        """``(rule, amount added)`` for item ``i``: each decay rule's share (negative), then the bonuses."""
        out, u = [], float(model_utility)
        for name, f in (self.decay_reasons[i] if i < len(self.decay_reasons) else ()):
            out.append((name, u * (f - 1.0)))
            u *= f
        return out + list(self.bonus_reasons[i])


DEFAULT_RULES = RuleSet(
    must_keep=[ItemRule(name="core instruction", when=Match(flags=[Flag.core_instruction])),
               ItemRule(name="user-confirmed", when=Match(flags=[Flag.user_confirmed])),
               ItemRule(name="pinned", when=Match(flags=[Flag.pinned]))],
    must_forget=[ItemRule(name="expired TTL", when=Match(expired=True)),
                 ItemRule(name="secret after use", when=Match(sensitivity=[Sensitivity.secret], flags=[Flag.used]))],
    excludes=[ExcludesRule(name="superseded version", relation="supersedes", prefer="newer")],
)
"""Core instructions, user-confirmed and pinned memories are kept; expired TTLs and used secrets are
deleted; a superseded version is archived whenever its correction is present."""


def load_rules(source: str | Path | dict[str, Any]) -> RuleSet:
    """Load a :class:`RuleSet` from a YAML file path, YAML text or a dict.

    Raises:
        ValidationError: naming the rule and field that is wrong (e.g. ``must_keep.0.when.flags.0``).
    """
    import yaml

    if isinstance(source, dict):
        data = source
    else:
        text = _rules_text(source)
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ValidationError(f"rules are not valid YAML: {e}", field="rules") from e
    if not isinstance(data, dict):
        raise ValidationError("rules must be a mapping of rule kinds (must_keep, must_forget, ...)", field="rules")
    try:
        return RuleSet.model_validate(data)
    except PydanticValidationError as e:
        raise ValidationError.from_pydantic(e, what="rules") from e


def _is_file(p: Path) -> bool:
    """``p.is_file()``, False for what cannot be a path at all (too long a name, a NUL byte)."""
    try:
        return p.is_file()
    except (OSError, ValueError):
        return False


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except (OSError, ValueError):
        return False


def _rules_text(source: str | Path) -> str:
    """A path is read (and must exist and be a file); a string with a newline or a ``:`` is YAML
    text; anything else is taken as a path the caller misspelt, and refused by name."""
    if isinstance(source, Path) or ("\n" not in str(source) and ":" not in str(source)):
        p = Path(source)
        if not _is_file(p):
            what = "is a directory" if _is_dir(p) else "does not exist"
            raise ValidationError(f"rules file {str(p)[:80]!r} {what}: pass the path of a YAML rules file "
                                  "(or YAML text)", field="rules")
        try:
            return p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ValidationError(f"cannot read rules file {str(p)!r}: {e}", field="rules") from e
    if _is_file(Path(str(source))):  # a path that contains ':' (Windows drive letters, odd names)
        return Path(str(source)).read_text(encoding="utf-8")
    return str(source)
