"""Options of ``memir score`` (every engine), and the texts every engine reports the same way."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from ..errors import ValidationError
from ..retention.policy import RetentionPolicy
from ..retention.solver import Method, OnInfeasible

__all__ = ["ENGINES", "FILE_SHIFT", "ScoreConfig", "duplicate_reason", "duplicate_text", "error_text", "make_embedder", "scope_failure_text"]

ENGINES = ("local", "rows", "ray")
"""``local``: columnar and streaming, in this process plus reader and decider processes (the default);
``rows``: the record-at-a-time reference path; ``ray``: Ray Data tasks on a local or remote cluster."""


@dataclass(frozen=True)
class ScoreConfig:
    """Options of ``memir score``.

    Attributes:
        capacity: per (user, agent) scope, keep at most this many; ``None`` = keep every record
            whose utility is positive and that no rule forces out.
        budget_tokens: per scope, keep at most this many tokens (≈ 4 characters each).
        rules: YAML rules path (default: ``runtime.retention.DEFAULT_RULES``).
        model: utility model ONNX (default: the shipped model).
        batch_size: records per read batch (``rows``) and texts per encoder call.
        quarantine: where rejected records go (default ``OUT.quarantine.jsonl``).
        redundancy: ``"batch"`` computes redundancy features within each scope (as ``Scope.retain``
            does); ``"none"`` skips them for very large scopes.
        method: retention solver method.
        on_infeasible: ``overflow`` (default: one bad scope does not stop a dump) or ``raise``.
        recent_window: writes averaged into each scope's recent-context vector.
        now: decision time (default: now, UTC).
        encoder: ``"default"`` (ONNX MiniLM) or ``"hash"`` (test double) for records without vectors.
        workers: ``local``: processes that read and decide (1 = everything in this process; 0 =
            automatic: JSONL over 64 MB is read by one process per CPU, and from 100k records
            scopes are decided by one per CPU); ``ray``: reader tasks in flight.
        memory_mb: rows held in memory before the ``local`` engine spills them to disk by scope
            (0 = spill from the first row).
        spill_dir: where spill files go (default: the system temporary directory).
        chunk_mb: size of a JSONL read chunk.
    """

    capacity: int | None = None
    budget_tokens: int | None = None
    rules: str | None = None
    model: str | None = None
    batch_size: int = 8192
    quarantine: str | None = None
    redundancy: str = "batch"
    method: Method = "auto"
    on_infeasible: OnInfeasible = "overflow"
    recent_window: int = 5
    now: datetime | None = None
    encoder: str = "default"
    workers: int = 0
    memory_mb: int = 256
    spill_dir: str | None = None
    chunk_mb: int = 16

    def __post_init__(self) -> None:
        p: list[tuple[str, str]] = []
        if self.capacity is not None and self.capacity < 0:
            p.append(("capacity", "must be >= 0"))
        if self.batch_size < 1:
            p.append(("batch_size", "must be >= 1"))
        if self.redundancy not in ("batch", "none"):
            p.append(("redundancy", "must be 'batch' or 'none'"))
        if self.encoder not in ("default", "hash"):
            p.append(("encoder", "must be 'default' or 'hash'"))
        if self.workers < 0:
            p.append(("workers", "must be >= 0 (0 = automatic)"))
        if self.memory_mb < 0:
            p.append(("memory_mb", "must be >= 0 (0 = spill every row to disk)"))
        if self.chunk_mb < 1:
            p.append(("chunk_mb", "must be >= 1"))
        if self.spill_dir is not None and not os.path.isdir(self.spill_dir):
            p.append(("spill_dir", f"{self.spill_dir!r} is not a directory"))
        if p:
            raise ValidationError.from_problems("ScoreConfig", p)

    def policy(self, scorer: Any) -> RetentionPolicy:
        """The retention policy every scope of the dump is decided under."""
        return RetentionPolicy(capacity=self.capacity, budget_tokens=self.budget_tokens, rules=self.rules,
                               scorer=scorer, method=self.method, on_infeasible=self.on_infeasible,
                               recent_window=self.recent_window)


FILE_SHIFT = 40
"""Dump-order keys are ``file index << FILE_SHIFT | line``: one order across several dumps."""


def duplicate_reason(memory_id: str, first_key: int, file_index: int, paths: Sequence[Any]) -> str:
    """:func:`duplicate_text` from the dump-order key of the first copy, naming its dump when it is
    not ``paths[file_index]``."""
    f, line = first_key >> FILE_SHIFT, first_key & ((1 << FILE_SHIFT) - 1)
    return duplicate_text(memory_id, line, str(paths[f]) if f != file_index else None)


def error_text(e: Exception) -> str:
    """A rejection reason: pydantic's errors as ``field.path: message`` joined by ``; ``."""
    if isinstance(e, PydanticValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
    return str(e)


def duplicate_text(memory_id: str, first_line: int, first_file: str | None = None) -> str:
    """The quarantine reason of a repeated id (``first_file``: the dump of the first copy, when
    it is not the same dump)."""
    where = f"line {first_line}" + (f" of {first_file}" if first_file else "")
    return f"duplicate id {memory_id!r} (first seen at {where}); scored once"


def scope_failure_text(user_id: str, agent_id: str, e: Exception) -> str:
    """The quarantine reason of a record whose scope could not be decided (contradictory rules)."""
    return f"scope {user_id}/{agent_id} cannot be decided: {e}"


def make_embedder(kind: str) -> Any:
    """The encoder for records without a vector: ``hash`` (test double) or the default ONNX MiniLM."""
    if kind == "hash":
        from ..encoders.embedder import HashEmbedder
        return HashEmbedder()
    from ..encoders.onnx import load_default_embedder
    return load_default_embedder()
