"""Annotation of new memories from the agent's context: roles, session boundaries, extraction of
candidates from LLM output, and the session context features stored when a session closes."""

from .assembler import AgentContext, AssemblerConfig, Assembly, ContextAssembler
from .consolidate import session_features
from .enrich import EnrichConfig, ToneResult
from .extract import Candidate, extract_candidates
from .role_classifier import RoleClassifier, RoleConfig, RoleDecision
from .sessions import SessionConfig, SessionDecision, SessionState, SessionTracker

__all__ = ["AgentContext", "AssemblerConfig", "Assembly", "Candidate", "ContextAssembler", "EnrichConfig", "RoleClassifier",
           "RoleConfig", "RoleDecision", "SessionConfig", "SessionDecision", "SessionState", "SessionTracker", "ToneResult",
           "session_features", "extract_candidates"]
