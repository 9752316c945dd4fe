"""One scope's rows in an SQLite store: every statement that reads or writes them.

A :class:`SqliteTenant` binds ``(user_id, agent_id)`` into every statement it runs (the *tenant
clause*); nothing outside this package writes SQL against a scope's rows. Statements run through
the owning :class:`~runtime.store.sqlite.db.SqliteDB`, under its lock, in its transactions.
Search (:mod:`.search`), forgetting (:mod:`.forget`) and the decision log (:mod:`.decisions`) are
separate concepts built on this object's public methods.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np

from ...errors import EncoderMismatchError, ValidationError
from ...record.links import LinkKind, with_link, without_links
from ...record.memir import Flag, MemIR
from .. import tiers
from ..backend import LoggedDecision, ScopeLogs, ScopeRow, StoredRow
from ..filters import MemoryFilter
from ..row_codec import COLUMNS, N_COLUMNS, READ_COLS, body_json, record_to_row, row_to_record, ts, with_tags
from ..write_checks import BatchNames, check_references, unique_ids
from . import vectors as _vectors
from .db import SqliteDB

__all__ = ["SqliteTenant"]

_INSERT_MEMORY = f"INSERT INTO memories({COLUMNS}) VALUES ({','.join('?' * N_COLUMNS)})"


class SqliteTenant:
    """Reads and writes of one ``(user_id, agent_id)`` scope. Get one from ``SqliteDB``'s store."""

    placeholder = "?"  # the SQL dialect shared code writes in (runtime.store.decision_log)

    def __init__(self, db: SqliteDB, user_id: str, agent_id: str) -> None:
        self.db = db
        self.user_id = user_id
        self.agent_id = agent_id

    # ------------------------------------------------------------------ the tenant clause
    def clause(self, alias: str = "m", *, check_only: bool = False) -> tuple[str, list[Any]]:
        """The scope's SQL condition and parameters. ``check_only`` for statements that locate rows
        by id/rowid: the unary ``+`` keeps SQLite from using a (user_id, agent_id, …) index for
        them, which without table statistics it prefers, turning a 10-row lookup into a scan."""
        p = "+" if check_only else ""
        return f"{p}{alias}.user_id = ? AND {p}{alias}.agent_id = ?", [self.user_id, self.agent_id]

    def reading(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection for statements that change nothing (under the store's lock)."""
        return self.db.read()

    # ------------------------------------------------------------------ per-scope state
    def state(self) -> ScopeRow:
        """The persisted state of the scope (defaults when it has never been written)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT seq, decision_seq, open_session, session_last_at FROM scopes "
                               "WHERE user_id=? AND agent_id=?", (self.user_id, self.agent_id)).fetchone()
        return ScopeRow(*row) if row else ScopeRow()

    def set_session(self, session_id: str | None, last_at: float | None) -> None:
        """Record the open session and the time of its latest event."""
        with self.db.transaction() as conn:
            self._ensure_state(conn)
            conn.execute("UPDATE scopes SET open_session=?, session_last_at=? WHERE user_id=? AND agent_id=?",
                         (session_id, last_at, self.user_id, self.agent_id))

    def _ensure_state(self, conn: sqlite3.Connection) -> None:
        conn.execute("INSERT OR IGNORE INTO scopes(user_id, agent_id) VALUES (?, ?)", (self.user_id, self.agent_id))

    # ------------------------------------------------------------------ writes
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
        where, item = names.field, names.item
        ids = unique_ids(records, names)
        emb = self.db.embedder
        with self.db.transaction() as conn:
            check_references(records, ids, self.existing_ids, names)
            # One statement for the scope's state: its write counter, and the open session.
            sid, last_at = session if session is not None else (None, None)
            last, decided = conn.execute(
                "INSERT INTO scopes(user_id, agent_id, seq, open_session, session_last_at) VALUES (?,?,?,?,?) "
                "ON CONFLICT(user_id, agent_id) DO UPDATE SET seq = seq + excluded.seq, "
                "open_session = CASE WHEN ? THEN excluded.open_session ELSE open_session END, "
                "session_last_at = CASE WHEN ? THEN excluded.session_last_at ELSE session_last_at END "
                "RETURNING seq, decision_seq",
                (self.user_id, self.agent_id, len(records), sid, last_at, session is not None,
                 session is not None)).fetchone()
            first = last - len(records) + 1
            for j, (r, v) in enumerate(zip(records, vectors)):
                try:
                    rowid = conn.execute(_INSERT_MEMORY, record_to_row(r, first + j)).lastrowid
                except sqlite3.IntegrityError as e:  # ids are unique store-wide; this reveals only "taken"
                    raise ValidationError(f"{item(j)}id {r.id!r} already exists; omit id to get a fresh one",
                                          field=where(j, "id")) from e
                _insert_links(conn, rowid, r)
                conn.execute("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                             (rowid, emb.encoder_id, emb.dim, np.asarray(v, np.float32).tobytes()))
            if links:
                self._link(conn, links)
        return list(range(first, first + len(records))), int(last - decided)

    def existing_ids(self, ids: Sequence[str], *, any_scope: bool = False) -> set[str]:
        """The subset of ``ids`` that exist in this scope (``any_scope``: anywhere; uniqueness is
        store-wide, and this reveals nothing but "taken")."""
        out: set[str] = set()
        with self.db.read() as conn:
            for i in range(0, len(ids), 500):
                chunk = list(ids[i:i + 500])
                marks = ",".join("?" * len(chunk))
                if any_scope:
                    q, p = f"SELECT id FROM memories WHERE id IN ({marks})", chunk
                else:
                    t, tp = self.clause("memories", check_only=True)
                    q, p = f"SELECT id FROM memories WHERE {t} AND id IN ({marks})", tp + chunk
                out.update(r[0] for r in conn.execute(q, p))
        return out

    def set_session_context(self, pairs: Sequence[tuple[str, np.ndarray]]) -> int:
        """Store session-context feature rows by memory id (replacing earlier ones); returns rows stored."""
        t, tp = self.clause(check_only=True)
        with self.db.transaction() as conn:
            cur = conn.executemany(
                f"INSERT OR REPLACE INTO memory_context(mem_rowid, features) "
                f"SELECT m.rowid, ? FROM memories m WHERE {t} AND m.id = ?",
                [(np.asarray(row, np.float64).tobytes(), *tp, mid) for mid, row in pairs])
            return int(cur.rowcount)

    def session_context(self, ids: Sequence[str], width: int) -> np.ndarray:
        """Session-context feature rows of ``ids`` (row-aligned; NaN where the session is still open)."""
        out = np.full((len(ids), width), np.nan)
        pos = {m: i for i, m in enumerate(ids)}
        t, tp = self.clause(check_only=True)
        with self.db.read() as conn:
            for s in range(0, len(ids), 500):
                chunk = list(ids[s:s + 500])
                for mid, blob in conn.execute(
                        f"SELECT m.id, c.features FROM memory_context c JOIN memories m ON m.rowid = c.mem_rowid "
                        f"WHERE {t} AND m.id IN ({','.join('?' * len(chunk))})", tp + chunk):
                    row = np.frombuffer(blob, dtype=np.float64)
                    if row.shape[0] == width:
                        out[pos[mid]] = row
        return out

    def mark_superseded(self, old_id: str, new_id: str, *, archive: bool) -> None:
        """Flag ``old_id`` as superseded by ``new_id`` (and move it to the archive tier)."""
        old = self.get(old_id)
        if old is None:
            return
        flags = sorted(set(old.metadata.flags) | {Flag.superseded}, key=lambda f: f.value)
        new = old.model_copy(update={"metadata": old.metadata.model_copy(update={"flags": flags})})
        body = body_json(new)
        t, tp = self.clause("memories", check_only=True)
        tier = ", tier = 'archive'" if archive else ""
        with self.db.transaction() as conn:
            conn.execute(f"UPDATE memories SET record = ?, retention_reason = ?{tier} WHERE {t} AND id = ?",
                         (body, f"superseded_by:{new_id}", *tp, old_id))
            if archive:
                self.conform_vectors(conn, [old_id])

    def add_tags(self, memory_ids: Sequence[str], tags: Sequence[str]) -> int:
        """Add ``tags`` to this scope's memories ``memory_ids`` (the tag rows and the record's JSON
        body), in one transaction; returns how many memories gained at least one tag. Ids of other
        scopes match nothing (the tenant clause). The tag filter's cache reloads (epoch bump)."""
        if not memory_ids or not tags:
            return 0
        changed = 0
        with self.db.transaction() as conn:
            for rowid, rec in self._records(conn, memory_ids):
                tagged = with_tags(rec, list(tags))
                if tagged is None:
                    continue
                self._rewrite(conn, rowid, tagged)
                conn.executemany("INSERT OR IGNORE INTO memory_tags(mem_rowid, tag) VALUES (?,?)",
                                 [(rowid, x) for x in tagged.metadata.tags[len(rec.metadata.tags):]])
                changed += 1
            if changed:
                self.db.bump_vector_epoch(conn)
        return changed

    def _link(self, conn: sqlite3.Connection, links: Sequence[tuple[str, str, LinkKind]]) -> None:
        """Inside a write transaction: each ``(stored id, new id, kind)`` links the stored memory of this
        scope to the new one (``runtime.record.links.with_link``; the JSON body only, so the caches
        keep their epoch). Other scopes' ids match nothing."""
        by_target: dict[str, list[tuple[str, LinkKind]]] = {}
        for target, new_id, kind in links:
            by_target.setdefault(target, []).append((new_id, kind))
        for rowid, rec in self._records(conn, list(by_target)):
            for new_id, kind in by_target[rec.id]:
                rec = with_link(rec, new_id, kind)
            self._rewrite(conn, rowid, rec)

    def _records(self, conn: sqlite3.Connection, memory_ids: Sequence[str]) -> list[tuple[int, MemIR]]:
        """Inside a transaction: this scope's records ``memory_ids`` with their rowids (500 ids a query)."""
        t, tp = self.clause(check_only=True)
        out: list[tuple[int, MemIR]] = []
        for i in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[i:i + 500])
            rows = conn.execute(f"SELECT m.rowid, {READ_COLS} FROM memories m WHERE {t} "
                                f"AND m.id IN ({','.join('?' * len(chunk))})", tp + chunk).fetchall()
            out += [(rowid, row_to_record(*rest)) for rowid, *rest in rows]
        return out

    @staticmethod
    def _rewrite(conn: sqlite3.Connection, rowid: int, rec: MemIR) -> None:
        """Inside a transaction: store a changed record body (tags, links) of a row this scope read."""
        conn.execute("UPDATE memories SET record = ? WHERE rowid = ?", (body_json(rec), rowid))

    def drop_links(self, memory_ids: Sequence[str], gone: Sequence[str]) -> int:
        """Remove the ids ``gone`` from the links of this scope's memories ``memory_ids`` (``related`` and
        the link attributes; ``runtime.record.links.without_links``) in one transaction; returns how many changed."""
        if not memory_ids or not gone:
            return 0
        changed = 0
        with self.db.transaction() as conn:
            for rowid, rec in self._records(conn, memory_ids):
                new = without_links(rec, gone)
                if new is not None:
                    self._rewrite(conn, rowid, new)
                    changed += 1
        return changed

    def touch(self, rowids: Sequence[int], now: datetime) -> None:
        """Count one access for each row (recall's usage update; one statement, one commit)."""
        if not rowids:
            return
        t, tp = self.clause("memories", check_only=True)
        with self.db.read() as conn:
            conn.execute(f"UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? "
                         f"WHERE {t} AND rowid IN ({','.join('?' * len(rowids))})", [ts(now), *tp, *rowids])

    # ------------------------------------------------------------------ reads
    def get(self, memory_id: str) -> MemIR | None:
        """The record with this id in this scope, or ``None`` (also for other scopes' ids)."""
        t, tp = self.clause()
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {READ_COLS} FROM memories m WHERE {t} AND m.id = ?",
                               tp + [memory_id]).fetchone()
        return None if row is None else row_to_record(*row)

    def export(self) -> list[tuple[MemIR, np.ndarray | None, str | None]]:
        """Every record of the scope (all tiers, expired included), oldest first, with its stored
        vector and the id of the encoder that made it (an export needs no encoder; it never re-embeds)."""
        t, tp = self.clause()
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLS}, v.vec, v.encoder_id, v.dim, v.fmt FROM memories m "
                f"LEFT JOIN vectors v ON v.mem_rowid = m.rowid WHERE {t} ORDER BY m.seq", tp).fetchall()
        return [(row_to_record(*r[:5]), None if r[5] is None else tiers.decode(r[5], r[8], int(r[7])), r[6])
                for r in rows]

    def expired_ids(self, now: datetime, tier: str = "archive") -> list[str]:
        """Ids of the scope's memories in ``tier`` whose TTL (``expires_at``) has passed at ``now``."""
        t, tp = self.clause()
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(
                f"SELECT m.id FROM memories m INDEXED BY ix_mem_scope_expiry WHERE {t} AND m.expires_at IS NOT NULL "
                f"AND m.expires_at <= ? AND m.tier = ?", tp + [now.timestamp(), tier])]

    def tier_of(self, memory_id: str) -> str | None:
        """``working`` / ``archive``, or ``None`` if the id is not in this scope."""
        t, tp = self.clause()
        with self.db.read() as conn:
            row = conn.execute(f"SELECT tier FROM memories m WHERE {t} AND m.id = ?", tp + [memory_id]).fetchone()
        return None if row is None else str(row[0])

    def promotable(self, memory_ids: Sequence[str], now: datetime) -> list[tuple[str, float | None]]:
        """Of ``memory_ids``, the scope's archived memories a recall may promote, with their stored
        utility: not superseded versions (a newer memory of the scope links to them), not past their
        TTL at ``now`` (the next decision deletes those)."""
        if not memory_ids:
            return []
        t, tp = self.clause(check_only=True)
        t2, tp2 = self.clause("n", check_only=True)
        with self.db.read() as conn:
            rows = dict((r[0], r[1]) for r in conn.execute(
                f"SELECT m.id, m.utility FROM memories m WHERE {t} AND m.tier = 'archive' "
                f"AND (m.expires_at IS NULL OR m.expires_at > ?) "
                f"AND m.id IN ({','.join('?' * len(memory_ids))}) AND NOT EXISTS (SELECT 1 FROM memory_links l "
                f"JOIN memories n ON n.rowid = l.mem_rowid WHERE l.kind = 'supersedes' AND l.target_id = m.id "
                f"AND {t2})", tp + [ts(now)] + list(memory_ids) + tp2))
        return [(m, rows[m]) for m in dict.fromkeys(memory_ids) if m in rows]

    def conform_vectors(self, conn: sqlite3.Connection, memory_ids: Sequence[str]) -> int:
        """Inside a write transaction: store the vectors of these memories of the scope in the format
        their tier calls for (:mod:`runtime.store.tiers`). Returns how many changed."""
        t, tp = self.clause(check_only=True)
        n = 0
        for i in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[i:i + 500])
            n += _vectors.conform(conn, self.db.cold_format, f"{t} AND m.id IN ({','.join('?' * len(chunk))})",
                                  tp + chunk)
        return n

    def _rows(self, flt: MemoryFilter, now: datetime, limit: int | None, extra: str = "") -> list[tuple[Any, ...]]:
        where, params = flt.where(now)
        t, tp = self.clause()
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        with self.db.read() as conn:
            return conn.execute(f"SELECT {READ_COLS}{extra} FROM memories m WHERE {t} AND {where} ORDER BY m.seq{lim}",
                                tp + params).fetchall()

    def select(self, flt: MemoryFilter, now: datetime, limit: int | None = None) -> list[MemIR]:
        """Records passing ``flt``, in write order."""
        return [row_to_record(*r) for r in self._rows(flt, now, limit)]

    def count(self, flt: MemoryFilter, now: datetime) -> int:
        """How many records pass ``flt``."""
        where, params = flt.where(now)
        t, tp = self.clause()
        with self.db.read() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {t} AND {where}", tp + params).fetchone()[0])

    def with_vectors(self, flt: MemoryFilter, now: datetime) -> tuple[list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors, write steps) of the rows passing ``flt``, in write order.

        Rows embedded by another encoder raise :class:`EncoderMismatchError` (placeholders keep a
        vector of their own text, so every row has one).
        """
        emb = self.db.embedder
        where, params = flt.where(now)
        t, tp = self.clause()
        # One read for records and vectors (not the recall cache: a decision's working set is small,
        # and the cache would reload the whole scope after every change to a tier).
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLS}, m.rowid, m.seq, v.vec, v.fmt FROM memories m LEFT JOIN vectors v "
                f"ON v.mem_rowid = m.rowid AND v.encoder_id = ? AND v.dim = ? WHERE {t} AND {where} ORDER BY m.seq",
                [emb.encoder_id, emb.dim, *tp, *params]).fetchall()
        missing = np.array([r[5] for r in rows if r[7] is None], dtype=np.int64)
        if len(missing):
            self.raise_if_mismatched(missing)  # rows without a vector of this encoder
            rows = [r for r in rows if r[7] is not None]
        recs = [row_to_record(*r[:5]) for r in rows]
        seqs = np.array([r[6] for r in rows], dtype=np.int64)
        return recs, tiers.decode_rows([(r[7], r[8]) for r in rows], emb.dim), seqs

    def vectors_of(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found rowids, unit vectors) from the scope's vector cache (call under ``db.lock``).

        ``PRAGMA data_version`` only moves when *another* connection commits, so rows this
        connection wrote since the last load are picked up here: on a miss, load what is newer and
        look again."""
        cache = self.db.vector_cache(self.user_id, self.agent_id)
        found, mat = cache.lookup(rowids)
        if len(found) != len(rowids):
            with self.db.read() as conn:
                cache.load_since(conn)
            found, mat = cache.lookup(rowids)
        return found, mat

    def raise_if_mismatched(self, rowids: np.ndarray) -> None:
        """Raise :class:`EncoderMismatchError` if any of ``rowids`` still exists with a vector from
        another encoder (rows that no longer exist were deleted concurrently: not an error)."""
        if not len(rowids):
            return
        emb = self.db.embedder
        t, tp = self.clause(check_only=True)
        marks = ",".join("?" * len(rowids))
        with self.db.read() as conn:
            others = conn.execute(
                f"SELECT coalesce(v.encoder_id, '<none>'), count(*) FROM memories m LEFT JOIN vectors v "
                f"ON v.mem_rowid = m.rowid WHERE {t} AND m.rowid IN ({marks}) "
                f"AND (v.encoder_id IS NULL OR v.encoder_id != ? OR v.dim != ?) GROUP BY 1",
                tp + [int(x) for x in rowids] + [emb.encoder_id, emb.dim]).fetchall()
        if others:
            raise EncoderMismatchError(
                f"memories in this scope were embedded by {dict(others)}, but the store now uses "
                f"{emb.encoder_id!r}; run `memir reembed DB` (or store.reembed()) to re-encode them")

    def recent_vectors(self, n: int) -> np.ndarray:
        """Unit vectors of the scope's ``n`` most recent writes, any tier, oldest first
        (placeholders excluded: they are not what the conversation was about)."""
        emb = self.db.embedder
        t, tp = self.clause()
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT v.vec, v.fmt FROM memories m INDEXED BY ix_mem_scope JOIN vectors v ON v.mem_rowid = m.rowid "
                f"AND v.encoder_id = ? AND v.dim = ? WHERE {t} "
                f"AND json_extract(m.record, '$.metadata.flags') NOT LIKE '%placeholder%' "
                f"ORDER BY m.rowid DESC LIMIT ?",  # rowid order = write order
                [emb.encoder_id, emb.dim, *tp, int(n)]).fetchall()
        if not rows:
            return np.zeros((0, emb.dim), np.float32)
        return tiers.decode_rows([(r[0], r[1]) for r in reversed(rows)], emb.dim)

    def working_count(self) -> int:
        """Memories in working memory (for the fill watermark)."""
        t, tp = self.clause()
        with self.db.read() as conn:
            return int(conn.execute(f"SELECT count(*) FROM memories m INDEXED BY ix_mem_scope_tier "
                                    f"WHERE {t} AND m.tier = 'working'", tp).fetchone()[0])

    def versions(self, memory_id: str) -> list[str]:
        """Every version of ``memory_id``'s fact linked by ``supersedes``, oldest first."""
        t, tp = self.clause(check_only=True)
        seen = {memory_id}
        frontier = [memory_id]
        with self.db.read() as conn:
            while frontier:
                marks = ",".join("?" * len(frontier))
                newer = conn.execute(
                    f"SELECT m.id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'supersedes' AND {t} AND l.target_id IN ({marks})", tp + frontier).fetchall()
                older = conn.execute(
                    f"SELECT l.target_id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'supersedes' AND {t} AND m.id IN ({marks})", tp + frontier).fetchall()
                frontier = [x for (x,) in newer + older if x not in seen]
                seen.update(frontier)
            marks = ",".join("?" * len(seen))
            t2, tp2 = self.clause(check_only=True)
            order = conn.execute(f"SELECT m.id FROM memories m WHERE {t2} AND m.id IN ({marks}) ORDER BY m.seq",
                                 tp2 + sorted(seen)).fetchall()
        return [x for (x,) in order]

    # ------------------------------------------------------------------ semantic refresh
    def refresh_marks(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """The refresh marker (``memory_links`` kind ``refreshed``) of each of ``memory_ids`` that has one."""
        out: dict[str, str] = {}
        t, tp = self.clause(check_only=True)
        with self.db.read() as conn:
            for s in range(0, len(memory_ids), 500):
                chunk = list(memory_ids[s:s + 500])
                out.update(conn.execute(
                    f"SELECT m.id, l.target_id FROM memory_links l JOIN memories m ON m.rowid = l.mem_rowid "
                    f"WHERE l.kind = 'refreshed' AND {t} AND m.id IN ({','.join('?' * len(chunk))})",
                    tp + chunk).fetchall())
        return out

    def put_refreshed(self, vectors: Sequence[tuple[str, np.ndarray]], mark: str) -> list[str]:
        """Replace the current encoder's vectors of these memories and set their refresh marker, in
        one transaction (all or nothing); returns the ids changed (memories deleted meanwhile are skipped)."""
        emb = self.db.embedder
        t, tp = self.clause(check_only=True)
        done: list[str] = []
        with self.db.transaction() as conn:
            for mid, vec in vectors:
                row = conn.execute(f"SELECT m.rowid FROM memories m WHERE {t} AND m.id = ?", tp + [mid]).fetchone()
                if row is None:
                    continue
                cur = conn.execute("UPDATE vectors SET vec = ?, fmt = 'float32' WHERE mem_rowid = ? AND encoder_id = ? "
                                   "AND dim = ?", (np.asarray(vec, np.float32).tobytes(), row[0], emb.encoder_id, emb.dim))
                if cur.rowcount != 1:
                    continue
                conn.execute("DELETE FROM memory_links WHERE mem_rowid = ? AND kind = 'refreshed'", (row[0],))
                conn.execute("INSERT INTO memory_links(mem_rowid, kind, target_id) VALUES (?, 'refreshed', ?)",
                             (row[0], mark))
                done.append(mid)
            if done:
                self.conform_vectors(conn, done)  # archived ones back to the cold format
                self.db.bump_vector_epoch(conn)
        return done

    # ------------------------------------------------------------------ recall log
    def log_recall(self, payload: dict[str, Any], at: datetime) -> None:
        """Append one explained recall to the scope's log."""
        with self.db.read() as conn:
            conn.execute("INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES (?,?,?,?)",
                         (self.user_id, self.agent_id, at.timestamp(), json.dumps(payload)))

    def recall_log(self, limit: int) -> list[dict[str, Any]]:
        """The scope's most recent explained recalls, newest first."""
        t, tp = self.clause("recall_log")
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT payload FROM recall_log WHERE {t} ORDER BY id DESC LIMIT ?",
                                tp + [int(limit)]).fetchall()
        return [json.loads(p) for (p,) in rows]

    # ------------------------------------------------------------------ copying a store
    def stored_rows(self, after_seq: int, limit: int) -> list[StoredRow]:
        """The scope's memories with ``seq > after_seq``, in seq order, exactly as stored."""
        t, tp = self.clause()
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {READ_COLS}, m.tier, m.seq, v.vec, v.encoder_id, v.dim, c.features, v.fmt FROM memories m "
                f"LEFT JOIN vectors v ON v.mem_rowid = m.rowid LEFT JOIN memory_context c ON c.mem_rowid = m.rowid "
                f"WHERE {t} AND m.seq > ? ORDER BY m.seq, m.rowid LIMIT ?", tp + [int(after_seq), int(limit)]).fetchall()
        return [StoredRow(row_to_record(*r[:5]), str(r[5]), int(r[6]),
                          None if r[7] is None else tiers.decode(r[7], r[11], int(r[9])),
                          r[8], None if r[10] is None else bytes(r[10])) for r in rows]

    def restore_rows(self, rows: Sequence[StoredRow]) -> int:
        """Insert rows exactly as given (ids, seq, tier, usage, vectors), skipping ids already here;
        one transaction. The scope's write counter moves up to the highest seq. Returns rows inserted."""
        with self.db.transaction() as conn:
            have = self.existing_ids([r.record.id for r in rows])
            for row in rows:
                r = row.record
                if r.id in have:
                    continue
                rowid = conn.execute(_INSERT_MEMORY, record_to_row(r, row.seq, row.tier)).lastrowid
                _insert_links(conn, rowid, r)
                if row.vector is not None:
                    conn.execute("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                                 (rowid, row.encoder_id, int(row.vector.shape[0]),
                                  np.asarray(row.vector, np.float32).tobytes()))
                if row.context is not None:
                    conn.execute("INSERT INTO memory_context(mem_rowid, features) VALUES (?,?)", (rowid, row.context))
            self.conform_vectors(conn, [row.record.id for row in rows if row.tier == "archive"
                                        and row.record.id not in have])
            top = max((row.seq for row in rows), default=0)
            self._ensure_state(conn)
            conn.execute("UPDATE scopes SET seq = max(seq, ?) WHERE user_id=? AND agent_id=?",
                         (top, self.user_id, self.agent_id))
        return sum(1 for row in rows if row.record.id not in have)

    def logs(self) -> ScopeLogs:
        """The scope's state, decision log (with items) and recall log, in the order written."""
        t, tp = self.clause("d")
        with self.db.read() as conn:
            heads = conn.execute(f"SELECT id, decision_id, at, payload FROM decisions d WHERE {t} ORDER BY id",
                                 tp).fetchall()
            decisions = [LoggedDecision(did, float(at), head, [
                (m, bool(k), reason, p) for m, k, reason, p in conn.execute(
                    "SELECT memory_id, kept, reason, payload FROM decision_items WHERE decision_rowid = ? "
                    "ORDER BY memory_id", (rowid,))]) for rowid, did, at, head in heads]
            t2, tp2 = self.clause("r")
            recalls = [(float(at), p) for at, p in conn.execute(
                f"SELECT at, payload FROM recall_log r WHERE {t2} ORDER BY id", tp2)]
        return ScopeLogs(self.state(), decisions, recalls)

    def restore_logs(self, logs: ScopeLogs) -> bool:
        """Write the logs and the scope state in one transaction, unless this scope already has a
        decision or recall logged (then nothing; returns whether it wrote)."""
        t, tp = self.clause("d")
        with self.db.transaction() as conn:
            if conn.execute(f"SELECT 1 FROM decisions d WHERE {t} UNION ALL SELECT 1 FROM recall_log d WHERE {t} "
                            f"LIMIT 1", tp + tp).fetchone():
                return False
            for d in logs.decisions:
                rowid = conn.execute("INSERT INTO decisions(decision_id, user_id, agent_id, at, payload) "
                                     "VALUES (?,?,?,?,?)", (d.decision_id, self.user_id, self.agent_id, d.at,
                                                            d.head)).lastrowid
                conn.executemany("INSERT INTO decision_items(decision_rowid, memory_id, kept, reason, payload) "
                                 "VALUES (?,?,?,?,?)", [(rowid, m, int(k), r, p) for m, k, r, p in d.items])
            conn.executemany("INSERT INTO recall_log(user_id, agent_id, at, payload) VALUES (?,?,?,?)",
                             [(self.user_id, self.agent_id, at, p) for at, p in logs.recalls])
            self._ensure_state(conn)
            st = logs.state
            conn.execute("UPDATE scopes SET seq = max(seq, ?), decision_seq = ?, open_session = ?, "
                         "session_last_at = ? WHERE user_id=? AND agent_id=?",
                         (st.seq, st.decision_seq, st.open_session, st.session_last_at, self.user_id, self.agent_id))
        return True


def _insert_links(conn: sqlite3.Connection, rowid: int | None, r: MemIR) -> None:
    """A new row's tags, parents (``derived_from``) and ``supersedes`` link."""
    if r.metadata.tags:
        conn.executemany("INSERT OR IGNORE INTO memory_tags(mem_rowid, tag) VALUES (?,?)",
                         [(rowid, t) for t in r.metadata.tags])
    if r.provenance.derived_from:
        conn.executemany("INSERT OR IGNORE INTO memory_parents(mem_rowid, parent_id) VALUES (?,?)",
                         [(rowid, p) for p in r.provenance.derived_from])
    sup = r.metadata.attributes.get("supersedes")
    if isinstance(sup, str):
        conn.execute("INSERT OR IGNORE INTO memory_links(mem_rowid, kind, target_id) VALUES (?, 'supersedes', ?)",
                     (rowid, sup))
