"""Stored features in dumps: a Parquet dump carries each record's session context and text
statistics, computed once by its writer; ``memir score`` reads them instead of recomputing them, and
the result does not depend on which path ran (stored, recomputed, record by record)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from runtime import MemoryStore, StoreConfig
from runtime.annotate.consolidate import dump_session_context, history_session_features
from runtime.batch import ScoreConfig, score_dump
from runtime.encoders import HashEmbedder
from runtime.record import MemIR
from runtime.store.dumps import CONTEXT_COLUMN, CONTEXT_METADATA, TEXT_COLUMN, TEXT_METADATA, iter_dump, write_dump
from utilitynet.dialog import CONTEXT_NAMES, CONTEXT_SCHEMA
from utilitynet.textstats import TEXT_STAT_NAMES, TEXT_STATS_SCHEMA, text_stats

DIM = 384  # the shipped model's width: the real model reads the context
NOW = datetime(2026, 6, 1, tzinfo=UTC)
WORDS = ["budget", "deadline", "hotel", "flight", "my", "Lisbon", "Friday", "moved", "400", "thanks", "wow", "I"]


def _rows(n: int = 300, users: int = 4, seed: int = 0) -> list[tuple[MemIR, np.ndarray | None, str | None]]:
    """Records of ``users`` scopes, interleaved, in sessions of 12 turns alternating user/agent, some
    placeholders, some questions, out-of-order timestamps and ties."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[tuple[MemIR, np.ndarray | None, str | None]] = []
    for i in range(n):
        k = i // users  # the k-th record of its scope
        user = f"u{i % users}"
        text = " ".join(rng.choice(WORDS, 2 + i % 9)) + ("?" if i % 5 == 0 else ".")
        flags = ["placeholder"] if i % 31 == 4 else []
        rec = MemIR.model_validate({
            "id": f"m{i}", "content": text, "metadata": {"flags": flags, "confidence": float(rng.uniform(0.4, 1))},
            "created_at": (t0 + timedelta(minutes=10 * k + (0 if i % 17 == 0 else int(rng.integers(0, 3))))).isoformat(),
            "provenance": {"user_id": user, "session_id": f"{user}-s{k // 12}"},
            "role_context": {"dialog_role": "user" if k % 2 == 0 else "agent"},
        })
        v = rng.standard_normal(DIM).astype(np.float32)
        rows.append((rec, v / np.linalg.norm(v), "test-384"))
    return rows


def _cfg(**kw: Any) -> ScoreConfig:
    return ScoreConfig(**{"capacity": 20, "now": NOW, "encoder": "hash", **kw})


def _outputs(out: Path) -> dict[str, dict[str, Any]]:
    rows = pq.read_table(out).to_pylist() if out.suffix == ".parquet" else [
        json.loads(x) for x in out.read_text().splitlines()]
    return {r["id"]: r for r in rows}


def _without_context(src: Path, dst: Path) -> None:
    t = pq.read_table(src)
    pq.write_table(t.drop_columns([CONTEXT_COLUMN, TEXT_COLUMN]).replace_schema_metadata(None), dst)


def _with_column(src: Path, dst: Path, name: str, values: Any) -> None:
    t = pq.read_table(src)
    pq.write_table(t.set_column(t.schema.get_field_index(name), name, values), dst)


