"""The role the agent acts in (seed 000 §3.1, §4.4): set on the scope's live context for a block;
the write pipeline (:mod:`.prepare`) and recall (:mod:`.recalling`) read it from there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..record.memir import RoleContext
from .live import ActingAs
from .scope_core import ScopeCore

__all__ = ["acting_as"]


@contextmanager
def acting_as(core: ScopeCore, acting: ActingAs) -> Iterator[None]:
    """See :meth:`runtime.store.scope.Scope.acting_as`: validated, set for the block, then restored."""
    try:
        RoleContext(active_role=acting.active_role, sub_role=acting.sub_role, tone=acting.required_tone,
                    task_id=acting.task_id)
    except PydanticValidationError as e:
        raise ValidationError.from_pydantic(e, what="acting_as") from None
    live = core.live()
    with live.lock:
        before, live.acting = live.acting, acting
    try:
        yield
    finally:
        with live.lock:
            live.acting = before
