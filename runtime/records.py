"""Build a :class:`MemIR` from ``scope.write("text", **typed_fields)`` keyword arguments.

Flat keywords are the friendly form (``source_type=``, ``session_id=``, ``sub_role=``, ``flags=``…);
the nested models (``provenance=``, ``role_context=``, ``metadata=``) are accepted too. The scope
always sets the tenant fields (user_id, agent_id): a caller cannot write into another scope.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from .errors import ValidationError, VectorError
from .memir import MemIR, Metadata, Provenance, RoleContext, Usage

__all__ = ["build_record", "check_vector", "WRITE_FIELDS"]

_GROUPS: dict[str, type[BaseModel]] = {"provenance": Provenance, "role_context": RoleContext, "metadata": Metadata,
                            "usage": Usage}
_TOP = {"id", "created_at"}
_FLAT: dict[str, tuple[str, str]] = {}
for _group, _model in _GROUPS.items():
    for _name in _model.model_fields:
        if _group == "provenance" and _name in ("user_id", "agent_id"):
            continue
        _FLAT[_name] = (_group, _name)
_FLAT["source_type"] = ("provenance", "type")
_FLAT.pop("type", None)

WRITE_FIELDS = sorted(_TOP | set(_FLAT) | set(_GROUPS))


def build_record(content: str, *, user_id: str, agent_id: str, **fields: Any) -> MemIR:
    """Assemble and validate a record for the scope ``(user_id, agent_id)``.

    Raises:
        ValidationError: unknown keyword (the message lists valid ones) or an invalid value (the
            message names the field, e.g. ``metadata.confidence``).
    """
    unknown = sorted(k for k in fields if k not in _TOP and k not in _FLAT and k not in _GROUPS)
    if unknown:
        raise ValidationError(f"unknown field(s) {unknown} for write(); valid fields: {', '.join(WRITE_FIELDS)}",
                              field=unknown[0])
    nested: dict[str, dict[str, Any]] = {g: {} for g in _GROUPS}
    for g in _GROUPS:
        obj = fields.pop(g, None)
        if obj is not None:
            nested[g].update(obj.model_dump() if hasattr(obj, "model_dump") else dict(obj))
    body: dict[str, Any] = {"content": content}
    for k, v in fields.items():
        if k in _TOP:
            body[k] = v
        else:
            g, name = _FLAT[k]
            nested[g][name] = v
    for key in ("user_id", "agent_id"):
        given = nested["provenance"].get(key)
        scope_value = user_id if key == "user_id" else agent_id
        if given is not None and given != scope_value:
            raise ValidationError(
                f"provenance.{key}={given!r} does not match this scope ({scope_value!r}); "
                f"write through store.scope({key}={given!r}) instead", field=f"provenance.{key}")
    nested["provenance"]["user_id"] = user_id
    nested["provenance"]["agent_id"] = agent_id
    body.update({g: v for g, v in nested.items() if v or g == "provenance"})
    try:
        return MemIR.model_validate(body)
    except PydanticValidationError as e:
        raise ValidationError.from_pydantic(e) from e


def check_vector(embedding: Any, embedder: Any) -> np.ndarray:
    """Validate a caller-supplied vector for ``embedder`` (dimension, finite, non-zero) and
    return it unit-normalised as float32.

    Raises:
        VectorError: naming ``embedding`` and what is wrong with it.
    """
    try:
        v = np.asarray(embedding, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError) as e:
        raise VectorError(f"embedding is not a numeric vector: {e}", field="embedding") from e
    if v.shape[0] != embedder.dim:
        raise VectorError(f"embedding has dimension {v.shape[0]}, the store's encoder {embedder.encoder_id!r} "
                          f"makes {embedder.dim}", field="embedding")
    if not np.all(np.isfinite(v)):
        raise VectorError("embedding contains NaN or inf", field="embedding")
    n = float(np.linalg.norm(v))
    if n < 1e-12:
        raise VectorError("embedding is all zeros (no direction to compare)", field="embedding")
    return (v / n).astype(np.float32)
