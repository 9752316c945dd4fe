"""Hot and cold tiers: how a memory's vector is stored in each, and when a memory moves.

Working memories (the hot tier) keep float32 unit vectors. Archived memories (the cold tier:
retention's losers, superseded versions, summarised turns) keep their metadata and a
low-precision copy of the vector (``StoreConfig.cold_vectors``):

=========  ======================================  ===================  =============
format     bytes (MiniLM, 384 dims)                stored as            per vector
=========  ======================================  ===================  =============
float32    1,536                                   the vector           (no change)
float16    768                                     IEEE half floats     —
int8       388                                     int8 codes + scale   4-byte scale
=========  ======================================  ===================  =============

``int8`` is symmetric per-vector quantisation: ``scale = max|v| / 127``, ``q = round(v / scale)``
(the scale is stored for readers of the raw bytes). Decoding re-normalises to unit length, so a cold vector is still compared by inner product. What
this costs in recall is measured by ``python -m train.eval tiers`` (docs/benchmarks.md).

A cold memory is *promoted* on access: a recall (with ``update_usage``, the default) that returns
an archived memory moves it back to the working tier, with its vector back at float32 (the
decoded values; nothing is re-embedded). Superseded versions are never promoted (the newer
version is the memory), nor memories past their TTL (the next decision deletes them). Promotion is logged as a decision (trigger ``access:recall``, action
``promote``), so ``explain`` and time travel see it like any other tier change.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from ..errors import ValidationError
from ..record.memir import new_id

if TYPE_CHECKING:
    from ..retention.decision import RetentionDecision

__all__ = ["COLD_FORMATS", "ColdFormat", "HOT_FORMAT", "PROMOTE_TRIGGER", "check_format", "decode", "decode_many",
           "decode_rows", "encode", "is_promotion", "nbytes", "promotion_decision", "wanted_format"]

ColdFormat = Literal["float32", "float16", "int8"]
COLD_FORMATS: tuple[str, ...] = get_args(ColdFormat)
HOT_FORMAT: ColdFormat = "float32"
PROMOTE_TRIGGER = "access:recall"

_SCALE = struct.Struct("<f")


def wanted_format(tier: str, cold_format: str) -> str:
    """The format a vector of a memory in ``tier`` is stored in: ``cold_format`` in the archive,
    float32 anywhere else."""
    return cold_format if tier == "archive" else HOT_FORMAT


def check_format(fmt: object, field: str = "cold_vectors") -> ColdFormat:
    """``fmt`` if it names a vector format, else a :class:`ValidationError` naming ``field``."""
    if fmt not in COLD_FORMATS:
        raise ValidationError(f"{field} must be one of {', '.join(COLD_FORMATS)}, got {fmt!r}", field=field)
    return fmt  # type: ignore[return-value]


def nbytes(fmt: str, dim: int) -> int:
    """Stored size of one vector of ``dim`` dimensions in ``fmt``."""
    return {"float32": 4 * dim, "float16": 2 * dim, "int8": dim + _SCALE.size}[check_format(fmt, "fmt")]


def encode(v: np.ndarray, fmt: str) -> bytes:
    """The stored bytes of unit vector ``v`` in ``fmt``."""
    x = np.asarray(v, dtype=np.float32).reshape(-1)
    if fmt == "float32":
        return x.tobytes()
    if fmt == "float16":
        return x.astype(np.float16).tobytes()
    if fmt == "int8":
        peak = float(np.max(np.abs(x))) if x.size else 0.0
        scale = peak / 127.0 if peak > 0.0 else 1.0
        q = np.clip(np.rint(x / scale), -127, 127).astype(np.int8)
        return _SCALE.pack(scale) + q.tobytes()
    check_format(fmt, "fmt")
    raise AssertionError(fmt)  # unreachable


def decode(blob: bytes, fmt: str, dim: int) -> np.ndarray:
    """The float32 unit vector stored as ``blob`` in ``fmt``."""
    return decode_many([blob], fmt, dim)[0]


def decode_many(blobs: Sequence[bytes], fmt: str, dim: int) -> np.ndarray:
    """Rows of float32 unit vectors from stored blobs, all in ``fmt`` (one numpy pass)."""
    n = len(blobs)
    if fmt == "float32":
        return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, dim).copy()
    if fmt == "float16":
        out = np.frombuffer(b"".join(blobs), dtype=np.float16).reshape(n, dim).astype(np.float32)
    elif fmt == "int8":
        raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(n, dim + _SCALE.size)
        # the scale cancels in the normalisation below: leaving it out makes decode(encode(decode(b)))
        # bit-identical to decode(b), so a copied store verifies by checksum
        out = raw[:, _SCALE.size:].copy().view(np.int8).astype(np.float32)
    else:
        check_format(fmt, "fmt")
        raise AssertionError(fmt)  # unreachable
    norm = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norm > 0, norm, 1.0).astype(np.float32)


def decode_rows(rows: Iterable[tuple[bytes, str]], dim: int) -> np.ndarray:
    """Vectors of ``(blob, fmt)`` pairs in order, whatever mix of formats they are in."""
    rows = list(rows)
    out = np.zeros((len(rows), dim), dtype=np.float32)
    by_fmt: dict[str, list[int]] = {}
    for i, (_, f) in enumerate(rows):
        by_fmt.setdefault(f, []).append(i)
    for f, idx in by_fmt.items():
        out[idx] = decode_many([rows[i][0] for i in idx], f, dim)
    return out


def is_promotion(decision: RetentionDecision) -> bool:
    """Whether ``decision`` is a promotion on access (it does not count as a retention decision for
    the scope's write counter: ``every_n_writes`` triggers keep counting)."""
    return decision.trigger == PROMOTE_TRIGGER and decision.method == "promotion"


def promotion_decision(promoted: Sequence[tuple[str, float | None]], *, at: datetime, user_id: str,
                       agent_id: str) -> RetentionDecision:
    """The logged decision that moves accessed cold memories ``(id, stored utility)`` back to the
    working tier (applied through the backend's one decision path, like retention's)."""
    from ..retention.decision import ItemDecision, RetentionDecision
    from ..retention.solver import Reason, Status

    items = {m: ItemDecision(memory_id=m, kept=True, reason=Reason.ACCESSED, action="promote",
                             utility=float(u or 0.0), model_utility=float(u or 0.0)) for m, u in promoted}
    return RetentionDecision(
        decision_id=new_id("dec"), at=at, user_id=user_id, agent_id=agent_id, trigger=PROMOTE_TRIGGER,
        scorer="none", method="promotion", engine="none", status=Status.OPTIMAL,
        objective=float(sum(it.utility for it in items.values())), capacity=None, kept=list(items),
        promoted=list(items), n_items=len(items), items=items)
