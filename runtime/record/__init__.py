"""The typed memory record (MemIR), the one record builder, and redaction."""

from .builder import DEFAULT_CONFIDENCE, Draft, RecordBuilder, RecordConfig, flatten
from .fields import WriteFields
from .memir import (
    SCHEMA_VERSION,
    DialogRole,
    Flag,
    Id,
    MemIR,
    Metadata,
    Provenance,
    RoleContext,
    Sensitivity,
    SourceType,
    Usage,
    new_id,
    utcnow,
)

__all__ = [
    "DEFAULT_CONFIDENCE", "SCHEMA_VERSION", "DialogRole", "Draft", "Flag", "Id", "MemIR", "Metadata", "Provenance",
    "RecordBuilder", "RecordConfig", "RoleContext", "Sensitivity", "SourceType", "Usage", "WriteFields", "flatten",
    "new_id", "utcnow",
]
