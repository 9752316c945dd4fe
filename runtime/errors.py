"""The typed error hierarchy of memir's runtime.

Every error says what went wrong *and what to do*. Callers catch :class:`MemirError` for
"anything memir raised"; the subclasses let them be precise. Nothing here shadows a builtin
(contrast mem0's ``MemoryError``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MemirError",
    "ValidationError",
    "ContentTooLargeError",
    "VectorError",
    "FilterError",
    "NotFoundError",
    "EncoderUnavailableError",
    "EncoderMismatchError",
    "EncoderExportError",
    "SchemaMismatchError",
    "DataIntegrityError",
    "ModelNotFoundError",
    "InfeasibleError",
    "SolverError",
    "MissingDependencyError",
    "WorkerError",
    "check_text",
]


class MemirError(Exception):
    """Base class of every error memir raises on purpose."""


class ValidationError(MemirError, ValueError):
    """A record or argument failed validation at the boundary.

    Attributes:
        field: dotted path of the offending field (``"provenance.user_id"``), or ``None``.
        problems: every problem found, as ``(field, message)`` pairs (collected, then raised once).
    """

    def __init__(self, message: str, *, field: str | None = None,
                 problems: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.problems = problems or ([(field, message)] if field else [])

    @classmethod
    def from_pydantic(cls, exc: Any, *, what: str = "record") -> "ValidationError":
        """Turn a ``pydantic.ValidationError`` into ours, naming every failing field."""
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
            problems.append((loc, str(err.get("msg", "invalid"))))
        lines = "; ".join(f"{loc}: {msg}" for loc, msg in problems)
        first = problems[0][0] if problems else None
        return cls(f"invalid {what} — {lines}", field=first, problems=problems)

    @classmethod
    def from_problems(cls, what: str, problems: list[tuple[str, str]]) -> "ValidationError":
        """One error for every ``(field, message)`` problem collected while checking ``what``."""
        text = "; ".join(f"{f}: {m}" for f, m in problems)
        return cls(f"invalid {what} — {text}", field=problems[0][0] if problems else None, problems=problems)


def check_text(value: str, field: str, *, where: str = "") -> str:
    """``value`` if it can be stored and embedded as UTF-8, else a :class:`ValidationError` naming
    ``field`` and the position of the first character that cannot (a lone surrogate such as
    ``"\\ud800"``, which JSON decoders and ``surrogateescape`` produce from broken input)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValidationError(f"{where}{field} holds a character that is not valid Unicode text "
                              f"({value[e.start]!r} at position {e.start}, a lone surrogate): decode the "
                              "input as UTF-8 with errors='replace', or drop the character", field=field) from None
    return value


class ContentTooLargeError(ValidationError):
    """``content`` is longer than the store's configured limit (``StoreConfig.max_content_chars``)."""


class VectorError(ValidationError):
    """An embedding is malformed: wrong dimension, NaN/inf, or made by another encoder."""


class FilterError(ValidationError):
    """A filter value is not allowed (unknown field, wrong type, or a value that is not a plain id)."""


class NotFoundError(MemirError, KeyError):
    """No memory with that id exists *in this scope* (another user's id is indistinguishable)."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "not found"


class EncoderUnavailableError(MemirError):
    """No sentence encoder could be loaded. The message lists the install command that fixes it."""


class EncoderIntegrityError(EncoderUnavailableError):
    """An encoder file does not match the hash its card records (edited, truncated or swapped)."""


class EncoderMismatchError(MemirError):
    """Vectors in the store were made by a different encoder than the one in use (run ``memir reembed``)."""


class EncoderExportError(MemirError):
    """Exporting the sentence encoder to ONNX failed a check (ONNX validity or parity with torch)."""


class SchemaMismatchError(MemirError):
    """A utility model was fit on another feature-schema version than this runtime computes."""


class DataIntegrityError(MemirError):
    """A stored dataset does not match its manifest (hash, feature spec): regenerate that round."""


class ModelNotFoundError(MemirError, FileNotFoundError):
    """The utility model file does not exist (reinstall the package, or set ``MEMIR_MODEL``)."""


class DeletionPendingError(MemirError):
    """Deleted rows are gone from every read, but their old bytes are still in the WAL or the
    main file because another connection held a read transaction past the wait; nothing reported
    the deletion complete. Retry ``store.scrub()`` once that reader has finished (the store also
    retries by itself after later writes and on close)."""


class StorageError(MemirError):
    """The storage backend failed in a way the caller cannot fix by changing the call: the
    PostgreSQL server went away, or a transaction kept losing to concurrent ones after retries.
    The message carries the server's reason; nothing of the failed call was written."""


class WorkerError(MemirError):
    """A worker process of a batch job died (killed, out of memory, or started from a script
    without an ``if __name__ == "__main__":`` guard)."""


class InfeasibleError(MemirError):
    """The hard retention rules cannot all hold at once.

    Attributes:
        conflicts: human-readable names of the rules in conflict.
    """

    def __init__(self, message: str, *, conflicts: list[str] | None = None) -> None:
        super().__init__(message)
        self.conflicts = conflicts or []


class SolverError(MemirError):
    """A solver failed in a way that is not infeasibility (status, time limit with no incumbent...)."""


class MissingDependencyError(MemirError, ImportError):
    """An optional dependency is not installed; the message names the exact ``pip install``."""