def _assert_same(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert abs(a[k]["model_utility"] - b[k]["model_utility"]) <= 1e-6, k
        assert (a[k]["keep"], a[k]["action"], a[k]["reason"]) == (b[k]["keep"], b[k]["action"], b[k]["reason"]), k


def test_the_writer_stores_what_the_scorer_computes_scope_by_scope() -> None:
    rows = _rows()
    ctx, known = dump_session_context([r for r, _, _ in rows], [v for _, v, _ in rows])
    assert known.all() and ctx.shape == (len(rows), len(CONTEXT_NAMES))
    for user in ("u0", "u3"):
        idx = [i for i, (r, _, _) in enumerate(rows) if r.provenance.user_id == user]
        order = sorted(idx, key=lambda i: rows[i][0].created_at)  # write order, ties in dump order (stable)
        alone = history_session_features([rows[i][0] for i in order], np.stack([rows[i][1] for i in order]))
        # the scorer scales vectors to unit length in float32 first: the same values to ~1e-9
        np.testing.assert_allclose(ctx[order], alone, rtol=0, atol=1e-6)
        # the open session (the latest write's) and placeholders have no context; closed turns have one
        last = max(order, key=lambda i: (rows[i][0].created_at, order.index(i)))
        open_s = rows[last][0].provenance.session_id
        for i in idx:
            r = rows[i][0]
            assert np.isnan(ctx[i]).all() == (r.provenance.session_id == open_s or "placeholder" in r.metadata.flags)


def test_a_scope_with_a_record_without_a_vector_is_left_to_the_scorer() -> None:
    rows = _rows(80)
    rows[5] = (rows[5][0], None, None)  # u1's scope
    _, known = dump_session_context([r for r, _, _ in rows], [v for _, v, _ in rows])
    users = [r.provenance.user_id for r, _, _ in rows]
    assert not any(k for k, u in zip(known, users) if u == "u1")
    assert all(k for k, u in zip(known, users) if u != "u1")


def test_scoring_reads_the_stored_context_and_decides_as_if_it_had_computed_it(tmp_path: Path) -> None:
    rows = _rows()
    dump, bare = tmp_path / "d.parquet", tmp_path / "bare.parquet"
    write_dump(rows, dump)
    schema = pq.read_schema(dump)
    assert CONTEXT_COLUMN in schema.names and schema.metadata[CONTEXT_METADATA] == CONTEXT_SCHEMA.encode()
    assert TEXT_COLUMN in schema.names and schema.metadata[TEXT_METADATA] == TEXT_STATS_SCHEMA.encode()
    stats = text_stats([r.content for r, _, _ in rows])
    np.testing.assert_array_equal(np.array(pq.read_table(dump).column(TEXT_COLUMN).to_pylist()),
                                  np.stack([stats[k] for k in TEXT_STAT_NAMES], axis=1))
    _without_context(dump, bare)
    stored = score_dump(dump, tmp_path / "a.parquet", _cfg(), progress=False)
    computed = score_dump(bare, tmp_path / "b.parquet", _cfg(), progress=False)
    by_rows = score_dump(dump, tmp_path / "c.jsonl", _cfg(), engine="rows", progress=False)
    assert stored["context_stored"] == stored["valid"] == by_rows["valid"] == len(rows)
    assert computed["context_stored"] == 0
    _assert_same(_outputs(tmp_path / "a.parquet"), _outputs(tmp_path / "b.parquet"))
    _assert_same(_outputs(tmp_path / "a.parquet"), _outputs(tmp_path / "c.jsonl"))
    # the stored values are what the decision read: other values give other utilities
    a = _outputs(tmp_path / "a.parquet")
    for name, width in ((CONTEXT_COLUMN, len(CONTEXT_NAMES)), (TEXT_COLUMN, len(TEXT_STAT_NAMES))):
        zeros = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(len(rows) * width)), width)
        _with_column(dump, tmp_path / "zeroed.parquet", name, zeros)
        score_dump(tmp_path / "zeroed.parquet", tmp_path / "z.parquet", _cfg(), progress=False)
        z = _outputs(tmp_path / "z.parquet")
        assert max(abs(a[k]["model_utility"] - z[k]["model_utility"]) for k in a) > 1e-3, name
    # text statistics stored for some rows only: the others are computed, the decisions the same
    part = pq.read_table(dump).column(TEXT_COLUMN).to_pylist()
    part = [None if i % 3 else v for i, v in enumerate(part)]
    _with_column(dump, tmp_path / "part.parquet", TEXT_COLUMN, pa.array(part, pa.list_(pa.float64())))
    score_dump(tmp_path / "part.parquet", tmp_path / "p.parquet", _cfg(), progress=False)
    _assert_same(a, _outputs(tmp_path / "p.parquet"))


