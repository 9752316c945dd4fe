"""memir runtime — what production agents import.

Typed memory records (MemIR), a scoped SQLite store with provenance-aware retrieval, retention as a
constrained optimisation, and the ONNX utility scorer. Importing it costs numpy, pydantic and
onnxruntime — never torch, lightning or datasets (a test checks).

Example:
    >>> from runtime import MemoryStore, format_context
    >>> store = MemoryStore.open("agent.sqlite")                     # doctest: +SKIP
    >>> me = store.scope(user_id="u42")                               # doctest: +SKIP
    >>> me.write("Prefers aisle seats", sub_role="travel", confidence=0.95)  # doctest: +SKIP
    >>> print(format_context(me.recall("seat preference", k=3)))      # doctest: +SKIP
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Public names resolve lazily (PEP 562): `import runtime` costs almost nothing, and each name pulls
# in only its own module on first use — an agent that only needs the scorer never builds the
# store's pydantic models. Static type checkers see the real imports below.
_EXPORTS = {
    "MemoryStore": ".store", "StoreConfig": ".store", "Scope": ".scope",
    "MemIR": ".memir", "Provenance": ".memir", "RoleContext": ".memir", "Metadata": ".memir",
    "Usage": ".memir", "SourceType": ".memir", "DialogRole": ".memir", "Sensitivity": ".memir",
    "Flag": ".memir", "Hit": ".retrieval", "ScoreBreakdown": ".retrieval", "format_context": ".retrieval",
    "MemirError": ".errors",
}

if TYPE_CHECKING:
    from .errors import MemirError
    from .memir import DialogRole, Flag, MemIR, Metadata, Provenance, RoleContext, Sensitivity, SourceType, Usage
    from .retrieval import Hit, ScoreBreakdown, format_context
    from .scope import Scope
    from .store import MemoryStore, StoreConfig


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    value = getattr(import_module(mod, __name__), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "MemoryStore",
    "StoreConfig",
    "Scope",
    "MemIR",
    "Provenance",
    "RoleContext",
    "Metadata",
    "Usage",
    "SourceType",
    "DialogRole",
    "Sensitivity",
    "Flag",
    "Hit",
    "ScoreBreakdown",
    "format_context",
    "MemirError",
]
__version__ = "0.1.0"
