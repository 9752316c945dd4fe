"""The columnar engine against the record-at-a-time reference: the same output, record for record,
quarantine included, whatever the layout, the reader processes or the spill to disk."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.batch import ScoreConfig, score_dump
from runtime.batch.read import Chunk, read_chunk
from runtime.batch.table import table_from_records
from runtime.encoders import HashEmbedder
from runtime.record import MemIR
from runtime.store.dumps import memir_arrow_table, write_dump
from tests.conftest import memir_records
from tests.runtime.test_cli import _tiny_model

DIM = 64
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def unit_vec(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def varied_rows(n: int = 240, seed: int = 0) -> list[tuple[MemIR, np.ndarray | None, str | None]]:
    """Records of 6 scopes with sessions, flags, TTLs, corrections, tags and roles; some without a
    vector, some with one of another width (both re-embedded)."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[tuple[MemIR, np.ndarray | None, str | None]] = []
    words = ["budget", "deadline", "hotel", "flight", "invoice", "refund", "Lisbon", "Friday", "ASAP", "400"]
    for i in range(n):
        user, agent = f"u{i % 3}", ("default" if i % 2 else "planner")
        flags = [f for f, every in (("core_instruction", 17), ("pinned", 23), ("urgent", 7)) if i % every == 0]
        md: dict[str, Any] = {"confidence": float(rng.uniform(0.3, 1.0)), "flags": flags,
                              "tags": [words[i % 10]] + (["project:orion"] if i % 4 == 0 else []),
                              "sensitivity": ["none", "pii", "secret"][i % 3] if i % 5 == 0 else "none"}
        if i % 11 == 1 and not flags:  # a TTL on a pinned memory is a contradiction (tested apart)
            md["expires_at"] = (NOW - timedelta(days=1) if i % 2 else NOW + timedelta(days=3)).isoformat()
        if i % 13 == 0:
            md["freshness_half_life"] = timedelta(days=7).total_seconds()
        if i % 19 == 5 and i > 20 and (i - 12) % 23 and (i - 12) % 17:  # corrections of unpinned memories
            md["attributes"] = {"supersedes": f"m{i - 12}", "note": "corrected"}
        rec = MemIR.model_validate({
            "id": f"m{i}", "content": f"{' '.join(rng.choice(words, 1 + i % 6))} note {i}?" if i % 9 else f"Ok {i}",
            "created_at": (t0 + timedelta(minutes=37 * i + int(rng.integers(0, 30)))).isoformat(),
            "provenance": {"user_id": user, "agent_id": agent, "session_id": f"{user}-s{i // 40}",
                           "type": ["direct_interaction", "derived_inference", "external_ingest"][i % 3]},
            "role_context": {"active_role": "support" if i % 2 else "planner", "sub_role": "billing" if i % 3 else None,
                             "dialog_role": ["user", "agent", "tool"][i % 3]},
            "metadata": md, "usage": {"access_count": i % 4},
        })
        vec = None if i % 10 == 3 else (unit_vec(rng)[:32] if i % 29 == 7 else unit_vec(rng))
        rows.append((rec, vec, None if vec is None else "hash-64"))
    return rows


BAD_JSONL = [
    '{"content": "", "provenance": {"user_id": "x"}}',                                 # empty content
    "this is not json",
    json.dumps({"id": "bad-role", "content": "hi", "provenance": {"user_id": "x"},
                "role_context": {"dialog_role": "narrator"}}),                           # unknown enum
    json.dumps({"id": "m3", "content": "a repeated id", "provenance": {"user_id": "u0"}}),  # duplicate of m3
    json.dumps({"id": "nan-vec", "content": "bad vector", "provenance": {"user_id": "x"},
                "embedding": [float("nan")] * DIM}),
    json.dumps({"id": "spaced", "content": "labels get stripped", "provenance": {"user_id": "u1"},
                "role_context": {"active_role": "  support  "}}),                      # valid after MemIR
    json.dumps({"id": "extra", "content": "unknown field", "provenance": {"user_id": "u1"}, "colour": "red"}),
    "",                                                                                 # blank: not a record
    json.dumps({"id": "self", "content": "own parent", "provenance": {"user_id": "u1", "derived_from": ["self"]}}),
]


def _cfg(model: Path, **kw: Any) -> ScoreConfig:
    base: dict[str, Any] = {"capacity": 25, "model": str(model), "encoder": "hash", "now": NOW}
    return ScoreConfig(**{**base, **kw})


