"""Outcome events of an SQL scope (``Scope.feedback``): appended with the scope's ids, read back
only through the tenant clause. The cross-user aggregate ``memir ab report`` reads is an admin path
of each backend (``outcome_counts``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...experiments.events import Feedback
    from .tenant import SqlTenant

__all__ = ["events", "record"]

_COLS = "at, kind, value, memory_id, task_id, session_id, arms"


def record(tenant: SqlTenant, fb: Feedback) -> None:
    """Append ``fb`` (already validated, its ids this scope's) to the scope's outcome log."""
    ph = tenant.dialect.ph
    with tenant.writing() as conn:
        conn.execute(f"INSERT INTO feedback(user_id, agent_id, {_COLS}) VALUES ({','.join([ph] * 9)})",
                     (tenant.user_id, tenant.agent_id, fb.at_ts, fb.kind, fb.value, fb.memory_id, fb.task_id,
                      fb.session_id, json.dumps(fb.arms, sort_keys=True)))


def events(tenant: SqlTenant, limit: int) -> list[Feedback]:
    """The scope's latest outcome events, newest first."""
    from ...experiments.events import Feedback

    t, tp = tenant.clause("f")
    with tenant.reading() as conn:
        rows = conn.execute(f"SELECT {_COLS} FROM feedback f WHERE {t} ORDER BY f.id DESC LIMIT {tenant.dialect.ph}",
                            tp + [int(limit)]).fetchall()
    return [Feedback(user_id=tenant.user_id, agent_id=tenant.agent_id, at=datetime.fromtimestamp(float(at), tz=UTC), kind=kind, value=value,
                     memory_id=mid, task_id=task, session_id=sess, arms=json.loads(arms))
            for at, kind, value, mid, task, sess, arms in rows]
