"""Session consolidation: annotate a finished session's memories with their dialogue context.

Whether a turn is worth keeping depends on its neighbours (it answers a question, the partner
reacts to it, it is central to the session: :mod:`utilitynet.dialog`). Those neighbours may be
forgotten later, so the context is computed **once, when the session is complete**, over all of
its records (every tier, write order, stored vectors) and stored beside each record (the store's
``memory_context`` table; the record itself is not changed). Every later retention decision hands
the stored rows to the utility model as ``ScoringContext.session_context``. Measured on LoCoMo:
recomputing the context over what is still held instead loses ~4–5 points of evidence recall.

When it runs: ``Scope`` calls it when a session closes — a write opens another session, the
session detector splits on a time gap or a topic shift, or the agent calls
``scope.end_session()``; ``scope.annotate_session(id)`` recomputes one session explicitly (a batch
importer, or after edits). Recomputing overwrites the values (idempotent for unchanged sessions).

Example:
    >>> scope = store.scope(user_id="alice")                          # doctest: +SKIP
    >>> for turn in turns: scope.write(turn, session_id="s1", source_entity="Alice")
    >>> scope.end_session()                                            # annotates s1
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from utilitynet.columns import DIALOG_ROLES
from utilitynet.dialog import CONTEXT_NAMES, session_context, sessions_context

from ..record.memir import Flag, MemIR

__all__ = ["dump_session_context", "history_session_columns", "history_session_features", "scopes_session_columns",
           "session_features", "session_turns", "write_order"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def session_features(records: list[MemIR], vectors: np.ndarray) -> np.ndarray:
    """The session-context features of every record of one complete session (records in write
    order): ``(n, len(CONTEXT_NAMES))`` float64, stored as computed."""
    return session_context([r.content for r in records], vectors, [_role(r) for r in records])


def _role(r: MemIR) -> str:
    role = r.role_context.dialog_role
    return str(getattr(role, "value", role))


def history_session_features(records: list[MemIR], vectors: np.ndarray) -> np.ndarray:
    """Session-context features of a scope's whole history at once (records in write order): what
    the store computed as each session closed. The session of the latest write is still open, so
    its rows are NaN, as are records without a session.

    ``memir score`` uses it on a dump, which holds every tier of each scope.
    """
    turn = np.zeros(len(records), dtype=bool)
    turn[session_turns(records)] = True
    return history_session_columns([r.provenance.session_id for r in records], turn,
                                   [r.content for r in records], vectors, [_role(r) for r in records])


def history_session_columns(session_ids: Sequence[str | None], turn: np.ndarray, contents: Sequence[str],
                            vectors: np.ndarray, roles: Sequence[str] | np.ndarray,
                            scopes: np.ndarray | None = None, *, vector_rows: np.ndarray | None = None) -> np.ndarray:
    """:func:`history_session_features` of records held column-wise (write order): their session
    ids, which are turns of the conversation (not redacted placeholders), contents, vectors and
    dialog roles (names, or codes into :data:`utilitynet.columns.DIALOG_ROLES`).

    ``scopes`` decides many scopes' histories in one pass: each row's scope number, rows of one
    scope contiguous and in its write order. A session belongs to its scope (the same id in two
    scopes is two sessions) and each scope's open session is that of its own latest write. Every
    row equals what the scope alone gives (the context is computed session by session).

    ``vector_rows``: row ``i``'s vector is ``vectors[vector_rows[i]]`` (default: row-aligned), so a
    block's vectors are read where they are instead of being copied into this order first.
    """
    n = len(session_ids)
    out = np.full((n, len(CONTEXT_NAMES)), np.nan)
    if not n:
        return out
    scope = np.zeros(n, dtype=np.int64) if scopes is None else np.asarray(scopes, dtype=np.int64)
    if scope.shape != (n,) or (np.diff(scope) < 0).any():
        raise ValueError(f"scopes must be {n} non-decreasing scope numbers, one per row")
    last = np.r_[np.flatnonzero(np.diff(scope)), n - 1]              # each scope's latest write
    open_session = dict(zip(scope[last].tolist(), (session_ids[i] for i in last.tolist())))
    members: dict[tuple[int, str], list[int]] = {}
    for i, (s, sid) in enumerate(zip(scope.tolist(), session_ids)):
        if sid is not None and sid != open_session[s] and turn[i]:
            members.setdefault((s, sid), []).append(i)
    if not members:
        return out
    rows = [i for live in members.values() for i in live]   # session by session, each in write order
    bounds = np.cumsum([0] + [len(live) for live in members.values()])
    vecs = np.asarray(vectors, dtype=np.float32)
    names = [DIALOG_ROLES[int(r)] if not isinstance(r, str) and 0 <= int(r) < len(DIALOG_ROLES)
             else str(r) for r in (roles[i] for i in rows)]
    at = np.asarray(rows, dtype=np.int64)
    out[rows] = sessions_context([contents[i] for i in rows], vecs, bounds, names,
                                 emb_rows=at if vector_rows is None else np.asarray(vector_rows, dtype=np.int64)[at])
    return out


def write_order(created: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Row indices scope by scope, each scope in write order (``created``, ties in row order); scope
    ``k`` is the next ``sizes[k]`` rows."""
    bounds = np.cumsum([0, *sizes]).tolist()
    parts = [lo + np.argsort(created[lo:hi], kind="stable") for lo, hi in zip(bounds[:-1], bounds[1:])]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def scopes_session_columns(session_ids: Sequence[str | None], turn: np.ndarray, contents: Sequence[str],
                           vectors: np.ndarray, roles: Sequence[str] | np.ndarray, order: np.ndarray,
                           sizes: Sequence[int]) -> np.ndarray:
    """:func:`history_session_columns` of several scopes' rows picked by ``order`` — scope by scope,
    ``sizes[k]`` rows each, each scope in write order (:func:`write_order`). Row ``j`` of the result
    belongs to row ``order[j]`` of the inputs. ``memir score``, the dump writer and the benchmark's
    dump generator all compute a dump's context through it."""
    ol = order.tolist()
    picked = roles[order] if isinstance(roles, np.ndarray) else [roles[i] for i in ol]
    return history_session_columns([session_ids[i] for i in ol], turn[order], [contents[i] for i in ol],
                                   vectors, picked, scopes=np.repeat(np.arange(len(sizes)), sizes), vector_rows=order)