def _outputs(out: Path) -> dict[str, dict[str, Any]]:
    if out.suffix == ".parquet":
        rows = pq.read_table(out).to_pylist()
    else:
        rows = [json.loads(x) for x in out.read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    assert len(by_id) == len(rows), "an id was scored twice"
    return by_id


def _quarantine(out: Path) -> list[tuple[int, str]]:
    q = Path(str(out) + ".quarantine.jsonl")
    return [(x["line"], x["error"]) for x in map(json.loads, q.read_text().splitlines())] if q.exists() else []


def _same(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k], k


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tiny_model(tmp_path_factory.mktemp("model"), DIM)


def score_both(dump: Path, tmp_path: Path, model: Path, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    ref = score_dump(dump, tmp_path / "rows.jsonl", _cfg(model), engine="rows", progress=False)
    new = score_dump(dump, tmp_path / "local.jsonl", _cfg(model, **kw), progress=False)
    _same(_outputs(tmp_path / "rows.jsonl"), _outputs(tmp_path / "local.jsonl"))
    assert _quarantine(tmp_path / "rows.jsonl") == _quarantine(tmp_path / "local.jsonl")
    for k in ("records", "valid", "quarantined", "scopes", "kept", "archived", "deleted", "embedded"):
        assert ref[k] == new[k], k
    return ref, new


def test_jsonl_same_as_the_record_path_with_bad_lines_and_duplicates(tmp_path: Path, model: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    write_dump(varied_rows(), dump)
    with open(dump, "a") as fh:
        fh.write("\n".join(BAD_JSONL) + "\n")
    ref, new = score_both(dump, tmp_path, model)
    assert ref["quarantined"] == 7 and new["duplicates"] == 1
    assert ref["valid"] == 240 + 1 and ref["embedded"] == 24 + 8 + 1
    assert {a for a in ("keep", "archive", "delete")} <= {r["action"] for r in _outputs(tmp_path / "local.jsonl").values()}
    q = _quarantine(tmp_path / "local.jsonl")
    assert [line for line, _ in q] == [241, 242, 243, 244, 245, 247, 249]
    assert "duplicate id 'm3' (first seen at line 4)" in q[3][1]


def _contradictory_dump(tmp_path: Path) -> tuple[Path, list[Any], MemIR]:
    """80 varied rows and a correction of u2/planner's pinned m23, which makes "superseded"
    contradict "pinned": that scope cannot be decided."""
    rows = varied_rows(80)
    pinned = rows[23][0]
    fix = MemIR.model_validate({**rows[77][0].model_dump(), "id": "fix23",
                                "metadata": {"attributes": {"supersedes": pinned.id}},
                                "provenance": pinned.provenance.model_dump()})
    dump = tmp_path / "dump.jsonl"
    write_dump([*rows, (fix, rows[77][1], "hash-64")], dump)
    return dump, rows, pinned


def test_a_contradictory_scope_is_quarantined_and_the_others_are_decided(tmp_path: Path, model: Path) -> None:
    dump, rows, pinned = _contradictory_dump(tmp_path)
    ref, new = score_both(dump, tmp_path, model)
    assert new["failed_scopes"] == ref["failed_scopes"] and len(new["failed_scopes"]) == 1
    bad = new["failed_scopes"][0]
    assert (bad["user_id"], bad["agent_id"]) == (pinned.provenance.user_id, pinned.provenance.agent_id)
    n_scope = sum(1 for r, _, _ in rows if r.provenance.user_id == bad["user_id"]
                  and r.provenance.agent_id == bad["agent_id"]) + 1
    assert new["quarantined"] == n_scope and new["valid"] == 81 - n_scope and new["scopes"] == 5
    assert all("cannot be decided" in e and "pinned" in e for _, e in _quarantine(tmp_path / "local.jsonl"))


def test_deciders_reading_spilled_partitions_decide_and_quarantine_the_same(tmp_path: Path, model: Path) -> None:
    """Spilled rows reach the decider processes as partition paths, each read where it is decided:
    the decisions, the quarantined scope and the counts are those of one process deciding the
    rows held in memory."""
    dump, _, _ = _contradictory_dump(tmp_path)
    one = score_dump(dump, tmp_path / "one.jsonl", _cfg(model, workers=1), progress=False)
    two = score_dump(dump, tmp_path / "two.jsonl", _cfg(model, workers=2, memory_mb=0), progress=False)
    assert (one["spilled"], one["deciders"], two["spilled"], two["deciders"]) == (0, 1, 81, 2)
    _same(_outputs(tmp_path / "one.jsonl"), _outputs(tmp_path / "two.jsonl"))
    assert sorted(_quarantine(tmp_path / "one.jsonl")) == sorted(_quarantine(tmp_path / "two.jsonl"))
    assert one["failed_scopes"] == two["failed_scopes"] and len(two["failed_scopes"]) == 1
    for k in ("records", "valid", "quarantined", "scopes", "kept", "archived", "deleted", "embedded"):
        assert one[k] == two[k], k
    assert not list(tmp_path.glob("memir-score-*"))


def test_parquet_column_layout_validated_columnwise_is_the_same(tmp_path: Path, model: Path) -> None:
    dump = tmp_path / "dump.parquet"
    rows = varied_rows()
    write_dump(rows, dump)
    assert pq.read_schema(dump).names[:3] == ["schema_version", "id", "content"]
    _, new = score_both(dump, tmp_path, model)
    # only the corrections (non-empty attributes) take the record path
    assert new["validated_columnwise"] == sum(1 for r, _, _ in rows if not r.metadata.attributes) == 230


def test_parquet_mutated_rows_go_through_memir_and_match(tmp_path: Path, model: Path) -> None:
    rows = varied_rows(60)
    t = memir_arrow_table([r for r, _, _ in rows], [v for _, v, _ in rows], [e for _, _, e in rows]).to_pylist()
    t[1]["role_context"]["active_role"] = " padded "        # MemIR strips it: valid
    t[2]["content"] = "   "                                  # blank
    t[3]["provenance"]["user_id"] = "not an id!"             # bad id
    t[4]["metadata"]["confidence"] = float("nan")
    t[5]["metadata"]["flags"] = ["pinned", "sparkly"]        # unknown flag
    t[6]["embedding"] = [0.0] * DIM                          # zero vector
    t[7]["metadata"]["tags"] = ["ok", ""]                    # empty label
    t[8]["provenance"]["derived_from"] = [t[8]["id"]]        # its own parent
    t[9]["id"] = t[10]["id"]                                 # duplicate (first seen at row 10? no: row 10 later)
    t[11]["metadata"]["attributes"] = '{"k": 1.5}'           # attributes: record path, valid
    t[12]["content"] = "\u2003"                              # Unicode whitespace only
    t[13]["metadata"]["sensitivity"] = "SECRET"
    t[14]["usage"]["access_count"] = -1
    dump = tmp_path / "mut.parquet"
    from runtime.store.dumps import memir_arrow_schema
    pq.write_table(pa.Table.from_pylist(t, schema=memir_arrow_schema()), dump)
    ref, new = score_both(dump, tmp_path, model)
    assert ref["quarantined"] == 11


def test_record_json_parquet_and_gzip_jsonl_match(tmp_path: Path, model: Path) -> None:
    rows = varied_rows(120, seed=3)
    legacy = tmp_path / "legacy.parquet"
    pq.write_table(pa.table({
        "record": pa.array([r.model_dump_json() for r, _, _ in rows] + ['"not an object"'], pa.string()),
        "embedding": pa.array([None if v is None else v for _, v, _ in rows] + [None], pa.list_(pa.float32())),
        "encoder_id": pa.array([e for _, _, e in rows] + [None], pa.string())}), legacy)
    score_both(legacy, tmp_path, model)
    gz = tmp_path / "dump.jsonl.gz"
    plain = tmp_path / "plain.jsonl"
    write_dump(rows, plain)
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + plain.read_bytes()))
    score_both(gz, tmp_path, model, chunk_mb=1)


def test_spilling_to_disk_and_reader_processes_change_nothing(tmp_path: Path, model: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    write_dump(varied_rows(400, seed=5), dump)
    ref = score_dump(dump, tmp_path / "mem.jsonl", _cfg(model), progress=False)
    spilled = score_dump(dump, tmp_path / "spill.jsonl", _cfg(model, memory_mb=0, workers=2, chunk_mb=1),
                         progress=False)
    assert ref["spilled"] == 0 and spilled["spilled"] == 400 and spilled["readers"] == 2
    _same(_outputs(tmp_path / "mem.jsonl"), _outputs(tmp_path / "spill.jsonl"))
    assert not list(tmp_path.glob("memir-score-*"))


def test_several_dumps_share_one_id_space_and_parquet_output(tmp_path: Path, model: Path) -> None:
    rows = varied_rows(100, seed=7)
    write_dump(rows[:60], tmp_path / "a.jsonl")
    write_dump(rows[50:], tmp_path / "b.parquet")            # rows 50..59 repeat
    rep = score_dump([tmp_path / "a.jsonl", tmp_path / "b.parquet"], tmp_path / "out.parquet", _cfg(model),
                     progress=False)
    assert rep["valid"] == 100 and rep["duplicates"] == 10
    q = [json.loads(x) for x in (tmp_path / "out.parquet.quarantine.jsonl").read_text().splitlines()]
    assert {x["file"] for x in q} == {str(tmp_path / "b.parquet")} and [x["line"] for x in q] == list(range(1, 11))
    assert len(_outputs(tmp_path / "out.parquet")) == 100


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(recs=st.lists(memir_records(), min_size=1, max_size=12, unique_by=lambda r: r.id))
def test_columnwise_validation_accepts_only_what_memir_keeps_unchanged(recs: list[MemIR]) -> None:
    """Any valid record, written in the column layout and read back, gives the same scoring row as
    the record itself, whether the column check accepted it or sent it through MemIR."""
    rng = np.random.default_rng(0)
    vecs = [unit_vec(rng) for _ in recs]
    table = memir_arrow_table(recs, vecs, ["hash-64"] * len(recs))
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "x.parquet"
        pq.write_table(table, p)
        got = read_chunk(Chunk(str(p), "parquet", 1, 0, 1), DIM)
    assert not got.rejects
    want = table_from_records(list(range(1, len(recs) + 1)), recs, vecs, DIM)
    assert json.dumps(got.table.to_pylist()) == json.dumps(want.to_pylist())  # NaN-aware


def test_hash_embedder_width_matches() -> None:
    assert HashEmbedder(DIM).encode(["x"]).shape == (1, DIM)


def test_cli_scores_several_dumps_prints_a_summary_and_json(tmp_path: Path, model: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from runtime.cli import main

    rows = varied_rows(90, seed=9)
    write_dump(rows[:45], tmp_path / "a.jsonl")
    write_dump(rows[45:], tmp_path / "b.parquet")
    base = ["score", str(tmp_path / "a.jsonl"), str(tmp_path / "b.parquet"), "--capacity", "10", "--model",
            str(model), "--encoder", "hash", "--quiet"]
    assert main([*base, "-o", str(tmp_path / "out.parquet")]) == 0
    text = capsys.readouterr().out
    assert text.startswith("scored 90 records in 6 scope(s)") and "records/s" in text and "rejected 0" in text
    assert main([*base, "-o", str(tmp_path / "out.jsonl"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["valid"] == 90 and summary["engine"] == "local" and summary["kept"] == 60
    assert _outputs(tmp_path / "out.parquet") == _outputs(tmp_path / "out.jsonl")
    # the reference engine takes one dump, and says so
    assert main([*base, "-o", str(tmp_path / "r.jsonl"), "--engine", "rows"]) == 4
    assert "one dump at a time" in capsys.readouterr().err


def test_scopes_decided_by_processes_the_same_as_in_this_one(tmp_path: Path, model: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks decided by two spawned processes (small blocks, so each process gets several and
    they come back interleaved) give the same output file, byte for byte, and the same counts."""
    import runtime.batch.score as score_mod

    monkeypatch.setattr(score_mod, "BLOCK_ROWS", 30)
    dump = tmp_path / "dump.jsonl"
    write_dump(varied_rows(), dump)
    one = score_dump(dump, tmp_path / "one.jsonl", _cfg(model, workers=1), progress=False)
    two = score_dump(dump, tmp_path / "two.jsonl", _cfg(model, workers=2), progress=False)
    assert one["deciders"] == 1 and two["deciders"] == 2
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    for k in ("records", "valid", "quarantined", "scopes", "kept", "archived", "deleted", "embedded"):
        assert one[k] == two[k], k


def _ipc(t: pa.Table) -> bytes:
    """A table's bytes (Table.equals treats NaN as unequal to itself)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t.combine_chunks())
    return bytes(sink.getvalue().to_pybytes())


def test_parquet_is_read_in_parts_that_add_up_to_the_whole(tmp_path: Path, model: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.batch.read as read
    from runtime.batch.read import plan_chunks, read_chunk_parts

    dump = tmp_path / "dump.parquet"
    write_dump(varied_rows(150, seed=9), dump)
    monkeypatch.setattr(read, "PARQUET_BATCH", 32)           # several parts per row group
    chunk = next(iter(plan_chunks(dump)))
    parts = list(read_chunk_parts(chunk, DIM))
    assert len(parts) == 5 and [p.table.num_rows for p in parts] == [32, 32, 32, 32, 22]
    whole = read_chunk(chunk, DIM)
    assert _ipc(pa.concat_tables([p.table for p in parts])) == _ipc(whole.table) and whole.rows == 150
    ref = score_dump(dump, tmp_path / "a.jsonl", _cfg(model, workers=1), progress=False)
    monkeypatch.setattr(read, "PARQUET_BATCH", 16_384)
    assert score_dump(dump, tmp_path / "b.jsonl", _cfg(model, workers=1), progress=False)["valid"] == ref["valid"]
    _same(_outputs(tmp_path / "a.jsonl"), _outputs(tmp_path / "b.jsonl"))


def test_scope_groups_spill_at_once_when_the_expected_rows_will_not_fit() -> None:
    from runtime.batch.partition import ScopeGroups

    t = pa.table({"user_id": ["u1", "u2"] * 50, "agent_id": ["a"] * 100, "line": np.arange(1, 101),
                  "x": np.zeros(100, np.float64)})
    roomy = ScopeGroups(memory_bytes=t.nbytes * 100, expected_rows=1_000)      # 10x the table fits
    tight = ScopeGroups(memory_bytes=t.nbytes * 100, expected_rows=1_000_000)  # 10,000x does not
    unknown = ScopeGroups(memory_bytes=t.nbytes * 100)
    try:
        for g in (roomy, tight, unknown):
            g.add(t)
        assert (roomy.spilled, tight.spilled, unknown.spilled) == (False, True, False)
        assert tight.spilled_rows == 100
        got = {(u, a): r.column("line").to_pylist() for u, a, r in tight.groups()}
        assert got == {("u1", "a"): list(range(1, 101, 2)), ("u2", "a"): list(range(2, 101, 2))}
    finally:
        for g in (roomy, tight, unknown):
            g.close()


def test_reading_a_chunk_pauses_the_garbage_collector_and_restores_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from runtime.store import dumps

    dump = tmp_path / "dump.jsonl"
    write_dump(varied_rows(30), dump)
    from runtime.batch import read as read_module

    seen: list[bool] = []
    real, real_columns = dumps.parse_row, read_module.to_columns

    def spy(obj: Any) -> Any:
        seen.append(gc.isenabled())
        return real(obj)

    def spy_columns(*args: Any) -> Any:
        seen.append(gc.isenabled())
        return real_columns(*args)

    monkeypatch.setattr(dumps, "parse_row", spy)
    monkeypatch.setattr(read_module, "to_columns", spy_columns)
    chunk = Chunk(str(dump), "jsonl", 1, 0, dump.stat().st_size)
    try:
        assert gc.isenabled()
        assert read_chunk(chunk, DIM).table.num_rows == 30 and gc.isenabled()
        gc.disable()
        read_chunk(chunk, DIM)
        assert not gc.isenabled()  # a caller's choice is left as it was
    finally:
        gc.enable()
    assert len(seen) > 2 and not any(seen)  # the columns built, and the rows MemIR read, twice


@pytest.mark.parametrize("target", [1, 300, 4096, 1 << 20])
def test_jsonl_cut_by_seeking_and_renumbered_reads_as_the_counted_chunks(tmp_path: Path, target: int) -> None:
    """The local engine cuts a JSONL file without reading it (numbered=False) and numbers each chunk's
    lines once the chunks before it came back: the same chunks, rows, rejects and line numbers as the
    chunks planned by reading the whole file, with a byte-order mark, blank and bad lines, and no final
    line end."""
    from runtime.batch.read import plan_chunks, renumbered

    plain = tmp_path / "plain.jsonl"
    write_dump(varied_rows(40), plain)
    lines = plain.read_text().splitlines()
    lines[3:3] = ["", "not json", ""]
    lines[20:20] = BAD_JSONL[:3]
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())  # no line end after the last record
    counted = list(plan_chunks(dump, target_bytes=target))
    cut = list(plan_chunks(dump, target_bytes=target, numbered=False))
    assert [(c.start, c.stop) for c in cut] == [(c.start, c.stop) for c in counted] and len(cut) > (target < 4096)
    line = 1
    for a, b in zip(counted, cut, strict=True):
        want, got = read_chunk(a, DIM), read_chunk(b, DIM)
        got, line = renumbered(got, line), line + got.lines
        assert json.dumps(got.table.to_pylist()) == json.dumps(want.table.to_pylist())  # NaN-aware
        assert got.rejects == want.rejects and got.rows == want.rows
    total = read_chunk(Chunk(str(dump), "jsonl", 1, 0, dump.stat().st_size), DIM)
    assert total.rows == 40 + 1 + 3 and len(total.rejects) == 4  # "not json" and three of BAD_JSONL
