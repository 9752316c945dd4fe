"""Freshness by default (seed 000 §2.1, §3.3; seed 001 §2.1): how fast a memory's recall weight decays
when the memory declares no half-life of its own.

A record may declare ``metadata.freshness_half_life`` (``write(..., freshness_half_life=...)``); that
always wins. A record that declares none decays by the store's :class:`FreshnessConfig`: a
half-life per source type and dialog role, looked up at recall time (so changing the configuration
changes how every stored memory ranks, with nothing rewritten). ``None`` means "never decays",
both as a configured value and as ``StoreConfig(freshness=None)`` (no default decay at all);
:data:`NEVER` declared on one record exempts it whatever the defaults say.

The defaults, and why:

====================================  ==========  =====================================================
kind                                  half-life   why
====================================  ==========  =====================================================
``direct_interaction``                never       what people said stays what they said: a change is a
                                                  correction (``Scope.update``), not an age
``external_ingest``                   90 days     documents and policies are revised
``derived_inference``                 30 days     the agent's guesses should be re-derived, not aged
``system_feedback``                   7 days      the environment's state moves on
any source, dialog role ``tool``      7 days      tool output describes the world at one moment
====================================  ==========  =====================================================

So a 60-day-old policy document "rotate keys every 90 days" (freshness 0.63) no longer outranks
today's "rotate keys every 30 days" for the same query. Conversation does not decay by default: on
LoCoMo dev (conversations over months, questions about any of them) a 180-day half-life for what
users say lowered evidence retrieval@k from 0.228 to 0.196 (p = 0.10) with retention unchanged. Keys of :attr:`FreshnessConfig.half_lives`: a source type
(``"external_ingest"``), a source type and a dialog role (``"external_ingest/tool"``), or any
source with a dialog role (``"*/tool"``); the most specific key wins.

This is a recall weight. Retention priority has its own declarative rule,
``decays: [{name, when, unreferenced_hours, half_life_hours}]`` (:mod:`runtime.retention.rules`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from ..errors import ValidationError
from ..record.memir import DialogRole, SourceType

__all__ = ["DEFAULT_HALF_LIVES", "NEVER", "FreshnessConfig", "never_decays"]

NEVER = timedelta.max
"""Declare ``freshness_half_life=NEVER`` on a write to exempt that memory from default decay."""

_NEVER_S = NEVER.total_seconds()

DEFAULT_HALF_LIVES: Mapping[str, timedelta | None] = MappingProxyType({
    SourceType.direct_interaction.value: None,
    SourceType.external_ingest.value: timedelta(days=90),
    SourceType.derived_inference.value: timedelta(days=30),
    SourceType.system_feedback.value: timedelta(days=7),
    f"*/{DialogRole.tool.value}": timedelta(days=7),
})


def never_decays(half_life_s: float | None) -> bool:
    """Whether a half-life in seconds means "does not decay" (``None`` or :data:`NEVER`)."""
    return half_life_s is None or half_life_s >= _NEVER_S


def _seconds(v: Any) -> float | None:
    return None if v is None else float(v.total_seconds())


@dataclass(frozen=True)
class FreshnessConfig:
    """Default freshness half-lives by source type and dialog role (see the module docstring).

    Attributes:
        half_lives: key → half-life (``timedelta``) or ``None`` (never decays). Merged over
            :data:`DEFAULT_HALF_LIVES` unless ``inherit`` is False: ``{"external_ingest": None}``
            stops documents decaying and keeps every other default.
        inherit: start from :data:`DEFAULT_HALF_LIVES` (default) or from nothing.
    """

    half_lives: Mapping[str, timedelta | None] = field(default_factory=lambda: DEFAULT_HALF_LIVES)
    inherit: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.half_lives, Mapping):
            raise ValidationError("FreshnessConfig.half_lives must be a mapping of kind -> timedelta or None",
                                  field="half_lives")
        sources = {s.value for s in SourceType} | {"*"}
        roles = {d.value for d in DialogRole}
        problems: list[tuple[str, str]] = []
        merged: dict[str, timedelta | None] = dict(DEFAULT_HALF_LIVES) if self.inherit else {}
        for k, v in self.half_lives.items():
            src, _, role = str(k).partition("/")
            if src not in sources or (role and role not in roles) or (src == "*" and not role):
                problems.append((f"half_lives[{k!r}]", f"unknown kind: use a source type {sorted(sources - {'*'})}, "
                                 f"'<source>/<dialog role>' or '*/<dialog role>' with a role of {sorted(roles)}"))
            elif v is not None and (not isinstance(v, timedelta) or v <= timedelta(0)):
                problems.append((f"half_lives[{k!r}]", f"must be a positive timedelta or None (never decays), got {v!r}"))
            else:
                merged[str(k)] = v
        if problems:
            raise ValidationError.from_problems("FreshnessConfig", problems)
        object.__setattr__(self, "half_lives", MappingProxyType(merged))
        table = {}
        for s in SourceType:
            for d in DialogRole:
                for key in (f"{s.value}/{d.value}", f"*/{d.value}", s.value):
                    if key in merged:
                        table[(s.value, d.value)] = _seconds(merged[key])
                        break
                else:
                    table[(s.value, d.value)] = None
        object.__setattr__(self, "_table", MappingProxyType(table))

    def seconds(self, source_type: str, dialog_role: str) -> float | None:
        """The default half-life in seconds of a memory of this source type and dialog role
        (``None``: it does not decay)."""
        return self._table.get((source_type, dialog_role))  # type: ignore[attr-defined,no-any-return]

    def half_life(self, source_type: str, dialog_role: str) -> timedelta | None:
        """:meth:`seconds` as a ``timedelta``."""
        s = self.seconds(source_type, dialog_role)
        return None if s is None else timedelta(seconds=s)