def dump_session_context(records: Sequence[MemIR], vectors: Sequence[np.ndarray | None]
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The session context ``memir score`` computes for each record of a dump, computed once by the
    dump's writer and stored in it (Parquet's ``session_context`` column).

    Records are in dump order and may belong to many scopes. Each scope is taken the way the scorer
    takes it: its records in write order (``created_at``, ties in dump order), vectors scaled to unit
    length in float32, then :func:`history_session_columns` — the same function on the same values,
    so a stored row equals what the scorer would compute.

    Returns:
        ``(context (n, len(CONTEXT_NAMES)) float64, known (n,) bool)``: NaN rows are records without
        a context (the scope's open session, no session, redacted placeholders); ``known`` is False
        for every record of a scope with a record without a vector (the scorer embeds those first,
        so only it can compute that scope's context), and of a scope whose vectors differ in width.
    """
    n = len(records)
    out = np.full((n, len(CONTEXT_NAMES)), np.nan)
    known = np.zeros(n, dtype=bool)
    scopes: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(records):
        scopes.setdefault((r.provenance.user_id, r.provenance.agent_id), []).append(i)
    by_dim: dict[int, list[list[int]]] = {}
    for members in scopes.values():
        dims = {None if vectors[i] is None else int(np.asarray(vectors[i]).shape[-1]) for i in members}
        if len(dims) == 1 and None not in dims:
            by_dim.setdefault(dims.pop(), []).append(members)  # type: ignore[arg-type]
    for group in by_dim.values():
        idx = np.concatenate([np.asarray(g, dtype=np.int64) for g in group])
        vecs = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in idx.tolist()])
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        rows = [records[i] for i in idx.tolist()]
        sizes = [len(g) for g in group]
        w = write_order(np.array([_microseconds(r) for r in rows], dtype=np.int64), sizes)
        out[idx[w]] = scopes_session_columns(
            [r.provenance.session_id for r in rows], np.array([Flag.placeholder not in r.metadata.flags for r in rows]),
            [r.content for r in rows], vecs, [_role(r) for r in rows], w, sizes)
        known[idx] = True
    return out, known


def _microseconds(r: MemIR) -> int:
    d = r.created_at - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def session_turns(records: list[MemIR]) -> list[int]:
    """Indices of the records that are turns of the conversation (redacted placeholders have lost
    their content and are left out)."""
    return [i for i, r in enumerate(records) if Flag.placeholder not in r.metadata.flags]
