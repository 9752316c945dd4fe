"""Forgetting, independent of the backend: the plan, and the placeholder a redacted memory becomes.

Seed 001 pitfall 4: forgetting a memory others were derived from must not leave a dangling chain,
so with ``cascade="redact"`` it becomes ``[forgotten memory: <reason>]`` with its provenance kept,
its content, tags, attributes and vector gone. With ``cascade="delete"`` it and everything derived
from it are deleted. Each backend decides the plan with :func:`decide` from two queries of its own
(descendants, and which ids something still derives from) and applies it in one transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..record.memir import Flag, MemIR, Sensitivity

__all__ = ["Cascade", "ForgetPlan", "decide", "placeholder", "placeholder_text"]

Cascade = Literal["redact", "delete"]


@dataclass(frozen=True)
class ForgetPlan:
    """What forgetting will do: ids deleted and ids turned into redacted placeholders."""

    deleted: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)


def decide(ids: Sequence[str], descendants: Sequence[str], still_cited: Collection[str], cascade: Cascade) -> ForgetPlan:
    """The plan for forgetting ``ids`` (deduplicated, in order).

    Args:
        descendants: every memory derived (transitively) from ``ids``, excluding them.
        still_cited: those of ``ids`` that a memory outside ``ids`` derives from.
    """
    ids = list(dict.fromkeys(ids))
    if cascade == "delete":
        return ForgetPlan(deleted=ids + list(descendants))
    if not descendants:
        return ForgetPlan(deleted=ids)
    return ForgetPlan(deleted=[i for i in ids if i not in still_cited], redacted=[i for i in ids if i in still_cited])


def placeholder_text(reason: str) -> str:
    """The content a redacted placeholder keeps."""
    return f"[forgotten memory: {reason}]"


def placeholder(rec: MemIR, reason: str) -> MemIR:
    """``rec`` as a redacted placeholder: provenance and role kept; content, tags, attributes,
    sensitivity and expiry gone; flagged ``placeholder``."""
    flags = sorted(set(rec.metadata.flags) | {Flag.placeholder}, key=lambda f: f.value)
    return rec.model_copy(update={
        "content": placeholder_text(reason),
        "metadata": rec.metadata.model_copy(update={"flags": flags, "sensitivity": Sensitivity.none,
                                                    "tags": [], "attributes": {}, "expires_at": None})})
