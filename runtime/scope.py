"""A user's view of the store: every read and write is confined to one (user_id, agent_id).

Example:
    >>> alice = store.scope(user_id="alice")                      # doctest: +SKIP
    >>> rec = alice.write("Budget for project Orion is 40k EUR", tags=["orion"], sub_role="pm")
    >>> hits = alice.recall("what is Orion's budget?", k=3, sub_roles=["pm"])
    >>> print(format_context(hits))
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import numpy as np

from . import recall as _recall
from .errors import ContentTooLargeError, EncoderMismatchError, NotFoundError, ValidationError
from .filters import SENSITIVITY_ORDER, build_filter
from .memir import MemIR, RoleContext, Sensitivity, utcnow
from .records import build_record, check_vector
from .retrieval import Hit, RankWeights
from .sqlite_schema import COLUMNS, N_COLUMNS, READ_COLS, record_to_row, row_to_record, ts

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = ["Scope", "ForgetReport"]


_READ_COLS = READ_COLS


class ForgetReport(dict):  # a plain dict so it serialises as-is; keys documented in Scope.forget
    pass


class Scope:
    """Reads and writes for one ``(user_id, agent_id)``. Get one from ``MemoryStore.scope``."""

    def __init__(self, store: "MemoryStore", *, user_id: str, agent_id: str) -> None:
        self._store = store
        self.user_id = user_id
        self.agent_id = agent_id
        self.weights = RankWeights()

    def __repr__(self) -> str:
        return f"Scope(user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    # ------------------------------------------------------------------ helpers
    @property
    def _conn(self) -> Any:
        self._store._check_open()
        return self._store._conn

    def _tenant(self, alias: str = "m", *, check_only: bool = False) -> tuple[str, list[Any]]:
        """The scope's SQL clause. ``check_only`` for statements that locate rows by id/rowid: the
        unary ``+`` keeps SQLite from using a (user_id, agent_id, …) index for them, which without
        table statistics it prefers, turning a 10-row lookup into a scan of the whole scope."""
        p = "+" if check_only else ""
        return f"{p}{alias}.user_id = ? AND {p}{alias}.agent_id = ?", [self.user_id, self.agent_id]

    def _prepare(self, item: str | MemIR | dict[str, Any], embedding: Any = None,
                 fields: dict[str, Any] | None = None) -> tuple[MemIR, np.ndarray | None]:
        cfg = self._store.config
        if isinstance(item, MemIR):
            if fields:
                raise ValidationError("pass either a MemIR record or content + fields, not both", field="fields")
            rec = build_record(item.content, user_id=self.user_id, agent_id=self.agent_id,
                               **item.model_dump(exclude={"content", "schema_version"}))
        elif isinstance(item, dict):
            d = dict(item)
            embedding = d.pop("embedding", embedding)
            content = d.pop("content", None)
            if not isinstance(content, str):
                raise ValidationError("each item needs a 'content' string", field="content")
            rec = build_record(content, user_id=self.user_id, agent_id=self.agent_id, **d)
        elif isinstance(item, str):
            rec = build_record(item, user_id=self.user_id, agent_id=self.agent_id, **(fields or {}))
        else:
            raise ValidationError(f"cannot write a {type(item).__name__}; pass content text, a MemIR or a dict",
                                  field="content")
        if len(rec.content) > cfg.max_content_chars:
            raise ContentTooLargeError(
                f"content is {len(rec.content)} characters; the limit is {cfg.max_content_chars} "
                "(StoreConfig.max_content_chars) — split it or summarise it first", field="content")
        if cfg.redact:
            from .redact import redact
            red = redact(rec.content)
            if red.text != rec.content or red.sensitivity != Sensitivity.none:
                level = max(rec.metadata.sensitivity, red.sensitivity, key=SENSITIVITY_ORDER.index)
                rec = rec.model_copy(update={
                    "content": red.text,
                    "metadata": rec.metadata.model_copy(update={"sensitivity": level})})
        vec = None if embedding is None else self._check_vector(embedding)
        return rec, vec

    def _check_vector(self, embedding: Any) -> np.ndarray:
        return check_vector(embedding, self._store.embedder)

    def _insert(self, records: Sequence[MemIR], vecs: Sequence[np.ndarray | None], batch: bool = False) -> None:
        """Embed what lacks a vector, check parents, then insert everything in one transaction.

        With ``batch`` (``write_many``) errors name the item: ``field="[3].id"``."""
        def where(i: int, f: str) -> str:
            return f"[{i}].{f}" if batch else f

        def item(i: int) -> str:
            return f"item {i}: " if batch else ""

        batch_ids: dict[str, int] = {}
        for i, r in enumerate(records):
            if r.id in batch_ids:
                raise ValidationError(f"{item(i)}id {r.id!r} repeats item {batch_ids[r.id]} of this batch; "
                                      "ids must be unique (omit id to get a fresh one)", field=where(i, "id"))
            batch_ids[r.id] = i
        store = self._store
        missing = [i for i, v in enumerate(vecs) if v is None]
        vecs = list(vecs)
        if missing:
            enc = np.asarray(store.embedder.encode([records[i].content for i in missing]), dtype=np.float32)
            for j, i in enumerate(missing):
                vecs[i] = enc[j]
        emb = store.embedder
        with store._lock, store._tx() as conn:
            parents = sorted({p for r in records for p in r.provenance.derived_from} - set(batch_ids))
            if parents:
                found = self._existing_ids(parents)
                for i, r in enumerate(records):
                    lost = [p for p in r.provenance.derived_from if p not in found and p not in batch_ids]
                    if lost:  # another user's id is indistinguishable from a missing one
                        raise ValidationError(f"{item(i)}provenance.derived_from points at ids that do not "
                                              f"exist in this scope: {lost}",
                                              field=where(i, "provenance.derived_from"))
            taken = self._existing_ids(sorted(batch_ids), any_scope=True)
            if taken:
                i = min(batch_ids[t] for t in taken)
                raise ValidationError(f"{item(i)}id(s) already exist: {sorted(taken)}; omit id to get a fresh one",
                                      field=where(i, "id"))
            seq = store._next_seq()
            for r, v in zip(records, vecs):
                seq += 1
                cur = conn.execute(f"INSERT INTO memories({COLUMNS}) VALUES ({','.join('?' * N_COLUMNS)})",
                                   record_to_row(r, seq))
                rowid = cur.lastrowid
                conn.executemany("INSERT OR IGNORE INTO memory_tags(mem_rowid, tag) VALUES (?,?)",
                                 [(rowid, t) for t in r.metadata.tags])
                conn.executemany("INSERT OR IGNORE INTO memory_parents(mem_rowid, parent_id) VALUES (?,?)",
                                 [(rowid, p) for p in r.provenance.derived_from])
                assert v is not None
                conn.execute("INSERT INTO vectors(mem_rowid, encoder_id, dim, vec) VALUES (?,?,?,?)",
                             (rowid, emb.encoder_id, emb.dim, np.asarray(v, np.float32).tobytes()))
            conn.execute("INSERT INTO meta(key, value) VALUES ('seq', ?) "
                         "ON CONFLICT(key) DO UPDATE SET value=excluded.value", (str(seq),))

    def _existing_ids(self, ids: Sequence[str], any_scope: bool = False) -> set[str]:
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = list(ids[i:i + 500])
            marks = ",".join("?" * len(chunk))
            if any_scope:  # uniqueness is global; this reveals nothing but "taken"
                q, p = f"SELECT id FROM memories WHERE id IN ({marks})", chunk
            else:
                t, tp = self._tenant("memories", check_only=True)
                q, p = f"SELECT id FROM memories WHERE {t} AND id IN ({marks})", tp + chunk
            out.update(r[0] for r in self._conn.execute(q, p))
        return out

    # ------------------------------------------------------------------ write side
    def write(self, content: str | MemIR, *, embedding: Any = None, **fields: Any) -> MemIR:
        """Validate, redact, embed and store one memory; returns the stored record.

        Args:
            content: the memory text (or a ready ``MemIR``; its tenant fields must match this scope).
            embedding: a precomputed vector from the store's encoder (else it is computed).
            **fields: typed fields, flat (``source_type=``, ``session_id=``, ``sub_role=``,
                ``confidence=``, ``expires_at=``, ``tags=``, ``flags=``…) or nested models.

        Raises:
            ValidationError / ContentTooLargeError / VectorError: naming the field; nothing is written.
        """
        rec, vec = self._prepare(content, embedding, fields)
        self._insert([rec], [vec])
        return rec

    def write_many(self, items: Iterable[str | MemIR | dict[str, Any]]) -> list[MemIR]:
        """Write a batch all-or-nothing: every item is validated and embedded first, then one
        transaction inserts them all. Any invalid item raises (naming its index) and nothing is written."""
        recs, vecs = [], []
        for i, item in enumerate(items):
            try:
                r, v = self._prepare(item)
            except ValidationError as e:
                raise type(e)(f"item {i}: {e}", field=f"[{i}].{e.field}" if e.field else f"[{i}]",
                              problems=e.problems) from e
            recs.append(r)
            vecs.append(v)
        if recs:
            self._insert(recs, vecs, batch=True)
        return recs

    # ------------------------------------------------------------------ read side
    def get(self, memory_id: str) -> MemIR:
        """The record with this id in this scope; ``NotFoundError`` otherwise (also for other users' ids)."""
        t, tp = self._tenant()
        with self._store._lock:
            row = self._conn.execute(f"SELECT {_READ_COLS} FROM memories m WHERE {t} AND m.id = ?",
                                     tp + [memory_id]).fetchone()
        if row is None:
            raise NotFoundError(f"no memory {memory_id!r} in scope user={self.user_id!r} agent={self.agent_id!r}")
        return row_to_record(*row)

    def _select(self, filters: dict[str, Any], now: datetime | None, limit: int | None,
                extra_cols: str = "") -> list[tuple[Any, ...]]:
        flt = build_filter(**filters)
        where, params = flt.where(now or utcnow())
        t, tp = self._tenant()
        lim = "" if limit is None else f" LIMIT {int(limit)}"
        sql = f"SELECT {_READ_COLS}{extra_cols} FROM memories m WHERE {t} AND {where} ORDER BY m.seq{lim}"
        with self._store._lock:
            return self._conn.execute(sql, tp + params).fetchall()

    def list(self, *, limit: int | None = None, now: datetime | None = None, **filters: Any) -> list[MemIR]:
        """Records passing the typed filters (see ``MemoryFilter``), oldest first."""
        return [row_to_record(*r) for r in self._select(filters, now, limit)]

    def count(self, *, now: datetime | None = None, **filters: Any) -> int:
        flt = build_filter(**filters)
        where, params = flt.where(now or utcnow())
        t, tp = self._tenant()
        with self._store._lock:
            return int(self._conn.execute(f"SELECT count(*) FROM memories m WHERE {t} AND {where}",
                                          tp + params).fetchone()[0])

    def list_with_vectors(self, *, now: datetime | None = None, **filters: Any
                          ) -> tuple[builtins.list[MemIR], np.ndarray, np.ndarray]:
        """(records, unit vectors, write seqs) for the filtered rows — what retention scoring needs."""
        rows = self._select(filters, now, None, extra_cols=", m.rowid, m.seq")
        recs = [row_to_record(*r[:5]) for r in rows]
        rowids = np.array([r[5] for r in rows], dtype=np.int64)
        seqs = np.array([r[6] for r in rows], dtype=np.int64)
        with self._store._lock:
            found, mat = self._store._vectors_for(self.user_id, self.agent_id, rowids)
        if len(found) != len(rowids):
            self._raise_mismatch()
        return recs, np.array(mat, dtype=np.float32), seqs

    def _raise_mismatch(self) -> None:
        emb = self._store.embedder
        t, tp = self._tenant()
        others = self._conn.execute(
            f"SELECT v.encoder_id, count(*) FROM vectors v JOIN memories m ON m.rowid=v.mem_rowid "
            f"WHERE {t} AND v.encoder_id != ? GROUP BY v.encoder_id", tp + [emb.encoder_id]).fetchall()
        raise EncoderMismatchError(
            f"memories in this scope were embedded by {dict(others)}, but the store now uses "
            f"{emb.encoder_id!r}; run `memir reembed DB` (or store.reembed()) to re-encode them")

    def recall(self, query: str | np.ndarray, k: int = 5, *, context: RoleContext | None = None,
               now: datetime | None = None, explain: bool = False, update_usage: bool = True,
               candidates: int | None = None, **filters: Any) -> builtins.list[Hit]:
        """Typed filter → exact vector top-K over the rows that pass → SQL re-check → re-rank.

        The filter is evaluated on the scope's cached columns (the same semantics as its SQL, see
        ``MemoryFilter.mask``); the top-K candidates are then re-checked in SQL with the tenant
        clause and the filter before anything is returned, so a memory outside the filter or the
        scope can never come back.

        Args:
            query: text (embedded with the store's encoder) or a query vector.
            k: hits to return.
            context: the caller's current role, for the role-match bonus.
            now: decision time for freshness/expiry (default: now, UTC).
            explain: log query, filters, raw top-K and final list (``scope.recall_log()``).
            update_usage: bump ``access_count``/``last_accessed_at`` of the returned hits.
            candidates: raw top-K before re-ranking (default ``StoreConfig.candidate_pool``).
            **filters: ``roles``, ``sub_roles``, ``source_types``, ``sessions``, ``exclude_sessions``,
                ``since``, ``until``, ``min_confidence``, ``sensitivity``, ``tags``, ``task_ids``,
                ``dialog_roles``, ``include_expired``, ``tier``.

        Returns:
            Hits sorted by total score, each with ``.record`` and ``.score`` (the breakdown).
        """
        if not isinstance(k, int) or k < 1:
            raise ValidationError(f"k must be a positive integer, got {k!r}", field="k")
        flt = build_filter(**filters)
        now = now or utcnow()
        store = self._store
        q = np.asarray(store.embedder.encode([query])[0] if isinstance(query, str)
                       else self._check_vector(query), dtype=np.float32)
        pool = max(k, candidates or store.config.candidate_pool)
        with store._lock:
            # The cache proposes (mask + exact top-K), SQL disposes: the candidates are re-checked
            # with the tenant clause and the filter's WHERE. If SQL disagrees (a stale cache; should
            # not happen), the cache is dropped and SQL alone decides eligibility.
            for sql_only in (False, True):
                rowids, sims = _recall.candidates(self, flt, now, q, pool, sql_only)
                if len(rowids) == 0:
                    return []
                rows = _recall.verify(self, flt, now, rowids)
                if len(rows) == len(rowids):
                    break
                store._caches.clear()
            keep = np.array([int(r) in rows for r in rowids], dtype=bool)  # a concurrent delete in between
            rowids, sims = rowids[keep], sims[keep]
            if len(rowids) == 0:
                return []
            hits, hit_rowids = _recall.rank(self, rowids, sims, rows, now, context, k)
            if update_usage and hits:  # one statement = one commit (not one per hit)
                t, tp = self._tenant("memories", check_only=True)
                self._conn.execute(
                    f"UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? "
                    f"WHERE {t} AND rowid IN ({','.join('?' * len(hit_rowids))})", [ts(now), *tp, *hit_rowids])
            if explain:
                _recall.log_recall(self, query, flt.model_dump(mode="json", exclude_defaults=True),
                                 [rows[int(r)][0] for r in rowids], sims.tolist(), hits, now)
        return hits

    def recall_log(self, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """The scope's most recent ``explain=True`` recalls, newest first."""
        t, tp = self._tenant("recall_log")
        with self._store._lock:
            rows = self._conn.execute(f"SELECT payload FROM recall_log WHERE {t} ORDER BY id DESC LIMIT ?",
                                      tp + [int(limit)]).fetchall()
        return [json.loads(p) for (p,) in rows]

    # ------------------------------------------------------------------ forgetting
    def forget(self, memory_id: str, *, cascade: Literal["redact", "delete"] = "redact",
               reason: str = "forgotten", scrub: bool = True) -> ForgetReport:
        """Forget one memory (see :func:`runtime.forget.forget`): ``cascade="redact"`` leaves a
        redacted placeholder when other memories derive from it; ``"delete"`` removes it and its
        descendants. Returns ``{"deleted": [ids], "redacted": [ids]}``."""
        from .forget import forget
        return forget(self, memory_id, cascade=cascade, reason=reason, scrub=scrub)

    # ------------------------------------------------------------------ retention
    def retain(self, *, capacity: Any, scorer: Any = None, rules: Any = None, **kwargs: Any) -> Any:
        """Decide which working memories (and unsaved candidates) to keep under a capacity, and apply it.

        Args:
            capacity: max items kept (int), ``None`` for no count limit, or a callable
                ``(records, utility) -> int`` for a task-dependent capacity (e.g.
                ``runtime.retention.TaskCapacity``; seed 001 pitfall 2).
            scorer: a ``Scorer`` (default: the shipped ONNX utility model).
            rules: a ``RuleSet``, YAML path/text or dict (default: ``runtime.rules.DEFAULT_RULES``).
            **kwargs: ``budget_tokens``, ``candidates`` (unsaved items written only if kept),
                ``method`` ("auto" | "greedy" | "exact" | "cvxpy"), ``forgotten`` ("archive" keeps
                dropped items in a cold tier with metadata and vector; "delete" removes them),
                ``now``, ``ctx`` (ScoringContext), ``on_infeasible``, ``overflow_penalty``
                (soft capacity), ``apply`` (False = dry run), ``trigger`` (recorded).

        Must-forget items (expired TTL, used secrets, ...) are always hard-deleted; an item other
        memories derive from leaves a redacted placeholder.

        Returns:
            ``runtime.retain.RetentionDecision``.

        Example:
            >>> d = scope.retain(capacity=100, scorer=FakeScorer())   # doctest: +SKIP
            >>> scope.explain(d.kept[0])["summary"]                    # doctest: +SKIP
        """
        from .retain import retain
        return retain(self, capacity=capacity, scorer=scorer, rules=rules, **kwargs)

    def explain(self, memory_id: str) -> dict[str, Any]:
        """Why is this memory here, or why was it dropped, and when (every decision about it)."""
        from .retain import explain
        return explain(self, memory_id)

    def decisions(self, limit: int = 20) -> builtins.list[dict[str, Any]]:
        """This scope's retention decisions, newest first."""
        from .retain import decisions
        return decisions(self, limit)

    def state_at(self, decision_id: str) -> dict[str, Any]:
        """Time travel: the decision record, including the ids kept right after it."""
        from .retain import state_at
        return state_at(self, decision_id)

    # ------------------------------------------------------------------ export
    def _write_snapshot(self, fh: IO[str]) -> int:
        from .batch import write_jsonl_lines
        recs, vecs, _ = self.list_with_vectors(tier="any", include_expired=True)
        return write_jsonl_lines(fh, list(zip(recs, vecs)), self._store.embedder.encoder_id)

    def snapshot(self, path: str | Path) -> int:
        """Write the scope's whole state as JSONL (one MemIR per line, plus ``embedding`` and
        ``encoder_id`` keys), or as Parquet when ``path`` ends in ``.parquet`` — the dump formats
        ``memir score`` reads. Written to a temporary file and renamed. Returns the record count."""
        from .batch import write_dump
        recs, vecs, _ = self.list_with_vectors(tier="any", include_expired=True)
        return write_dump(list(zip(recs, vecs)), self._store.embedder.encoder_id, path)
