"""Typed filters for ``Scope.list`` and ``Scope.recall``, compiled to parameterised SQL.

Every value is validated before it reaches SQL (ids must be plain tokens, roles plain labels, enums
real enum values), so a value that "looks like SQL" is refused with a :class:`FilterError` naming the
field — queries are parameterised anyway; this turns a silent empty result into a clear error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Annotated, Any, Literal, Protocol, TypedDict

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from pydantic import ValidationError as PydanticValidationError

from ..errors import FilterError
from ..record.memir import DialogRole, Id, Sensitivity, SourceType, UTCDateTime

__all__ = ["RECALL_SENSITIVITY", "FilterFields", "MemoryFilter", "build_filter", "no_filter", "recall_filter"]

RECALL_SENSITIVITY = Sensitivity.pii
"""What ``Scope.recall`` returns when the caller names no ``sensitivity``: at most ``pii``.

``pii`` memories are already redacted (``[EMAIL]``, ``[CARD]``...): their text exposes nothing, and
what remains ("Bob's email is [EMAIL]") is still useful in a prompt. ``secret`` memories held a
credential (API key, password, bearer token, JWT, private key): the text is redacted too, but the
memory exists *for* the credential, so it stays out of prompts unless the caller asks for it
(``sensitivity="secret"``, or a list of levels). ``list``/``count`` are inventories, not prompt
paths: they return every level unless filtered."""

# Role and tag names in a filter: letters/digits in any script, spaces and ``_ . : @ / + # & -``.
# Quotes, ``;``, ``=``, parentheses… cannot be part of a category name, so a value carrying them is a
# mistake or an injection attempt: refuse it by name rather than silently match nothing.
# (The length bound is max_length, not ``{1,128}`` in the regex, which would cost ~90 ms at import.)
FilterName = Annotated[str, StringConstraints(strip_whitespace=True, max_length=128, pattern=r"^[\w .:@/+#&\-]+$")]


class FilterFields(TypedDict, total=False):
    """The typed filters of ``Scope.list`` / ``count`` / ``recall`` (keyword arguments; all optional).

    roles, sub_roles: the memory's active role / sub-role is one of these.
    dialog_roles: spoken by one of user | agent | system | tool.
    source_types: provenance type is one of these.
    sessions, exclude_sessions: session id in / not in these.
    task_ids: task id is one of these.
    tags: carries at least one of these tags.
    since, until: event time in [since, until).
    min_confidence: confidence at least this.
    sensitivity: at most this level (``"pii"`` = none or pii), or a list of exact levels.
        ``recall`` defaults to :data:`RECALL_SENSITIVITY` (``pii``: secrets excluded);
        ``list``/``count`` default to every level.
    include_expired: also memories past their TTL (default False).
    tier: ``working`` (default), ``archive`` or ``any``.
    """

    roles: str | Sequence[str]
    sub_roles: str | Sequence[str]
    dialog_roles: DialogRole | str | Sequence[DialogRole | str]
    source_types: SourceType | str | Sequence[SourceType | str]
    sessions: str | Sequence[str]
    exclude_sessions: str | Sequence[str]
    task_ids: str | Sequence[str]
    tags: str | Sequence[str]
    since: datetime | str
    until: datetime | str
    min_confidence: float
    sensitivity: Sensitivity | str | Sequence[Sensitivity | str]
    include_expired: bool
    tier: Literal["working", "archive", "any"]


class MemoryFilter(BaseModel):
    """Typed filter over a scope's memories. ``None`` means "no constraint" for every field.

    ``sensitivity`` accepts one level (meaning *at most* that level: ``"pii"`` allows none and pii)
    or a list of exact levels.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    roles: list[FilterName] | None = Field(default=None, description="active_role in this list")
    sub_roles: list[FilterName] | None = Field(default=None, description="sub_role in this list")
    dialog_roles: list[DialogRole] | None = None
    source_types: list[SourceType] | None = None
    sessions: list[Id] | None = Field(default=None, description="session_id in this list")
    exclude_sessions: list[Id] | None = Field(default=None, description="session_id not in this list")
    task_ids: list[Id] | None = None
    tags: list[FilterName] | None = Field(default=None, description="has at least one of these tags")
    since: UTCDateTime | None = Field(default=None, description="event time >= since")
    until: UTCDateTime | None = Field(default=None, description="event time < until")
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    sensitivity: list[Sensitivity] | None = None
    include_expired: bool = Field(default=False, description="also return memories past expires_at")
    tier: str = Field(default="working", pattern=r"^(working|archive|any)$")

    @field_validator("sensitivity", mode="before")
    @classmethod
    def _max_level(cls, v: Any) -> Any:
        if isinstance(v, (str, Sensitivity)):
            return Sensitivity(v).at_most()
        return v

    @field_validator("roles", "sub_roles", "dialog_roles", "source_types", "sessions", "exclude_sessions",
                     "task_ids", "tags", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        if isinstance(v, str):  # a single value is a one-element list, not an iterable of characters
            return [v]
        return v

    def where(self, now: datetime, mark: str = "?") -> tuple[str, list[Any]]:
        """SQL ``WHERE`` fragment (without the scope's tenant clause) and its parameters, with
        ``mark`` as the parameter marker (``?`` for SQLite, ``%s`` for psycopg)."""
        clauses: list[str] = []
        params: list[Any] = []

        def _in(column: str, values: Sequence[Any] | None, negate: bool = False) -> None:
            if values is None:
                return
            if not values:
                clauses.append("1=1" if negate else "0=1")
                return
            marks = ",".join([mark] * len(values))
            op = "NOT IN" if negate else "IN"
            if negate:  # NULL session ids are not "in" any excluded list
                clauses.append(f"({column} IS NULL OR {column} {op} ({marks}))")
            else:
                clauses.append(f"{column} {op} ({marks})")
            params.extend(str(getattr(x, "value", x)) for x in values)

        if self.tier != "any":
            clauses.append(f"m.tier = {mark}")
            params.append(self.tier)
        _in("m.active_role", self.roles)
        _in("m.sub_role", self.sub_roles)
        _in("m.dialog_role", self.dialog_roles)
        _in("m.source_type", self.source_types)
        _in("m.session_id", self.sessions)
        _in("m.session_id", self.exclude_sessions, negate=True)
        _in("m.task_id", self.task_ids)
        _in("m.sensitivity", self.sensitivity)
        if self.tags is not None:
            marks = ",".join([mark] * len(self.tags)) or "NULL"
            # correlated EXISTS: a probe of the (mem_rowid, tag) key per row, instead of materialising
            # every row carrying the tag (10k rowids at 100k memories) to re-check a few candidates
            clauses.append(f"EXISTS (SELECT 1 FROM memory_tags t WHERE t.mem_rowid = m.rowid AND t.tag IN ({marks}))")
            params.extend(self.tags)
        if self.since is not None:
            clauses.append(f"m.event_time >= {mark}")
            params.append(self.since.timestamp())
        if self.until is not None:
            clauses.append(f"m.event_time < {mark}")
            params.append(self.until.timestamp())
        if self.min_confidence is not None:
            clauses.append(f"m.confidence >= {mark}")
            params.append(self.min_confidence)
        if not self.include_expired:
            clauses.append(f"(m.expires_at IS NULL OR m.expires_at > {mark})")
            params.append(now.timestamp())
        return (" AND ".join(clauses) or "1=1"), params


    def mask(self, cache: ColumnView, now: datetime) -> np.ndarray:
        """The same filter as :meth:`where`, evaluated on a scope's cached columns (bool per row;
        a backend's in-memory columns, e.g. the SQLite vector cache, are a :class:`ColumnView`).

        Must agree with :meth:`where` row for row (a property test checks it); recall re-verifies
        its candidates with :meth:`where` anyway, so a disagreement can only lose rows, never leak.
        """
        m = np.ones(cache.n, dtype=bool)

        def _in(column: str, values: Sequence[Any] | None, negate: bool = False) -> None:
            nonlocal m
            if values is None:
                return
            codes = cache.codes(column, [str(getattr(x, "value", x)) for x in values]).tolist()
            col = cache.column(column)
            if codes:  # a few == passes beat np.isin for the short lists filters use
                hit = col == codes[0]  # NULL (code -1) is never "in" a list
                for c in codes[1:]:
                    hit |= col == c
            else:
                hit = np.zeros(cache.n, dtype=bool)
            m &= ~hit if negate else hit

        if self.tier != "any":
            _in("tier", [self.tier])
        _in("active_role", self.roles)
        _in("sub_role", self.sub_roles)
        _in("dialog_role", self.dialog_roles)
        _in("source_type", self.source_types)
        _in("session_id", self.sessions)
        _in("session_id", self.exclude_sessions, negate=True)
        _in("task_id", self.task_ids)
        _in("sensitivity", self.sensitivity)
        if self.tags is not None:
            m &= cache.tag_mask(self.tags)
        if self.since is not None:
            m &= cache.column("event_time") >= self.since.timestamp()
        if self.until is not None:
            m &= cache.column("event_time") < self.until.timestamp()
        if self.min_confidence is not None:
            m &= cache.column("confidence") >= self.min_confidence
        if not self.include_expired:
            exp = cache.column("expires_at")
            m &= np.isnan(exp) | (exp > now.timestamp())
        return m


class ColumnView(Protocol):
    """A scope's rows as columns in memory, for :meth:`MemoryFilter.mask` (any backend's cache)."""

    @property
    def n(self) -> int:
        """The number of rows."""
        ...

    def codes(self, name: str, values: Sequence[str]) -> np.ndarray:
        """The integer codes of ``values`` in a coded column (a value never seen gets a code no row has)."""
        ...

    def column(self, name: str) -> np.ndarray:
        """One column, row-aligned: codes for coded columns, floats (NaN = NULL) for the others."""
        ...

    def tag_mask(self, tags: Sequence[str]) -> np.ndarray:
        """Rows carrying every one of ``tags``."""
        ...


@cache
def no_filter() -> MemoryFilter:
    """The empty filter, built once at first use: building its pydantic validator at import was the
    largest single cost of a cold ``MemoryStore.open``, which never needs it."""
    return MemoryFilter()


@cache
def recall_filter() -> MemoryFilter:
    """The filter of a recall that names none: at most :data:`RECALL_SENSITIVITY`. Built once (a
    filter is immutable), so a default recall does not validate one again."""
    return build_filter(sensitivity=RECALL_SENSITIVITY)


def build_filter(**kwargs: Any) -> MemoryFilter:
    """Build a :class:`MemoryFilter`, turning pydantic errors into a :class:`FilterError` naming the field."""
    try:
        return MemoryFilter(**kwargs)
    except PydanticValidationError as e:
        problems = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "<filter>"
            problems.append((loc, str(err.get("msg"))))
        text = "; ".join(f"{f}: {m}" for f, m in problems)
        valid = ", ".join(MemoryFilter.model_fields)
        raise FilterError(f"invalid filter — {text} (valid filters: {valid})",
                          field=problems[0][0] if problems else None, problems=problems) from e
