"""memir runtime — what production agents import.

Typed memory records (MemIR), a scoped store with provenance-aware retrieval, retention as a
constrained optimisation under a policy, and the ONNX utility scorer. Importing it costs almost
nothing: public names resolve lazily, and the store path pays for numpy, pydantic and
onnxruntime — never torch, lightning or datasets (a test checks).

Example:
    >>> from runtime import MemoryStore, RetentionPolicy, Triggers, format_context
    >>> store = MemoryStore.open("agent.sqlite")                     # doctest: +SKIP
    >>> me = store.scope(user_id="u42",                               # doctest: +SKIP
    ...                  policy=RetentionPolicy(capacity=200, triggers=Triggers(on_session_end=True)))
    >>> me.write("Prefers aisle seats", sub_role="travel", confidence=0.95)  # doctest: +SKIP
    >>> print(format_context(me.recall("seat preference", k=3)))      # doctest: +SKIP
"""

from typing import TYPE_CHECKING

from .lazy import lazy_names

# Public names resolve lazily (PEP 562): `import runtime` costs almost nothing, and each name pulls
# in only its own room on first use. Static type checkers see the real imports below.
_EXPORTS = {
    # the store
    "MemoryStore": ".store", "StoreConfig": ".store", "Scope": ".store", "Version": ".store",
    "ForgetReport": ".store", "Hit": ".store", "ScoreBreakdown": ".store", "format_context": ".store",
    "FreshnessConfig": ".store", "NEVER": ".store",
    # records
    "MemIR": ".record", "Provenance": ".record", "RoleContext": ".record", "Metadata": ".record",
    "Usage": ".record", "SourceType": ".record", "DialogRole": ".record", "Sensitivity": ".record",
    "Flag": ".record", "RecordConfig": ".record", "WriteFields": ".record",
    # annotation
    "AssemblerConfig": ".annotate", "ContextAssembler": ".annotate", "AgentContext": ".annotate",
    "RoleConfig": ".annotate", "SessionConfig": ".annotate", "extract_candidates": ".annotate",
    # retention
    "RetentionPolicy": ".retention", "Triggers": ".retention", "RetentionDecision": ".retention",
    "MemoryExplanation": ".retention", "RuleSet": ".retention", "load_rules": ".retention",
    "DEFAULT_RULES": ".retention", "TaskCapacity": ".retention", "SummaryPolicy": ".retention",
    # scoring
    "Scorer": ".scoring", "UtilityScorer": ".scoring", "FakeScorer": ".scoring", "ScoringContext": ".scoring",
    # errors
    "MemirError": ".errors",
}

if TYPE_CHECKING:
    from .annotate import AgentContext, AssemblerConfig, ContextAssembler, RoleConfig, SessionConfig, extract_candidates
    from .errors import MemirError
    from .record import (
        DialogRole,
        Flag,
        MemIR,
        Metadata,
        Provenance,
        RecordConfig,
        RoleContext,
        Sensitivity,
        SourceType,
        Usage,
        WriteFields,
    )
    from .retention import (
        DEFAULT_RULES,
        MemoryExplanation,
        RetentionDecision,
        RetentionPolicy,
        RuleSet,
        SummaryPolicy,
        TaskCapacity,
        Triggers,
        load_rules,
    )
    from .scoring import FakeScorer, Scorer, ScoringContext, UtilityScorer
    from .store import (
        NEVER,
        ForgetReport,
        FreshnessConfig,
        Hit,
        MemoryStore,
        Scope,
        ScoreBreakdown,
        StoreConfig,
        Version,
        format_context,
    )


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())


__all__ = [
    "AgentContext", "AssemblerConfig", "ContextAssembler", "DEFAULT_RULES", "DialogRole", "FakeScorer", "Flag",
    "ForgetReport", "FreshnessConfig", "Hit", "MemIR", "MemirError", "MemoryExplanation", "MemoryStore", "Metadata", "Provenance",
    "RecordConfig", "RetentionDecision", "RetentionPolicy", "RoleConfig", "RoleContext", "RuleSet", "Scope",
    "ScoreBreakdown", "Scorer", "ScoringContext", "Sensitivity", "SessionConfig", "SourceType", "StoreConfig",
    "SummaryPolicy", "TaskCapacity", "Triggers", "Usage", "UtilityScorer", "Version", "WriteFields", "extract_candidates",
    "NEVER", "format_context", "load_rules",
]
__version__ = "0.2.0"
