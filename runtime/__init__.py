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

from .errors import MemirError
from .memir import DialogRole, Flag, MemIR, Metadata, Provenance, RoleContext, Sensitivity, SourceType, Usage
from .retrieval import Hit, ScoreBreakdown, format_context
from .scope import Scope
from .store import MemoryStore, StoreConfig

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
