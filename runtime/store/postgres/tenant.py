"""One scope's rows in a PostgreSQL store: every statement that reads or writes them.

A :class:`PgTenant` runs each call in a transaction of :meth:`PgDB.scoped`, which row-level
security confines to ``(user_id, agent_id)``; every statement also carries the explicit tenant
clause (so the planner uses the scope indexes, and isolation never rests on one mechanism alone).
Search (:mod:`.search`), forgetting (:mod:`.forget`) and the decision log (:mod:`.decisions`) are
built on this object.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from ...errors import EncoderMismatchError, ValidationError
from ...record.links import LinkKind, with_link, without_links
from ...record.memir import Flag, MemIR
from ..backend import LoggedDecision, ScopeLogs, ScopeRow, StoredRow
from ..filters import MemoryFilter
from ..row_codec import COLUMNS, N_COLUMNS, READ_COLS, body_json, record_to_row, row_to_record, ts, with_tags
from ..tiers import wanted_format
from ..write_checks import BatchNames, check_references, unique_ids
from .db import PgDB
from .vectors import VEC_COLS, columns, conform, stack, vector_array, vector_of

__all__ = ["PgTenant", "lock_rows", "retried", "vector_array"]

_INSERT_MEMORY = f"INSERT INTO memories({COLUMNS}) VALUES ({','.join(['%s'] * N_COLUMNS)}) RETURNING rowid"


F = TypeVar("F", bound=Callable[..., Any])

# `placeholder` in the record JSON's metadata.flags array (model_dump_json is compact; inside a JSON
# string every quote is escaped, so `"flags":[` can only be that array: attribute values are scalars)
_PLACEHOLDER_FLAG = r'"flags":\[[^]]*"placeholder"'


def retried(method: F) -> F:
    """Run a scope method again, whole, when its transaction loses a deadlock or a serialization
    conflict to another client (``PgDB.retrying``); inside an outer transaction it runs once."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.db.retrying(lambda: method(self, *args, **kwargs))
    return wrapper  # type: ignore[return-value]


def lock_rows(tenant: PgTenant, conn: Any, ids: Sequence[str]) -> None:
    """Lock the scope's rows with these ids in rowid order (before updating or deleting several):
    writers that all lock in one order cannot deadlock each other."""
    if ids:
        t, tp = tenant.clause()
        conn.execute(f"SELECT m.rowid FROM memories m WHERE {t} AND m.id = ANY(%s) ORDER BY m.rowid FOR UPDATE",
                     [*tp, list(ids)])


