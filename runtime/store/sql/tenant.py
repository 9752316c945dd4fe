"""One scope's rows, written once for both SQL backends: every statement that reads or writes them.

:class:`SqlTenant` binds ``(user_id, agent_id)`` into every statement it runs (the *tenant
clause*; PostgreSQL's row-level security enforces it as well). Its SQL is spelled through the
backend's :class:`~runtime.store.sql.dialect.SqlDialect`; what really differs between engines —
connections and transactions, how a vector is stored and decoded, how a batch of rows is inserted,
what happens after bytes are freed — is a handful of hooks each backend's tenant implements
(``runtime.store.sqlite.tenant.SqliteTenant``, ``runtime.store.postgres.tenant.PgTenant``).

Forgetting (:mod:`.forgetting`) and applying a retention decision (:mod:`.decisions`) are built
on this object's methods; search stays with each backend (its indexes differ).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, TypeVar

import numpy as np

from ...errors import EncoderMismatchError, ValidationError
from ...record.links import LinkKind, link_body, without_links
from ...record.memir import Flag, MemIR
from ..backend import LoggedDecision, ScopeLogs, ScopeRow, StoredRow
from ..filters import MemoryFilter
from ..row_codec import READ_COLS, body_json, record_to_row, row_to_record, ts, with_tags
from ..write_checks import BatchNames, check_references, unique_ids
from .dialect import SqlDialect

__all__ = ["SqlTenant", "TakenId", "retried"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_DECISION_ITEM_COLUMNS = (("decision_rowid", "bigint"), ("memory_id", "text"), ("kept", "boolean"), ("reason", "text"),
                          ("payload", "text"))


class TakenId(Exception):
    """Raised by :meth:`SqlTenant.insert_memories`: row ``index`` of the batch has an id that is taken."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def retried(method: F) -> F:
    """Run a tenant method again, whole, when its transaction loses a deadlock or a serialization
    conflict to another client (:meth:`SqlTenant.retrying`); inside an outer transaction it runs once.
    On a backend that never loses such conflicts (``RETRIES = False``: SQLite, one writer at a time)
    the class keeps the plain method, so no wrapper stands between caller and statement."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.retrying(lambda: method(self, *args, **kwargs))
    wrapper.__retried__ = method  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


class SqlTenant:
    """Reads and writes of one ``(user_id, agent_id)`` scope, over a backend's connection hooks."""

    dialect: ClassVar[SqlDialect]
    RETRIES: ClassVar[bool | None] = None  # a backend says whether a transaction can lose a conflict and run again
    VEC_COLS: ClassVar[str]  # the stored vector's columns of ``vectors v``, as :meth:`vector_of` reads them
    READ_COLS: ClassVar[str] = READ_COLS  # a record's columns of ``memories m``, as ``row_to_record`` reads them
    NEWEST_FIRST: ClassVar[str] = "m.seq DESC, m.rowid DESC"  # ORDER BY for the latest writes (an index's order)
    db: Any                  # the backend's store object (``embedder``, ``cold_format``)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.RETRIES is False:  # the plain methods, not their @retried wrappers
            for name in dir(cls):
                inner = getattr(getattr(cls, name, None), "__retried__", None)
                if inner is not None:
                    setattr(cls, name, inner)

    def __init__(self, db: Any, user_id: str, agent_id: str) -> None:
        self.db = db
        self.user_id = user_id
        self.agent_id = agent_id

    @property
    def placeholder(self) -> str:
        """The parameter marker (shared code reading the decision log writes in it)."""
        return self.dialect.ph

    # ------------------------------------------------------------------ what each backend provides
    def clause(self, alias: str = "m", *, check_only: bool = False) -> tuple[str, list[Any]]:
        """The scope's SQL condition on table ``alias`` and its parameters. ``check_only``: the
        statement locates rows by id or rowid; the condition only checks the scope."""
        raise NotImplementedError

    def reading(self) -> AbstractContextManager[Any]:
        """A connection for statements that change nothing (or one statement that commits itself)."""
        raise NotImplementedError

    def writing(self) -> AbstractContextManager[Any]:
        """A write transaction: all or nothing; nested uses join the outer one."""
        raise NotImplementedError

    def retrying(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (its own transactions), again if it lost a conflict to another client
        (a backend with ``RETRIES = True`` provides it)."""
        return fn()

    def insert_memories(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        """Inside a write transaction: insert ``memories`` rows (``row_codec.record_to_row``);
        their rowids. Raises :class:`TakenId` naming the first row whose id exists (nothing inserted)."""
        raise NotImplementedError

    def insert_vectors(self, conn: Any, rows: Sequence[tuple[int, str, int, np.ndarray]]) -> None:
        """Inside a write transaction: ``(rowid, encoder id, dim, unit vector)`` as float32 vectors."""
        raise NotImplementedError

    def inserted(self, conn: Any, rowids: Sequence[int], records: Sequence[MemIR], rows: Sequence[tuple[Any, ...]],
                 vectors: Sequence[np.ndarray]) -> None:
        """Inside :meth:`insert`'s transaction, after its statements: the new records, their rowids,
        ``memories`` rows (``row_codec.record_to_row``) and unit vectors, for a backend that mirrors
        them into an in-process cache. Nothing by default."""

    def conform_vectors(self, conn: Any, memory_ids: Sequence[str]) -> int:
        """Inside a write transaction: store the vectors of these memories of the scope in the format
        their tier calls for (:mod:`runtime.store.tiers`); returns how many changed."""
        raise NotImplementedError

    def vector_of(self, cols: Sequence[Any]) -> np.ndarray | None:
        """One stored vector from its :attr:`VEC_COLS` (``None`` when the row has none)."""
        raise NotImplementedError

    def stack(self, rows: Sequence[Sequence[Any]], dim: int) -> np.ndarray:
        """Stored vectors (each its :attr:`VEC_COLS`) as one float32 matrix."""
        raise NotImplementedError

    def vectors_changed(self, conn: Any) -> None:
        """Inside a write transaction: existing rows' vectors or tags changed (caches reload)."""

    def release_freed(self, wait_s: float, *, required: bool) -> None:
        """After a commit that deleted or redacted rows: push the freed bytes out of the files
        (``required``: or raise ``DeletionPendingError``; otherwise as far as it can now)."""

    # ------------------------------------------------------------------ per-scope state
    def state(self) -> ScopeRow:
        """The persisted state of the scope (defaults when it has never been written)."""
        ph = self.dialect.ph
        with self.reading() as conn:
            row = conn.execute(f"SELECT seq, decision_seq, open_session, session_last_at FROM scopes "
                               f"WHERE user_id = {ph} AND agent_id = {ph}", (self.user_id, self.agent_id)).fetchone()
        return ScopeRow(int(row[0]), int(row[1]), row[2], row[3]) if row else ScopeRow()

    @retried
    def set_session(self, session_id: str | None, last_at: float | None) -> None:
        """Record the open session and the time of its latest event."""
        ph = self.dialect.ph
        with self.writing() as conn:
            conn.execute(f"INSERT INTO scopes AS s (user_id, agent_id, open_session, session_last_at) "
                         f"VALUES ({ph},{ph},{ph},{ph}) ON CONFLICT (user_id, agent_id) DO UPDATE SET "
                         f"open_session = excluded.open_session, session_last_at = excluded.session_last_at",
                         (self.user_id, self.agent_id, session_id, last_at))

    # ------------------------------------------------------------------ writes
    @retried
    def insert(self, records: Sequence[MemIR], vectors: Sequence[np.ndarray], *, batch: bool = False,
               session: tuple[str | None, float | None] | None = None,
               links: Sequence[tuple[str, str, LinkKind]] = ()) -> tuple[list[int], int]:
        """Insert records with their unit vectors in one transaction.

        Returns:
            ``(write steps of the records, writes since the scope's last retention decision)``.

        Checks, inside the transaction: ids unique (store-wide), ``derived_from`` and
        ``supersedes`` naming memories of this scope (or of the batch). With ``batch`` errors
        name the item (``[3].id``). ``session`` = ``(open session, its last event time)`` to
        persist in the same transaction; ``links`` = ``(stored id, new id, kind)`` corroboration links
        the stored memories get, in the same transaction.
        """
        names = BatchNames(batch)
        ids = unique_ids(records, names)
        emb = self.db.embedder
        ph = self.dialect.ph
        with self.writing() as conn:
            check_references(records, ids, self.existing_ids, names)
            # One statement for the scope's state: its write counter, and the open session.
            sid, last_at = session if session is not None else (None, None)
            last, decided = conn.execute(
                f"INSERT INTO scopes AS s (user_id, agent_id, seq, open_session, session_last_at) "
                f"VALUES ({ph},{ph},{ph},{ph},{ph}) ON CONFLICT (user_id, agent_id) DO UPDATE SET seq = s.seq + excluded.seq, "
                f"open_session = CASE WHEN {ph} THEN excluded.open_session ELSE s.open_session END, "
                f"session_last_at = CASE WHEN {ph} THEN excluded.session_last_at ELSE s.session_last_at END "
                f"RETURNING seq, decision_seq",
                (self.user_id, self.agent_id, len(records), sid, last_at, session is not None,
                 session is not None)).fetchone()
            first = int(last) - len(records) + 1
            rows = [record_to_row(r, first + j) for j, r in enumerate(records)]
            try:
                rowids = self.insert_memories(conn, rows)
            except TakenId as e:  # ids are unique store-wide; this reveals only "taken"
                j = e.index
                raise ValidationError(f"{names.item(j)}id {records[j].id!r} already exists; omit id to get a fresh one",
                                      field=names.field(j, "id")) from None
            self._insert_links(conn, list(zip(rowids, records)))
            self.insert_vectors(conn, [(rowid, emb.encoder_id, emb.dim, v) for rowid, v in zip(rowids, vectors)])
            if links:
                self._link(conn, links)
            self.inserted(conn, rowids, records, rows, vectors)
        return list(range(first, first + len(records))), int(last) - int(decided)

    def _insert_links(self, conn: Any, rows: Sequence[tuple[int, MemIR]]) -> None:
        """New rows' tags, parents (``derived_from``) and ``supersedes`` links, in three batched statements."""
        ph, many = self.dialect.ph, self.dialect.many
        many(conn, f"INSERT INTO memory_tags(mem_rowid, tag) VALUES ({ph},{ph}) ON CONFLICT DO NOTHING",
             [(rid, t) for rid, r in rows for t in r.metadata.tags])
        many(conn, f"INSERT INTO memory_parents(mem_rowid, parent_id) VALUES ({ph},{ph}) ON CONFLICT DO NOTHING",
             [(rid, p) for rid, r in rows for p in r.provenance.derived_from])
        many(conn, f"INSERT INTO memory_links(mem_rowid, kind, target_id) VALUES ({ph},'supersedes',{ph}) "
                   f"ON CONFLICT DO NOTHING",
             [(rid, sup) for rid, r in rows if isinstance(sup := r.metadata.attributes.get("supersedes"), str)])

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that exist in this scope."""
        if not ids:
            return set()
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.id", ids)
        with self.reading() as conn:
            return {str(r[0]) for r in conn.execute(f"SELECT m.id FROM memories m WHERE {t} AND {among}", tp + ap)}

    @retried
    def set_session_context(self, pairs: Sequence[tuple[str, np.ndarray]]) -> int:
        """Store session-context feature rows by memory id (replacing earlier ones); returns rows stored."""
        if not pairs:
            return 0
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.id", [mid for mid, _ in pairs])
        ph = self.dialect.ph
        with self.writing() as conn:  # rowids of the ids still here, then one batched upsert by rowid
            rowid_of = dict(conn.execute(f"SELECT m.id, m.rowid FROM memories m WHERE {t} AND {among}", tp + ap))
            rows = [(rowid_of[mid], np.asarray(row, np.float64).tobytes()) for mid, row in pairs if mid in rowid_of]
            self.dialect.many(conn, f"INSERT INTO memory_context(mem_rowid, features) VALUES ({ph},{ph}) "
                                    f"ON CONFLICT (mem_rowid) DO UPDATE SET features = excluded.features", rows)
        return len(rows)

    def session_context(self, ids: Sequence[str], width: int) -> np.ndarray:
        """Session-context feature rows of ``ids`` (row-aligned; NaN where the session is still open)."""
        out = np.full((len(ids), width), np.nan)
        if not ids:
            return out
        pos = {m: i for i, m in enumerate(ids)}
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.id", ids)
        with self.reading() as conn:
            for mid, blob in conn.execute(
                    f"SELECT m.id, c.features FROM memory_context c JOIN memories m ON m.rowid = c.mem_rowid "
                    f"WHERE {t} AND {among}", tp + ap):
                row = np.frombuffer(blob, dtype=np.float64)
                if row.shape[0] == width:
                    out[pos[mid]] = row
        return out

    @retried
    def mark_superseded(self, old_id: str, new_id: str, *, archive: bool) -> None:
        """Flag ``old_id`` as superseded by ``new_id`` (and move it to the archive tier)."""
        old = self.get(old_id)
        if old is None:
            return
        flags = sorted(set(old.metadata.flags) | {Flag.superseded}, key=lambda f: f.value)
        new = old.model_copy(update={"metadata": old.metadata.model_copy(update={"flags": flags})})
        t, tp = self.clause(check_only=True)
        ph = self.dialect.ph
        tier = ", tier = 'archive'" if archive else ""
        with self.writing() as conn:
            row = conn.execute(f"UPDATE memories AS m SET record = {ph}, retention_reason = {ph}{tier} "
                               f"WHERE {t} AND m.id = {ph} RETURNING rowid",
                               [body_json(new), f"superseded_by:{new_id}", *tp, old_id]).fetchone()
            if archive and row is not None:
                self.conform_vectors(conn, [old_id])

    @retried
    def add_tags(self, memory_ids: Sequence[str], tags: Sequence[str]) -> int:
        """Add ``tags`` to this scope's memories ``memory_ids`` (the tag rows and the record's JSON
        body), in one transaction, rows locked in rowid order; returns how many memories gained at
        least one tag. Ids of other scopes match nothing (the tenant clause). Tag filters reload."""
        if not memory_ids or not tags:
            return 0
        ph = self.dialect.ph
        changed = 0
        tag_rows: list[tuple[int, str]] = []
        with self.writing() as conn:
            for rowid, rec in self.locked(conn, memory_ids):
                tagged = with_tags(rec, list(tags))
                if tagged is None:
                    continue
                self._rewrite(conn, rowid, tagged)
                tag_rows += [(rowid, x) for x in tagged.metadata.tags[len(rec.metadata.tags):]]
                changed += 1
            self.dialect.many(conn, f"INSERT INTO memory_tags(mem_rowid, tag) VALUES ({ph},{ph}) "
                                    f"ON CONFLICT DO NOTHING", tag_rows)
            if changed:
                self.vectors_changed(conn)
        return changed

    def _link(self, conn: Any, links: Sequence[tuple[str, str, LinkKind]]) -> None:
        """Inside a write transaction: each ``(stored id, new id, kind)`` links the stored memory of this
        scope to the new one (``runtime.record.links.link_body``: the JSON body only, so the caches
        keep their epoch; the rows locked in rowid order, their bodies rewritten by one batched
        statement). Other scopes' ids match nothing."""
        by_target: dict[str, list[tuple[str, LinkKind]]] = {}
        for target, new_id, kind in links:
            by_target.setdefault(target, []).append((new_id, kind))
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.id", list(by_target))
        ph = self.dialect.ph
        rows = conn.execute(f"SELECT m.rowid, m.id, m.record FROM memories m WHERE {t} AND {among} "
                            f"ORDER BY m.rowid{self.dialect.lock}", tp + ap).fetchall()
        self.dialect.many(conn, f"UPDATE memories AS m SET record = {ph} WHERE {t} AND m.rowid = {ph}",
                          [(link_body(body, by_target[mid]), *tp, rowid) for rowid, mid, body in rows])

    def locked(self, conn: Any, memory_ids: Sequence[str]) -> list[tuple[int, MemIR]]:
        """Inside a transaction: this scope's records ``memory_ids`` with their rowids, locked in rowid
        order where the engine locks rows (so concurrent rewriters never deadlock)."""
        if not memory_ids:
            return []
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.id", memory_ids)
        rows = conn.execute(f"SELECT m.rowid, {self.READ_COLS} FROM memories m WHERE {t} AND {among} "
                            f"ORDER BY m.rowid{self.dialect.lock}", tp + ap).fetchall()
        return [(int(rowid), row_to_record(*rest)) for rowid, *rest in rows]

    def lock_rows(self, conn: Any, memory_ids: Sequence[str]) -> None:
        """Lock the scope's rows with these ids in rowid order (before updating or deleting several):
        writers that all lock in one order cannot deadlock each other. A no-op where the store is
        written by one connection at a time."""
        if memory_ids and self.dialect.lock:
            t, tp = self.clause()
            among, ap = self.dialect.in_set("m.id", memory_ids)
            conn.execute(f"SELECT m.rowid FROM memories m WHERE {t} AND {among} ORDER BY m.rowid{self.dialect.lock}",
                         tp + ap)

    def _rewrite(self, conn: Any, rowid: int, rec: MemIR) -> None:
        """Inside a transaction: store a changed record body (tags, links) of a row this scope read."""
        t, tp = self.clause(check_only=True)
        ph = self.dialect.ph
        conn.execute(f"UPDATE memories AS m SET record = {ph} WHERE {t} AND m.rowid = {ph}", [body_json(rec), *tp, rowid])

    @retried
    def drop_links(self, memory_ids: Sequence[str], gone: Sequence[str]) -> int:
        """Remove the ids ``gone`` from the links of this scope's memories ``memory_ids`` (``related`` and
        the link attributes; ``runtime.record.links.without_links``) in one transaction; returns how many changed."""
        if not memory_ids or not gone:
            return 0
        changed = 0
        with self.writing() as conn:
            for rowid, rec in self.locked(conn, memory_ids):
                new = without_links(rec, gone)
                if new is not None:
                    self._rewrite(conn, rowid, new)
                    changed += 1
        return changed

    @retried
    def touch(self, rowids: Sequence[int], now: datetime) -> None:
        """Count one access for each row (recall's usage update): written behind by the store's
        :class:`~runtime.store.usage.UsageBuffer` when it has one (``StoreConfig.usage_flush_s``),
        else one statement now, rows locked in rowid order. Call it outside the search's transaction."""
        if not rowids:
            return
        buffer = self.db.usage
        if buffer is not None:
            buffer.add(self.user_id, self.agent_id, [int(r) for r in rowids], ts(now))
            return
        with self.reading() as conn:
            self.count_accesses(conn, [int(r) for r in rowids], ts(now))

    def count_accesses(self, conn: Any, rowids: list[int], at: float | None) -> None:
        """One statement: one more access, at ``at``, for each of the scope's ``rowids`` (others are
        not touched). A backend that counts accesses elsewhere than the row's columns overrides it."""
        d = self.dialect
        alias = "x" if d.lock else "m"  # where rows are locked, they are locked in rowid order first
        t, tp = self.clause(alias, check_only=True)
        among, ap = d.in_set(f"{alias}.rowid", rowids)
        which = (f"m.rowid IN (SELECT x.rowid FROM memories x WHERE {t} AND {among} ORDER BY x.rowid{d.lock})"
                 if d.lock else f"{t} AND {among}")
        conn.execute(f"UPDATE memories AS m SET access_count = access_count + 1, last_accessed_at = {d.ph} "
                     f"WHERE {which}", [at, *tp, *ap])

    # ------------------------------------------------------------------ reads
    def get(self, memory_id: str) -> MemIR | None:
        """The record with this id in this scope, or ``None`` (also for other scopes' ids)."""
        t, tp = self.clause()
        with self.reading() as conn:
            row = conn.execute(f"SELECT {self.READ_COLS} FROM memories m WHERE {t} AND m.id = {self.dialect.ph}",
                               [*tp, memory_id]).fetchone()
        return None if row is None else row_to_record(*row)

    def export(self) -> list[tuple[MemIR, np.ndarray | None, str | None]]:
        """Every record of the scope (all tiers, expired included), oldest first, with its stored
        vector and the id of the encoder that made it (an export needs no encoder; it never re-embeds)."""
        t, tp = self.clause()
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT {self.READ_COLS}, v.encoder_id, {self.VEC_COLS} FROM memories m "
                f"LEFT JOIN vectors v ON v.mem_rowid = m.rowid WHERE {t} ORDER BY m.seq, m.rowid", tp).fetchall()
        return [(row_to_record(*r[:5]), self.vector_of(r[6:]), r[5]) for r in rows]

    def expired_ids(self, now: datetime, tier: str = "archive") -> list[str]:
        """Ids of the scope's memories in ``tier`` whose TTL (``expires_at``) has passed at ``now``."""
        t, tp = self.clause()
        ph = self.dialect.ph
        with self.reading() as conn:
            return [str(r[0]) for r in conn.execute(
                f"SELECT m.id FROM memories m{self.dialect.index('ix_mem_scope_expiry')} WHERE {t} "
                f"AND m.expires_at IS NOT NULL AND m.expires_at <= {ph} AND m.tier = {ph}",
                tp + [now.timestamp(), tier])]

    def tier_of(self, memory_id: str) -> str | None:
        """``working`` / ``archive``, or ``None`` if the id is not in this scope."""
        t, tp = self.clause()
        with self.reading() as conn:
            row = conn.execute(f"SELECT tier FROM memories m WHERE {t} AND m.id = {self.dialect.ph}",
                               tp + [memory_id]).fetchone()
        return None if row is None else str(row[0])

    def promotable(self, memory_ids: Sequence[str], now: datetime) -> list[tuple[str, float | None]]:
        """Of ``memory_ids``, the scope's archived memories a recall may promote, with their stored
        utility, in the order given: not superseded versions (a newer memory of the scope links to
        them), not past their TTL at ``now`` (the next decision deletes those)."""
        if not memory_ids:
            return []
        ids = list(dict.fromkeys(memory_ids))
        t, tp = self.clause(check_only=True)
        t2, tp2 = self.clause("n", check_only=True)
        among, ap = self.dialect.in_set("m.id", ids)
        with self.reading() as conn:
            found = {str(i): u for i, u in conn.execute(
                f"SELECT m.id, m.utility FROM memories m WHERE {t} AND {among} AND m.tier = 'archive' "
                f"AND (m.expires_at IS NULL OR m.expires_at > {self.dialect.ph}) "
                f"AND NOT EXISTS (SELECT 1 FROM memory_links l JOIN memories n ON n.rowid = l.mem_rowid "
                f"WHERE l.kind = 'supersedes' AND l.target_id = m.id AND {t2})", tp + ap + [ts(now)] + tp2)}
        return [(m, None if found[m] is None else float(found[m])) for m in ids if m in found]

    def select(self, flt: MemoryFilter, now: datetime, limit: int | None = None) -> list[MemIR]:
        """Records passing ``flt``, in write order."""
        where, params = flt.where(now, self.dialect.ph)
        t, tp = self.clause()
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        with self.reading() as conn:
            rows = conn.execute(f"SELECT {self.READ_COLS} FROM memories m WHERE {t} AND {where} ORDER BY m.seq, m.rowid"
                                f"{lim}", tp + params).fetchall()
        return [row_to_record(*r) for r in rows]

    def count(self, flt: MemoryFilter, now: datetime) -> int:
        """How many records pass ``flt``."""
        where, params = flt.where(now, self.dialect.ph)
        t, tp = self.clause()
        with self.reading() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {t} AND {where}", tp + params).fetchone()[0])

    def with_vectors(self, flt: MemoryFilter, now: datetime) -> tuple[list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors, write steps) of the rows passing ``flt``, in write order.

        Rows embedded by another encoder raise :class:`EncoderMismatchError` (placeholders keep a
        vector of their own text, so every row has one); rows deleted by another client in between
        are simply absent.
        """
        emb = self.db.embedder
        ph = self.dialect.ph
        where, params = flt.where(now, ph)
        t, tp = self.clause()
        # One read for records and vectors (not a recall cache: a decision's working set is small).
        with self.reading() as conn:
            rows = self.dialect.vector_rows(
                conn, f"SELECT {self.READ_COLS}, m.rowid, m.seq, v.mem_rowid, {self.VEC_COLS} FROM memories m LEFT JOIN vectors v "
                f"ON v.mem_rowid = m.rowid AND v.encoder_id = {ph} AND v.dim = {ph} WHERE {t} AND {where} "
                f"ORDER BY m.seq, m.rowid", [emb.encoder_id, emb.dim, *tp, *params])
            missing = [int(r[5]) for r in rows if r[7] is None]
            if missing:
                self.raise_if_mismatched(conn, missing)  # rows without a vector of this encoder
                rows = [r for r in rows if r[7] is not None]
        recs = [row_to_record(*r[:5]) for r in rows]
        seqs = np.array([r[6] for r in rows], dtype=np.int64)
        return recs, self.stack([r[8:] for r in rows], int(emb.dim)), seqs

    def raise_if_mismatched(self, conn: Any, rowids: Sequence[int]) -> None:
        """Raise :class:`EncoderMismatchError` if any of ``rowids`` still exists with a vector from
        another encoder (rows that no longer exist were deleted concurrently: not an error)."""
        if not len(rowids):
            return
        emb = self.db.embedder
        ph = self.dialect.ph
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.rowid", [int(x) for x in rowids])
        others = conn.execute(
            f"SELECT coalesce(v.encoder_id, '<none>'), count(*) FROM memories m LEFT JOIN vectors v "
            f"ON v.mem_rowid = m.rowid WHERE {t} AND {among} "
            f"AND (v.encoder_id IS NULL OR v.encoder_id != {ph} OR v.dim != {ph}) GROUP BY 1",
            tp + ap + [emb.encoder_id, emb.dim]).fetchall()
        if others:
            raise EncoderMismatchError(
                f"memories in this scope were embedded by {dict((k, int(n)) for k, n in others)}, but the store "
                f"now uses {emb.encoder_id!r}; run `memir reembed STORE` "
                f"(or store.reembed()) to re-encode them")

    def recent_vectors(self, n: int) -> np.ndarray:
        """Unit vectors of the scope's ``n`` most recent writes, any tier, oldest first
        (placeholders excluded: they are not what the conversation was about)."""
        emb = self.db.embedder
        ph = self.dialect.ph
        t, tp = self.clause()
        real, rp = self.not_placeholder("m.record")
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT {self.VEC_COLS} FROM memories m{self.dialect.index('ix_mem_scope')} {self.dialect.vector_of_memory} "
                f"WHERE {t} AND {real} "
                f"ORDER BY {self.NEWEST_FIRST} LIMIT {ph}",
                [emb.encoder_id, emb.dim, *tp, *rp, int(n)]).fetchall()
        return self.stack(list(reversed(rows)), int(emb.dim))

    def not_placeholder(self, record: str) -> tuple[str, list[Any]]:
        """SQL true when the record JSON in column ``record`` is not a redacted placeholder's."""
        raise NotImplementedError

    def working_count(self) -> int:
        """Memories in working memory (for the fill watermark)."""
        t, tp = self.clause()
        with self.reading() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m{self.dialect.index('ix_mem_scope_tier')} "
                                    f"WHERE {t} AND m.tier = 'working'", tp).fetchone()[0])

    def versions(self, memory_id: str) -> list[str]:
        """Every version of ``memory_id``'s fact linked by ``supersedes``, oldest first."""
        t, tp = self.clause(check_only=True)
        seen = {memory_id}
        frontier = [memory_id]
        in_set = self.dialect.in_set
        with self.reading() as conn:
            while frontier:
                targets, ap = in_set("l.target_id", frontier)
                newer = conn.execute(
                    f"SELECT m.id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'supersedes' AND {t} AND {targets}", tp + ap).fetchall()
                sources, sp = in_set("m.id", frontier)
                older = conn.execute(
                    f"SELECT l.target_id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'supersedes' AND {t} AND {sources}", tp + sp).fetchall()
                frontier = [x for (x,) in newer + older if x not in seen]
                seen.update(frontier)
            among, ap = in_set("m.id", sorted(seen))
            order = conn.execute(f"SELECT m.id FROM memories m WHERE {t} AND {among} ORDER BY m.seq, m.rowid",
                                 tp + ap).fetchall()
        return [str(x) for (x,) in order]

    # ------------------------------------------------------------------ semantic refresh
    def refresh_marks(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """The refresh marker (``memory_links`` kind ``refreshed``) of each of ``memory_ids`` that has one."""
        if not memory_ids:
            return {}
        t, tp = self.clause(check_only=True)
        among, ap = self.dialect.in_set("m.id", memory_ids)
        with self.reading() as conn:
            return {str(m): str(x) for m, x in conn.execute(
                f"SELECT m.id, l.target_id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                f"WHERE l.kind = 'refreshed' AND {t} AND {among}", tp + ap)}

    @retried
    def put_refreshed(self, vectors: Sequence[tuple[str, np.ndarray]], mark: str) -> list[str]:
        """Replace the current encoder's vectors of these memories and set their refresh marker, in
        one transaction (all or nothing); returns the ids changed (memories deleted meanwhile are skipped)."""
        emb = self.db.embedder
        ph = self.dialect.ph
        done: list[str] = []
        with self.writing() as conn:
            rowid_of = {rec.id: rowid for rowid, rec in self.locked(conn, [m for m, _ in vectors])}
            for mid, vec in vectors:
                rowid = rowid_of.get(mid)
                if rowid is None:
                    continue
                cur = conn.execute(f"DELETE FROM vectors WHERE mem_rowid = {ph} AND encoder_id = {ph} AND dim = {ph}",
                                   (rowid, emb.encoder_id, emb.dim))
                if cur.rowcount != 1:
                    continue
                self.insert_vectors(conn, [(rowid, emb.encoder_id, emb.dim, vec)])
                conn.execute(f"DELETE FROM memory_links WHERE mem_rowid = {ph} AND kind = 'refreshed'", (rowid,))
                conn.execute(f"INSERT INTO memory_links(mem_rowid, kind, target_id) VALUES ({ph}, 'refreshed', {ph})",
                             (rowid, mark))
                done.append(mid)
            if done:
                self.conform_vectors(conn, done)  # archived ones back to the cold format
                self.vectors_changed(conn)
        return done

    # ------------------------------------------------------------------ recall log
    def log_recall(self, payload: dict[str, Any], at: datetime) -> None:
        """Append one explained recall to the scope's log."""
        ph = self.dialect.ph
        with self.reading() as conn:
            conn.execute(f"INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES ({ph},{ph},{ph},{ph})",
                         (self.user_id, self.agent_id, at.timestamp(), json.dumps(payload)))

    def recall_log(self, limit: int) -> list[dict[str, Any]]:
        """The scope's most recent explained recalls, newest first."""
        t, tp = self.clause("r")
        with self.reading() as conn:
            rows = conn.execute(f"SELECT payload FROM recall_log r WHERE {t} ORDER BY id DESC LIMIT {self.dialect.ph}",
                                tp + [int(limit)]).fetchall()
        return [json.loads(p) for (p,) in rows]

    # ------------------------------------------------------------------ copying a store
    def stored_rows(self, after_seq: int, limit: int) -> list[StoredRow]:
        """The scope's memories with ``seq > after_seq``, in seq order, exactly as stored."""
        t, tp = self.clause()
        ph = self.dialect.ph
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT {self.READ_COLS}, m.tier, m.seq, v.encoder_id, c.features, {self.VEC_COLS} FROM memories m "
                f"LEFT JOIN vectors v ON v.mem_rowid = m.rowid LEFT JOIN memory_context c ON c.mem_rowid = m.rowid "
                f"WHERE {t} AND m.seq > {ph} ORDER BY m.seq, m.rowid LIMIT {ph}",
                tp + [int(after_seq), int(limit)]).fetchall()
        return [StoredRow(row_to_record(*r[:5]), str(r[5]), int(r[6]), self.vector_of(r[9:]), r[7],
                          None if r[8] is None else bytes(r[8])) for r in rows]

    @retried
    def restore_rows(self, rows: Sequence[StoredRow]) -> int:
        """Insert rows exactly as given (ids, seq, tier, usage, vectors), skipping ids already here;
        one transaction. The scope's write counter moves up to the highest seq. Returns rows inserted."""
        ph = self.dialect.ph
        with self.writing() as conn:
            have = self.existing_ids([r.record.id for r in rows])
            todo = [row for row in rows if row.record.id not in have]
            if todo:
                rowids = self.insert_memories(conn, [record_to_row(row.record, row.seq, row.tier) for row in todo])
                pairs = list(zip(rowids, todo))
                self._insert_links(conn, [(rid, row.record) for rid, row in pairs])
                self.insert_vectors(conn, [(rid, str(row.encoder_id), int(row.vector.shape[0]), row.vector)
                                           for rid, row in pairs if row.vector is not None])
                self.dialect.many(conn, f"INSERT INTO memory_context(mem_rowid, features) VALUES ({ph},{ph})",
                                  [(rid, row.context) for rid, row in pairs if row.context is not None])
                self.conform_vectors(conn, [row.record.id for row in todo if row.tier == "archive"])
            conn.execute(f"INSERT INTO scopes AS s (user_id, agent_id, seq) VALUES ({ph},{ph},{ph}) "
                         f"ON CONFLICT (user_id, agent_id) DO UPDATE SET seq = {self.dialect.greatest}(s.seq, excluded.seq)",
                         (self.user_id, self.agent_id, max((row.seq for row in rows), default=0)))
            if todo:  # rows under old write steps: a cache that loads by write counter would not see them
                self.vectors_changed(conn)
        return len(todo)

    def logs(self) -> ScopeLogs:
        """The scope's state, decision log (with items) and recall log, in the order written."""
        t, tp = self.clause("d")
        with self.reading() as conn:
            heads = conn.execute(f"SELECT id, decision_id, at, payload FROM decisions d WHERE {t} ORDER BY id",
                                 tp).fetchall()
            among, ap = self.dialect.in_set("decision_rowid", [int(h[0]) for h in heads])
            items: dict[int, list[tuple[str, bool, str, str]]] = {}
            for rid, m, k, reason, p in conn.execute(
                    f"SELECT decision_rowid, memory_id, kept, reason, payload FROM decision_items "
                    f"WHERE {among} ORDER BY memory_id", ap):
                items.setdefault(int(rid), []).append((m, bool(k), reason, p))
            decisions = [LoggedDecision(did, float(at), head, items.get(int(rowid), []))
                         for rowid, did, at, head in heads]
            recalls = [(float(at), p) for at, p in conn.execute(
                f"SELECT at, payload FROM recall_log d WHERE {t} ORDER BY id", tp)]
            state = self.state()
        return ScopeLogs(state, decisions, recalls)

    @retried
    def restore_logs(self, logs: ScopeLogs) -> bool:
        """Write the logs and the scope state in one transaction, unless this scope already has a
        decision or recall logged (then nothing; returns whether it wrote)."""
        t, tp = self.clause("d")
        ph = self.dialect.ph
        with self.writing() as conn:
            if conn.execute(f"SELECT 1 FROM decisions d WHERE {t} UNION ALL SELECT 1 FROM recall_log d WHERE {t} "
                            f"LIMIT 1", tp + tp).fetchone():
                return False
            for d in logs.decisions:
                self.record_decision(conn, d.decision_id, d.at, d.head, [(m, k, r, p) for m, k, r, p in d.items])
            self.dialect.many(conn, f"INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES ({ph},{ph},{ph},{ph})",
                              [(self.user_id, self.agent_id, at, p) for at, p in logs.recalls])
            st = logs.state
            conn.execute(f"INSERT INTO scopes AS s (user_id, agent_id, seq, decision_seq, open_session, session_last_at) "
                         f"VALUES ({ph},{ph},{ph},{ph},{ph},{ph}) ON CONFLICT (user_id, agent_id) DO UPDATE SET "
                         f"seq = {self.dialect.greatest}(s.seq, excluded.seq), decision_seq = excluded.decision_seq, "
                         f"open_session = excluded.open_session, session_last_at = excluded.session_last_at",
                         (self.user_id, self.agent_id, st.seq, st.decision_seq, st.open_session, st.session_last_at))
        return True

    def record_decision(self, conn: Any, decision_id: str, at: float, head: str,
                        items: Sequence[tuple[str, bool, str, str]]) -> None:
        """Inside a write transaction: one logged decision, its head JSON and its
        ``(memory id, kept, reason, item JSON)`` rows."""
        ph = self.dialect.ph
        rowid = conn.execute(f"INSERT INTO decisions(decision_id, user_id, agent_id, at, payload) "
                             f"VALUES ({ph},{ph},{ph},{ph},{ph}) RETURNING id",
                             (decision_id, self.user_id, self.agent_id, at, head)).fetchone()[0]
        self.dialect.insert_many(conn, "decision_items", _DECISION_ITEM_COLUMNS,
                                 [(rowid, m, bool(k), r, p) for m, k, r, p in items])
