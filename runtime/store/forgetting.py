"""Forgetting one memory, completely: every version, its links, its bytes.

1. the arguments checked (a reason is stored, so it is validated and redacted like content);
2. the plan: the correction chain's ids, and what ``cascade`` does to the memories derived from them
   (:mod:`.forget_plan`, decided by the tenant without writing);
3. the corroboration links other memories hold to what is deleted are removed;
4. the tenant deletes and redacts in one transaction, vectors and caches included, and with
   ``scrub`` the WAL (SQLite) is checkpointed and truncated so the old bytes leave it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ValidationError, check_text
from .corroboration import unlink
from .scope_core import ScopeCore

__all__ = ["ForgetReport", "forget"]

REASON_MAX = 100


@dataclass(frozen=True)
class ForgetReport:
    """What :meth:`Scope.forget` did: ids deleted, and ids left as redacted placeholders."""

    deleted: list[str]
    redacted: list[str]


def forget(core: ScopeCore, memory_id: str, *, cascade: Literal["redact", "delete"] = "redact",
           reason: str = "forgotten", scrub: bool = True, include_versions: bool = True) -> ForgetReport:
    """Stops 1–4 (see :meth:`runtime.store.scope.Scope.forget` for the arguments and errors)."""
    if cascade not in ("redact", "delete"):                                                          # 1
        raise ValidationError(f"cascade must be 'redact' or 'delete', got {cascade!r}", field="cascade")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX or "\n" in reason:
        raise ValidationError(f"reason must be one line of 1–{REASON_MAX} characters", field="reason")
    if "\x00" in reason:  # otherwise the redaction step below would blame "content"
        raise ValidationError("reason must not contain NUL characters", field="reason")
    check_text(reason, "reason")
    tenant = core.tenant
    if tenant.tier_of(memory_id) is None:
        raise core.not_found(memory_id)
    ids = tenant.versions(memory_id) if include_versions else [memory_id]                            # 2
    plan = tenant.forget_plan(ids, cascade)
    reason = core.store.builder.draft(reason.strip(), {}).text  # a reason is stored: redact it too
    unlink(tenant, plan.deleted)                                                                     # 3
    tenant.forget(plan, reason=reason, scrub=scrub, wait_s=core.store.config.scrub_wait_s)           # 4
    core.live().working = None
    core.live().dialog = None  # the recent dialog may hold a forgotten memory's vector
    return ForgetReport(deleted=plan.deleted, redacted=plan.redacted)