class PgTenant:
    """Reads and writes of one ``(user_id, agent_id)`` scope of a PostgreSQL store."""

    placeholder = "%s"  # the SQL dialect shared code writes in (runtime.store.decision_log)

    def __init__(self, db: PgDB, user_id: str, agent_id: str) -> None:
        self.db = db
        self.user_id = user_id
        self.agent_id = agent_id

    @contextmanager
    def tx(self) -> Iterator[Any]:
        """A transaction confined to this scope (nested uses join the outer one)."""
        with self.db.scoped(self.user_id, self.agent_id) as conn:
            yield conn

    def clause(self, alias: str = "m") -> tuple[str, list[Any]]:
        """The scope's SQL condition and parameters (row-level security enforces it as well)."""
        return f"{alias}.user_id = %s AND {alias}.agent_id = %s", [self.user_id, self.agent_id]

    def reading(self) -> AbstractContextManager[Any]:
        """A scoped transaction for statements that change nothing."""
        return self.tx()

    def conform(self, conn: Any, rowids: Sequence[int]) -> int:
        """Inside a transaction: re-encode the vectors of this scope's ``rowids`` into the format
        their tier calls for (:func:`.vectors.conform`); returns how many changed."""
        t, tp = self.clause()
        return conform(conn, self.db.cold_format, t, tp, rowids)

    # ------------------------------------------------------------------ per-scope state
    def state(self) -> ScopeRow:
        """The persisted state of the scope (defaults when it has never been written)."""
        with self.tx() as conn:
            row = conn.execute("SELECT seq, decision_seq, open_session, session_last_at FROM scopes "
                               "WHERE user_id = %s AND agent_id = %s", (self.user_id, self.agent_id)).fetchone()
        return ScopeRow(int(row[0]), int(row[1]), row[2], row[3]) if row else ScopeRow()

    @retried
    def set_session(self, session_id: str | None, last_at: float | None) -> None:
        """Record the open session and the time of its latest event."""
        with self.tx() as conn:
            conn.execute("INSERT INTO scopes(user_id, agent_id, open_session, session_last_at) VALUES (%s,%s,%s,%s) "
                         "ON CONFLICT (user_id, agent_id) DO UPDATE SET open_session = excluded.open_session, "
                         "session_last_at = excluded.session_last_at",
                         (self.user_id, self.agent_id, session_id, last_at))

    # ------------------------------------------------------------------ writes
    @retried
    def insert(self, records: Sequence[MemIR], vectors: Sequence[np.ndarray], *, batch: bool = False,
               session: tuple[str | None, float | None] | None = None,
               links: Sequence[tuple[str, str, LinkKind]] = ()) -> tuple[list[int], int]:
        """Insert records with their unit vectors in one transaction (see ``SqliteTenant.insert``).

        Returns:
            ``(write steps of the records, writes since the scope's last retention decision)``.
        """
        import psycopg

        names = BatchNames(batch)
        where, item = names.field, names.item
        ids = unique_ids(records, names)
        emb = self.db.embedder
        with self.tx() as conn:
            check_references(records, ids, self.existing_ids, names)
            sid, last_at = session if session is not None else (None, None)
            last, decided = conn.execute(
                "INSERT INTO scopes AS s (user_id, agent_id, seq, open_session, session_last_at) "
                "VALUES (%s,%s,%s,%s,%s) ON CONFLICT (user_id, agent_id) DO UPDATE SET seq = s.seq + excluded.seq, "
                "open_session = CASE WHEN %s THEN excluded.open_session ELSE s.open_session END, "
                "session_last_at = CASE WHEN %s THEN excluded.session_last_at ELSE s.session_last_at END "
                "RETURNING seq, decision_seq",
                (self.user_id, self.agent_id, len(records), sid, last_at, session is not None,
                 session is not None)).fetchone()
            first = int(last) - len(records) + 1
            with conn.cursor() as cur:
                rows = [record_to_row(r, first + j) for j, r in enumerate(records)]
                conn.execute("SAVEPOINT memir_insert")
                try:
                    cur.executemany(_INSERT_MEMORY, rows, returning=True)
                except psycopg.errors.UniqueViolation as e:  # ids are unique store-wide; this reveals only "taken"
                    conn.execute("ROLLBACK TO SAVEPOINT memir_insert")
                    j = _first_duplicate(conn, rows)
                    raise ValidationError(f"{item(j)}id {records[j].id!r} already exists; omit id to get a fresh one",
                                          field=where(j, "id")) from e
                rowids = _returned_rowids(cur)
                _insert_links(cur, list(zip(rowids, records)))
                cur.executemany("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (%s,%s,%s,%b)",
                                [(rowid, emb.encoder_id, emb.dim, np.asarray(v, np.float32))
                                 for rowid, v in zip(rowids, vectors)])
            if links:
                self._link(conn, links)
        return list(range(first, first + len(records))), int(last) - int(decided)

    def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` that exist in this scope."""
        if not ids:
            return set()
        t, tp = self.clause()
        with self.tx() as conn:
            return {r[0] for r in conn.execute(f"SELECT m.id FROM memories m WHERE {t} AND m.id = ANY(%s)",
                                               [*tp, list(ids)])}

    @retried
    def set_session_context(self, pairs: Sequence[tuple[str, np.ndarray]]) -> int:
        """Store session-context feature rows by memory id (replacing earlier ones); returns rows stored."""
        if not pairs:
            return 0
        t, tp = self.clause()
        with self.tx() as conn:
            cur = conn.execute(
                f"INSERT INTO memory_context(mem_rowid, features) SELECT m.rowid, x.f "
                f"FROM unnest(%s::text[], %s::bytea[]) AS x(id, f) JOIN memories m ON m.id = x.id WHERE {t} "
                f"ON CONFLICT (mem_rowid) DO UPDATE SET features = excluded.features",
                [[mid for mid, _ in pairs], [np.asarray(row, np.float64).tobytes() for _, row in pairs], *tp])
            return int(cur.rowcount)

    def session_context(self, ids: Sequence[str], width: int) -> np.ndarray:
        """Session-context feature rows of ``ids`` (row-aligned; NaN where the session is still open)."""
        out = np.full((len(ids), width), np.nan)
        if not ids:
            return out
        pos = {m: i for i, m in enumerate(ids)}
        t, tp = self.clause()
        with self.tx() as conn:
            for mid, blob in conn.execute(
                    f"SELECT m.id, c.features FROM memory_context c JOIN memories m ON m.rowid = c.mem_rowid "
                    f"WHERE {t} AND m.id = ANY(%s)", [*tp, list(ids)]):
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
        t, tp = self.clause()
        tier = ", tier = 'archive'" if archive else ""
        with self.tx() as conn:
            row = conn.execute(f"UPDATE memories m SET record = %s, retention_reason = %s{tier} WHERE {t} AND m.id = %s "
                               f"RETURNING m.rowid", [body_json(new), f"superseded_by:{new_id}", *tp, old_id]).fetchone()
            if archive and row is not None:
                self.conform(conn, [int(row[0])])

    @retried
    def add_tags(self, memory_ids: Sequence[str], tags: Sequence[str]) -> int:
        """Add ``tags`` to this scope's memories ``memory_ids`` (tag rows and the record's JSON body) in
        one transaction, rows locked in rowid order; returns how many memories gained a tag (see
        ``SqliteTenant.add_tags``). Other scopes' ids match nothing (tenant clause and row-level security)."""
        if not memory_ids or not tags:
            return 0
        changed = 0
        with self.tx() as conn:
            tag_rows: list[tuple[int, str]] = []
            for rowid, rec in self._locked(conn, memory_ids):
                tagged = with_tags(rec, list(tags))
                if tagged is None:
                    continue
                self._rewrite(conn, rowid, tagged)
                tag_rows += [(rowid, x) for x in tagged.metadata.tags[len(rec.metadata.tags):]]
                changed += 1
            if tag_rows:
                with conn.cursor() as cur:
                    cur.executemany("INSERT INTO memory_tags(mem_rowid, tag) VALUES (%s,%s) ON CONFLICT DO NOTHING",
                                    tag_rows)
        return changed

    def _link(self, conn: Any, links: Sequence[tuple[str, str, LinkKind]]) -> None:
        """Inside a write transaction: link stored memories to new ones, rows locked in rowid order
        (see ``SqliteTenant._link``)."""
        by_target: dict[str, list[tuple[str, LinkKind]]] = {}
        for target, new_id, kind in links:
            by_target.setdefault(target, []).append((new_id, kind))
        for rowid, rec in self._locked(conn, list(by_target)):
            for new_id, kind in by_target[rec.id]:
                rec = with_link(rec, new_id, kind)
            self._rewrite(conn, rowid, rec)

    def _locked(self, conn: Any, memory_ids: Sequence[str]) -> list[tuple[int, MemIR]]:
        """Inside a transaction: this scope's records ``memory_ids``, locked in rowid order (so
        concurrent rewriters never deadlock), with their rowids."""
        t, tp = self.clause()
        rows = conn.execute(f"SELECT m.rowid, {READ_COLS} FROM memories m WHERE {t} AND m.id = ANY(%s) "
                            f"ORDER BY m.rowid FOR UPDATE", [*tp, list(memory_ids)]).fetchall()
        return [(rowid, row_to_record(*rest)) for rowid, *rest in rows]

    def _rewrite(self, conn: Any, rowid: int, rec: MemIR) -> None:
        """Inside a transaction: store a changed record body (tags, links) under the tenant clause."""
        t, tp = self.clause()
        conn.execute(f"UPDATE memories m SET record = %s WHERE {t} AND m.rowid = %s", [body_json(rec), *tp, rowid])

    @retried
    def drop_links(self, memory_ids: Sequence[str], gone: Sequence[str]) -> int:
        """Remove the ids ``gone`` from the links of this scope's memories ``memory_ids`` in one
        transaction, rows locked in rowid order; returns how many changed (see ``SqliteTenant.drop_links``)."""
        if not memory_ids or not gone:
            return 0
        changed = 0
        with self.tx() as conn:
            for rowid, rec in self._locked(conn, memory_ids):
                new = without_links(rec, gone)
                if new is not None:
                    self._rewrite(conn, rowid, new)
                    changed += 1
        return changed

    @retried
    def touch(self, rowids: Sequence[int], now: datetime) -> None:
        """Count one access for each row (recall's usage update; one statement, one commit)."""
        if not rowids:
            return
        t, tp = self.clause()
        with self.tx() as conn:
            # rows locked in rowid order, as every multi-row writer here does: no lock cycles between them
            conn.execute(f"UPDATE memories m SET access_count = access_count + 1, last_accessed_at = %s "
                         f"WHERE m.rowid IN (SELECT x.rowid FROM memories x WHERE {t.replace('m.', 'x.')} "
                         f"AND x.rowid = ANY(%s) ORDER BY x.rowid FOR UPDATE)", [ts(now), *tp, [int(r) for r in rowids]])

    # ------------------------------------------------------------------ reads
    def get(self, memory_id: str) -> MemIR | None:
        """The record with this id in this scope, or ``None`` (also for other scopes' ids)."""
        t, tp = self.clause()
        with self.tx() as conn:
            row = conn.execute(f"SELECT {READ_COLS} FROM memories m WHERE {t} AND m.id = %s",
                               [*tp, memory_id]).fetchone()
        return None if row is None else row_to_record(*row)

    def export(self) -> list[tuple[MemIR, np.ndarray | None, str | None]]:
        """Every record of the scope (all tiers, expired included), oldest first, with its stored
        vector and the id of the encoder that made it."""
        t, tp = self.clause()
        with self.tx() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLS}, v.encoder_id, {VEC_COLS} FROM memories m "
                f"LEFT JOIN vectors v ON v.mem_rowid = m.rowid WHERE {t} ORDER BY m.seq, m.rowid", tp).fetchall()
        return [(row_to_record(*r[:5]), vector_of(*r[6:10]), r[5]) for r in rows]

    def expired_ids(self, now: datetime, tier: str = "archive") -> list[str]:
        """Ids of the scope's memories in ``tier`` whose TTL (``expires_at``) has passed at ``now``."""
        t, tp = self.clause()
        with self.tx() as conn:
            return [r[0] for r in conn.execute(
                f"SELECT m.id FROM memories m WHERE {t} AND m.expires_at IS NOT NULL AND m.expires_at <= %s "
                f"AND m.tier = %s", [*tp, now.timestamp(), tier])]

    def tier_of(self, memory_id: str) -> str | None:
        """``working`` / ``archive``, or ``None`` if the id is not in this scope."""
        t, tp = self.clause()
        with self.tx() as conn:
            row = conn.execute(f"SELECT tier FROM memories m WHERE {t} AND m.id = %s", [*tp, memory_id]).fetchone()
        return None if row is None else str(row[0])

    def promotable(self, memory_ids: Sequence[str], now: datetime) -> list[tuple[str, float | None]]:
        """Of ``memory_ids``, this scope's archived memories a recall may promote, with their stored
        utility, in the order given: not superseded versions (a memory of the scope links to them
        with ``supersedes``), not past their TTL at ``now`` (the next decision deletes those)."""
        if not memory_ids:
            return []
        t, tp = self.clause()
        with self.tx() as conn:
            found = {str(i): u for i, u in conn.execute(
                f"SELECT m.id, m.utility FROM memories m WHERE {t} AND m.id = ANY(%s) AND m.tier = 'archive' "
                f"AND (m.expires_at IS NULL OR m.expires_at > %s) "
                f"AND NOT EXISTS (SELECT 1 FROM memory_links l JOIN memories n ON n.rowid = l.mem_rowid "
                f"WHERE l.kind = 'supersedes' AND l.target_id = m.id AND {t.replace('m.', 'n.')})",
                [*tp, list(dict.fromkeys(memory_ids)), ts(now), *tp])}
        return [(m, None if found[m] is None else float(found[m]))
                for m in dict.fromkeys(memory_ids) if m in found]

    def select(self, flt: MemoryFilter, now: datetime, limit: int | None = None) -> list[MemIR]:
        """Records passing ``flt``, in write order."""
        where, params = flt.where(now, "%s")
        t, tp = self.clause()
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        with self.tx() as conn:
            rows = conn.execute(f"SELECT {READ_COLS} FROM memories m WHERE {t} AND {where} ORDER BY m.seq, m.rowid"
                                f"{lim}", tp + params).fetchall()
        return [row_to_record(*r) for r in rows]

    def count(self, flt: MemoryFilter, now: datetime) -> int:
        """How many records pass ``flt``."""
        where, params = flt.where(now, "%s")
        t, tp = self.clause()
        with self.tx() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {t} AND {where}", tp + params).fetchone()[0])

    def with_vectors(self, flt: MemoryFilter, now: datetime) -> tuple[list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors, write steps) of the rows passing ``flt``, in write order.

        Rows embedded by another encoder raise :class:`EncoderMismatchError`; rows deleted by another
        client in between are simply absent.
        """
        emb = self.db.embedder
        where, params = flt.where(now, "%s")
        t, tp = self.clause()
        with self.tx() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLS}, m.rowid, m.seq, v.mem_rowid, {VEC_COLS} FROM memories m LEFT JOIN vectors v "
                f"ON v.mem_rowid = m.rowid AND v.encoder_id = %s AND v.dim = %s WHERE {t} AND {where} "
                f"ORDER BY m.seq, m.rowid", [emb.encoder_id, emb.dim, *tp, *params]).fetchall()
            missing = [int(r[5]) for r in rows if r[7] is None]
            if missing:
                self.raise_if_mismatched(conn, missing)
                rows = [r for r in rows if r[7] is not None]
        recs = [row_to_record(*r[:5]) for r in rows]
        seqs = np.array([r[6] for r in rows], dtype=np.int64)
        return recs, stack([r[8:12] for r in rows], int(emb.dim)), seqs

    def raise_if_mismatched(self, conn: Any, rowids: Sequence[int]) -> None:
        """Raise :class:`EncoderMismatchError` if any of ``rowids`` still exists with a vector from
        another encoder (rows that no longer exist were deleted concurrently: not an error; a row
        with a vector of this encoder, hot or cold, is not missing)."""
        emb = self.db.embedder
        t, tp = self.clause()
        others = conn.execute(
            f"SELECT coalesce(v.encoder_id, '<none>'), count(*) FROM memories m LEFT JOIN vectors v "
            f"ON v.mem_rowid = m.rowid WHERE {t} AND m.rowid = ANY(%s) "
            f"AND (v.encoder_id IS NULL OR v.encoder_id != %s OR v.dim != %s) GROUP BY 1",
            [*tp, list(rowids), emb.encoder_id, emb.dim]).fetchall()
        if others:
            raise EncoderMismatchError(
                f"memories in this scope were embedded by {dict((k, int(n)) for k, n in others)}, but the store now "
                f"uses {emb.encoder_id!r}; run `memir reembed URL` (or store.reembed()) to re-encode them")

    def recent_vectors(self, n: int) -> np.ndarray:
        """Unit vectors of the scope's ``n`` most recent writes, any tier, oldest first
        (placeholders excluded: they are not what the conversation was about)."""
        emb = self.db.embedder
        t, tp = self.clause()
        with self.tx() as conn:
            # the flag is read from the record's text, never through ::jsonb: jsonb cannot hold the \u0000
            # escape a stored string may carry (an attribute value, a source_uri), and one such record
            # would make every recall of the scope fail
            rows = conn.execute(
                f"SELECT {VEC_COLS} FROM memories m JOIN vectors v ON v.mem_rowid = m.rowid AND v.encoder_id = %s "
                f"AND v.dim = %s WHERE {t} AND (strpos(m.record, '\"placeholder\"') = 0 OR m.record !~ %s) "
                f"ORDER BY m.seq DESC, m.rowid DESC LIMIT %s",
                [emb.encoder_id, emb.dim, *tp, _PLACEHOLDER_FLAG, int(n)]).fetchall()
        return stack(list(reversed(rows)), int(emb.dim))

    def working_count(self) -> int:
        """Memories in working memory (for the fill watermark)."""
        t, tp = self.clause()
        with self.tx() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {t} AND m.tier = 'working'",
                                    tp).fetchone()[0])

    def versions(self, memory_id: str) -> list[str]:
        """Every version of ``memory_id``'s fact linked by ``supersedes``, oldest first."""
        t, tp = self.clause()
        seen = {memory_id}
        frontier = [memory_id]
        with self.tx() as conn:
            while frontier:
                newer = conn.execute(
                    f"SELECT m.id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'supersedes' AND {t} AND l.target_id = ANY(%s)", [*tp, frontier]).fetchall()
                older = conn.execute(
                    f"SELECT l.target_id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'supersedes' AND {t} AND m.id = ANY(%s)", [*tp, frontier]).fetchall()
                frontier = [x for (x,) in newer + older if x not in seen]
                seen.update(frontier)
            order = conn.execute(f"SELECT m.id FROM memories m WHERE {t} AND m.id = ANY(%s) ORDER BY m.seq, m.rowid",
                                 [*tp, sorted(seen)]).fetchall()
        return [x for (x,) in order]

    # ------------------------------------------------------------------ semantic refresh
    def refresh_marks(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """The refresh marker (``memory_links`` kind ``refreshed``) of each of ``memory_ids`` that has one."""
        if not memory_ids:
            return {}
        t, tp = self.clause()
        with self.tx() as conn:
            return {str(m): str(x) for m, x in conn.execute(
                f"SELECT m.id, l.target_id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                f"WHERE l.kind = 'refreshed' AND {t} AND m.id = ANY(%s)", [*tp, list(memory_ids)])}

    @retried
    def put_refreshed(self, vectors: Sequence[tuple[str, np.ndarray]], mark: str) -> list[str]:
        """Replace the current encoder's vectors of these memories and set their refresh marker, in
        one transaction (all or nothing); returns the ids changed (memories deleted meanwhile are skipped)."""
        emb = self.db.embedder
        t, tp = self.clause()
        done: list[str] = []
        rowids: list[int] = []
        with self.tx() as conn:
            lock_rows(self, conn, [m for m, _ in vectors])
            for mid, vec in vectors:
                row = conn.execute(f"SELECT m.rowid FROM memories m WHERE {t} AND m.id = %s", [*tp, mid]).fetchone()
                if row is None:
                    continue
                cur = conn.execute("UPDATE vectors SET vec = %b, cold = NULL, fmt = 'float32' "
                                   "WHERE mem_rowid = %s AND encoder_id = %s AND dim = %s",
                                   (np.asarray(vec, np.float32), row[0], emb.encoder_id, emb.dim))
                if cur.rowcount != 1:
                    continue
                conn.execute("DELETE FROM memory_links WHERE mem_rowid = %s AND kind = 'refreshed'", (row[0],))
                conn.execute("INSERT INTO memory_links(mem_rowid, kind, target_id) VALUES (%s, 'refreshed', %s)",
                             (row[0], mark))
                done.append(mid)
                rowids.append(int(row[0]))
            self.conform(conn, rowids)  # archived ones back to the cold format
        return done

    # ------------------------------------------------------------------ recall log
    def log_recall(self, payload: dict[str, Any], at: datetime) -> None:
        """Append one explained recall to the scope's log."""
        with self.tx() as conn:
            conn.execute("INSERT INTO recall_log(at, payload) VALUES (%s,%s)", (at.timestamp(), json.dumps(payload)))

    def recall_log(self, limit: int) -> list[dict[str, Any]]:
        """The scope's most recent explained recalls, newest first."""
        t, tp = self.clause("r")
        with self.tx() as conn:
            rows = conn.execute(f"SELECT payload FROM recall_log r WHERE {t} ORDER BY id DESC LIMIT %s",
                                [*tp, int(limit)]).fetchall()
        return [json.loads(p) for (p,) in rows]

    # ------------------------------------------------------------------ copying a store
    def stored_rows(self, after_seq: int, limit: int) -> list[StoredRow]:
        """The scope's memories with ``seq > after_seq``, in seq order, exactly as stored."""
        t, tp = self.clause()
        with self.tx() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLS}, m.tier, m.seq, v.encoder_id, c.features, {VEC_COLS} FROM memories m "
                f"LEFT JOIN vectors v ON v.mem_rowid = m.rowid LEFT JOIN memory_context c ON c.mem_rowid = m.rowid "
                f"WHERE {t} AND m.seq > %s ORDER BY m.seq, m.rowid LIMIT %s",
                [*tp, int(after_seq), int(limit)]).fetchall()
        return [StoredRow(row_to_record(*r[:5]), str(r[5]), int(r[6]), vector_of(*r[9:13]), r[7],
                          None if r[8] is None else bytes(r[8])) for r in rows]

    @retried
    def restore_rows(self, rows: Sequence[StoredRow]) -> int:
        """Insert rows exactly as given (ids, seq, tier, usage, vectors), skipping ids already here;
        one transaction. The scope's write counter moves up to the highest seq. Returns rows inserted."""
        with self.tx() as conn, conn.cursor() as cur:
            have = self.existing_ids([r.record.id for r in rows])
            todo = [row for row in rows if row.record.id not in have]
            if todo:
                cur.executemany(_INSERT_MEMORY, [record_to_row(row.record, row.seq, row.tier) for row in todo],
                                returning=True)
                rowids = _returned_rowids(cur)
                pairs = list(zip(rowids, todo))
                _insert_links(cur, [(rid, row.record) for rid, row in pairs])
                cold = self.db.cold_format
                vecs = [(rid, row.encoder_id, int(row.vector.shape[0]), fmt, *columns(row.vector, fmt))
                        for rid, row in pairs if row.vector is not None
                        for fmt in (wanted_format(row.tier, cold),)]
                ctx = [(rid, row.context) for rid, row in pairs if row.context is not None]
                for sql, params in (
                        ("INSERT INTO vectors(mem_rowid, encoder_id, dim, fmt, vec, cold) VALUES (%s,%s,%s,%s,%s,%s)",
                         vecs),
                        ("INSERT INTO memory_context(mem_rowid, features) VALUES (%s,%s)", ctx)):
                    if params:
                        cur.executemany(sql, params)
            conn.execute("INSERT INTO scopes AS s (user_id, agent_id, seq) VALUES (%s,%s,%s) ON CONFLICT (user_id, "
                         "agent_id) DO UPDATE SET seq = greatest(s.seq, excluded.seq)",
                         (self.user_id, self.agent_id, max((row.seq for row in rows), default=0)))
        return len(todo)

    def logs(self) -> ScopeLogs:
        """The scope's state, decision log (with items) and recall log, in the order written."""
        t, tp = self.clause("d")
        with self.tx() as conn:
            heads = conn.execute(f"SELECT id, decision_id, at, payload FROM decisions d WHERE {t} ORDER BY id",
                                 tp).fetchall()
            items: dict[int, list[tuple[str, bool, str, str]]] = {}
            for rid, m, k, reason, p in conn.execute(
                    "SELECT decision_rowid, memory_id, kept, reason, payload FROM decision_items "
                    "WHERE decision_rowid = ANY(%s) ORDER BY memory_id", ([h[0] for h in heads],)):
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
        with self.tx() as conn, conn.cursor() as cur:
            if conn.execute(f"SELECT 1 FROM decisions d WHERE {t} UNION ALL SELECT 1 FROM recall_log d WHERE {t} "
                            f"LIMIT 1", tp + tp).fetchone():
                return False
            for d in logs.decisions:
                rowid = conn.execute("INSERT INTO decisions(decision_id, at, payload) VALUES (%s,%s,%s) RETURNING id",
                                     (d.decision_id, d.at, d.head)).fetchone()[0]
                if d.items:
                    cur.executemany("INSERT INTO decision_items(decision_rowid, memory_id, kept, reason, payload) "
                                    "VALUES (%s,%s,%s,%s,%s)", [(rowid, m, k, r, p) for m, k, r, p in d.items])
            if logs.recalls:
                cur.executemany("INSERT INTO recall_log(at, payload) VALUES (%s,%s)", logs.recalls)
            st = logs.state
            conn.execute("INSERT INTO scopes AS s (user_id, agent_id, seq, decision_seq, open_session, session_last_at) "
                         "VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (user_id, agent_id) DO UPDATE SET "
                         "seq = greatest(s.seq, excluded.seq), decision_seq = excluded.decision_seq, "
                         "open_session = excluded.open_session, session_last_at = excluded.session_last_at",
                         (self.user_id, self.agent_id, st.seq, st.decision_seq, st.open_session, st.session_last_at))
        return True

def _insert_links(cur: Any, rows: list[tuple[int, MemIR]]) -> None:
    """New rows' tags, parents (``derived_from``) and ``supersedes`` links, in three batched statements."""
    tags = [(rid, t) for rid, r in rows for t in r.metadata.tags]
    parents = [(rid, p) for rid, r in rows for p in r.provenance.derived_from]
    links = [(rid, sup) for rid, r in rows if isinstance(sup := r.metadata.attributes.get("supersedes"), str)]
    for sql, params in (
            ("INSERT INTO memory_tags(mem_rowid, tag) VALUES (%s,%s) ON CONFLICT DO NOTHING", tags),
            ("INSERT INTO memory_parents(mem_rowid, parent_id) VALUES (%s,%s) ON CONFLICT DO NOTHING", parents),
            ("INSERT INTO memory_links(mem_rowid, kind, target_id) VALUES (%s,'supersedes',%s) ON CONFLICT DO NOTHING",
             links)):
        if params:
            cur.executemany(sql, params)


def _returned_rowids(cur: Any) -> list[int]:
    """The ``RETURNING rowid`` of every statement of an ``executemany(..., returning=True)``."""
    out = []
    while True:
        out.append(int(cur.fetchone()[0]))
        if not cur.nextset():
            return out


def _first_duplicate(conn: Any, rows: list[tuple[Any, ...]]) -> int:
    """Index of the first row whose id is taken (inserted one at a time, each undone; another
    scope's rows are invisible under row-level security, so the unique index is the only witness)."""
    import psycopg

    for j, row in enumerate(rows):
        conn.execute("SAVEPOINT memir_probe")
        try:
            conn.execute(_INSERT_MEMORY, row)
        except psycopg.errors.UniqueViolation:
            conn.execute("ROLLBACK TO SAVEPOINT memir_probe")
            return j
        conn.execute("ROLLBACK TO SAVEPOINT memir_probe")
    return 0
