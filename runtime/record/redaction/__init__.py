"""Redaction of secrets and personal data before anything is stored (see :mod:`.redactor`)."""

from .kinds import RedactionKind
from .redactor import Finding, Redaction, Redactor, contains_sensitive, redact

__all__ = ["Finding", "Redaction", "RedactionKind", "Redactor", "contains_sensitive", "redact"]