def test_another_schema_or_a_scope_split_over_dumps_is_recomputed(tmp_path: Path) -> None:
    rows = _rows()
    dump, bare = tmp_path / "d.parquet", tmp_path / "bare.parquet"
    write_dump(rows, dump)
    _without_context(dump, bare)
    t = pq.read_table(dump)
    pq.write_table(t.replace_schema_metadata({CONTEXT_METADATA: b"ctx-0-old"}), tmp_path / "old.parquet")
    old = score_dump(tmp_path / "old.parquet", tmp_path / "o.parquet", _cfg(), progress=False)
    assert old["context_stored"] == 0 and old["quarantined"] == 0
    assert score_dump(bare, tmp_path / "b.parquet", _cfg(), progress=False)["context_stored"] == 0
    _assert_same(_outputs(tmp_path / "o.parquet"), _outputs(tmp_path / "b.parquet"))
    # a damaged row — too few values, an infinity — is not read: its scope is computed, the others are read
    for row, damage in ((1, lambda v: v[:-1]), (2, lambda v: [float("inf")] + v[1:])):
        values = t.column(CONTEXT_COLUMN).to_pylist()
        values[row] = damage(values[row])
        _with_column(dump, tmp_path / "damaged.parquet", CONTEXT_COLUMN, pa.array(values, pa.list_(pa.float64())))
        r = score_dump(tmp_path / "damaged.parquet", tmp_path / "dm.parquet", _cfg(), progress=False)
        n_scope = sum(1 for x, _, _ in rows if x.provenance.user_id == rows[row][0].provenance.user_id)
        assert r["context_stored"] == len(rows) - n_scope and r["quarantined"] == 0
        _assert_same(_outputs(tmp_path / "dm.parquet"), _outputs(tmp_path / "b.parquet"))
    # u0's records in two dumps, each written on its own: their stored contexts describe half a
    # history each, so the scope is recomputed over both; the other scopes are read from the dumps
    first = [r for r in rows if r[0].provenance.user_id != "u0" or int(r[0].id[1:]) < 150]
    second = [r for r in rows if r[0].provenance.user_id == "u0" and int(r[0].id[1:]) >= 150]
    write_dump(first, tmp_path / "p1.parquet")
    write_dump(second, tmp_path / "p2.parquet")
    split = score_dump([tmp_path / "p1.parquet", tmp_path / "p2.parquet"], tmp_path / "s.parquet", _cfg(),
                       progress=False)
    n_u0 = sum(1 for r, _, _ in rows if r.provenance.user_id == "u0")
    assert split["context_stored"] == len(rows) - n_u0
    _assert_same(_outputs(tmp_path / "s.parquet"), _outputs(tmp_path / "b.parquet"))


def test_a_store_snapshot_carries_the_context_and_readers_that_rebuild_records_ignore_it(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path / "m.db", config=StoreConfig(), embedder=HashEmbedder(64))
    try:
        scope = store.scope(user_id="alice")
        for s in range(3):
            for k in range(6):
                scope.write(f"turn {k} of session {s}: I moved to Lisbon on Friday" if k % 3 == 0 else f"ok {k}?",
                            session_id=f"s{s}", dialog_role="user" if k % 2 == 0 else "agent")
        scope.snapshot(tmp_path / "alice.parquet")
    finally:
        store.close()
    t = pq.read_table(tmp_path / "alice.parquet")
    ctx = np.array(t.column(CONTEXT_COLUMN).to_pylist(), dtype=np.float64)
    sessions = [p["session_id"] for p in t.column("provenance").to_pylist()]
    assert not np.isnan(ctx[[i for i, s in enumerate(sessions) if s != "s2"]]).any()  # closed sessions
    assert np.isnan(ctx[[i for i, s in enumerate(sessions) if s == "s2"]]).all()      # the open one
    records = [row for _, row, err in iter_dump(tmp_path / "alice.parquet") if err is None]
    assert len(records) == 18
    assert all(c not in json.dumps(r.model_dump(mode="json")) for r, _ in records for c in (CONTEXT_COLUMN, TEXT_COLUMN))
