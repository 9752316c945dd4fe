"""Annotation of new memories from the agent's context: roles, session boundaries, extraction of
candidates from LLM output, and the session context features stored when a session closes.

Names resolve at first use (PEP 562): importing one submodule (``runtime.annotate.summary``) does
not load the assembler, the enricher and the session detector with it."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

_EXPORTS = {
    **dict.fromkeys(("AgentContext", "AssemblerConfig", "Assembly", "ContextAssembler"), ".assembler"),
    "session_features": ".consolidate",
    **dict.fromkeys(("EnrichConfig", "ToneResult"), ".enrich"),
    **dict.fromkeys(("Candidate", "extract_candidates"), ".extract"),
    **dict.fromkeys(("RoleClassifier", "RoleConfig", "RoleDecision"), ".role_classifier"),
    **dict.fromkeys(("SessionConfig", "SessionDecision", "SessionState", "SessionTracker"), ".sessions"),
}

if TYPE_CHECKING:
    from .assembler import AgentContext, AssemblerConfig, Assembly, ContextAssembler
    from .consolidate import session_features
    from .enrich import EnrichConfig, ToneResult
    from .extract import Candidate, extract_candidates
    from .role_classifier import RoleClassifier, RoleConfig, RoleDecision
    from .sessions import SessionConfig, SessionDecision, SessionState, SessionTracker

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())

__all__ = ["AgentContext", "AssemblerConfig", "Assembly", "Candidate", "ContextAssembler", "EnrichConfig", "RoleClassifier",
           "RoleConfig", "RoleDecision", "SessionConfig", "SessionDecision", "SessionState", "SessionTracker", "ToneResult",
           "session_features", "extract_candidates"]
