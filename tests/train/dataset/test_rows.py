"""train.dataset: rows → Parquet + manifest → datasets.Dataset → numpy, with integrity checks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runtime.errors import DataIntegrityError, SchemaMismatchError, ValidationError
from train.dataset import (
    MANIFEST_FILE,
    ROWS_FILE,
    RowBatch,
    decision_groups,
    load_rounds,
    load_spec,
    read_manifest,
    round_dir,
    to_numpy,
    write_round,
)
from utilitynet.features import spec_for

SPEC = spec_for(8, "test-encoder")
F = SPEC.n_features


def _fill(b: RowBatch, rng: np.random.Generator, *, episodes: int = 3, decisions: int = 2, items: int = 5,
          prefix: str = "ep", family: str = "travel", source: str = "sim") -> None:
    for e in range(episodes):
        for d in range(decisions):
            b.add(episode_id=f"{prefix}{e}", family=family, decision=d, step=10 * d + e, user_id=f"u{e % 2}",
                  item_ids=[f"{prefix}{e}-m{k}" for k in range(items)],
                  X=rng.standard_normal((items, F)).astype(np.float32), y=rng.random(items),
                  w=1 + rng.random(items),
                  tags=["useful" if k == 0 else "other" for k in range(items)], kept=rng.random(items) < 0.5,
                  source=source)


def _batch(rng: np.random.Generator, round_index: int = 0, **kw) -> RowBatch:  # type: ignore[no-untyped-def]
    b = RowBatch(SPEC, round_index=round_index)
    _fill(b, rng, **kw)
    return b


def test_round_trip_is_exact(tmp_path: Path, rng: np.random.Generator) -> None:
    b = _batch(rng, 3)
    _fill(b, rng, episodes=1, prefix="conv", family="locomo", source="locomo")
    expected = b.to_table()
    out = write_round(b, round_dir(tmp_path / "data", 3),
                      manifest={"seed": 11, "config": {"capacity_frac": 0.2}})

    assert out == tmp_path / "data" / "round_003"
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_FILE, ROWS_FILE]
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["round_003"]  # no temp dir left behind
    ds = load_rounds([out])
    assert ds.num_rows == len(b) == 40
    X, y, w, groups = to_numpy(ds)
    X0 = np.stack(expected["features"].to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(X, X0)
    assert X.dtype == np.float32 and X.shape == (40, F) and X.flags.writeable
    np.testing.assert_array_equal(y, expected["label"].to_numpy())
    np.testing.assert_array_equal(w, expected["weight"].to_numpy())
    ep = np.asarray(ds["episode_id"])
    # groups: one dense code per episode id, same code ⇔ same episode
    assert len(np.unique(groups)) == len(np.unique(ep)) == 4
    assert all(len(set(ep[groups == g])) == 1 for g in np.unique(groups))
    for col in ("source", "episode_id", "family", "user_id", "item_id", "tag", "kept", "step", "decision",
                "round"):
        assert ds[col] == expected[col].to_pylist(), col
    assert set(ds["round"]) == {3}

    man = read_manifest(out)
    assert man["round"] == 3 and man["seed"] == 11 and man["config"] == {"capacity_frac": 0.2}
    assert man["rows"] == 40 and man["episodes"] == 4 and man["decisions"] == 8
    assert man["counts"]["source"] == {"sim": 30, "locomo": 10}
    assert man["counts"]["family"] == {"travel": 30, "locomo": 10}
    assert man["counts"]["tag"] == {"useful": 8, "other": 32}
    assert man["positive_rate"] == pytest.approx(float(np.mean(y > 0.5)))
    assert man["feature_spec"]["version"] == SPEC.version and man["feature_spec"]["n_features"] == F
    assert load_spec(out) == SPEC


def test_features_are_stored_as_fixed_size_float32_lists(tmp_path: Path, rng: np.random.Generator) -> None:
    out = write_round(_batch(rng), tmp_path / "r", manifest={})
    t = pq.read_table(out / ROWS_FILE)
    ft = t.schema.field("features").type
    assert pa.types.is_fixed_size_list(ft) and ft.list_size == F and ft.value_type == pa.float32()
    assert str(t.schema.field("round").type) == "int32" and str(t.schema.field("kept").type) == "bool"


def test_tampered_parquet_is_caught(tmp_path: Path, rng: np.random.Generator) -> None:
    out = write_round(_batch(rng), tmp_path / "r", manifest={})
    t = pq.read_table(out / ROWS_FILE)
    pq.write_table(t.slice(1), out / ROWS_FILE)  # a valid Parquet file, one row short
    with pytest.raises(DataIntegrityError, match="rows.parquet does not match its manifest"):
        load_rounds([out])
    (out / MANIFEST_FILE).unlink()
    with pytest.raises(DataIntegrityError, match="no readable manifest.json"):
        load_rounds(out)


def test_validation_names_each_bad_column_and_count(tmp_path: Path, rng: np.random.Generator) -> None:
    b = RowBatch(SPEC)
    X = rng.standard_normal((6, F)).astype(np.float32)
    X[1, 0], X[4, -1] = np.nan, np.inf
    y = np.array([0.0, 1.0, 1.5, 0.2, -0.1, 0.3])
    w = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 2.0])
    b.add(episode_id="e", family="f", decision=0, step=0, user_id="u", item_ids=list("abcdef"), X=X, y=y, w=w,
          tags=["other"] * 6, kept=np.ones(6, bool))
    with pytest.raises(ValidationError) as ei:
        write_round(b, tmp_path / "r", manifest={})
    err = ei.value
    assert err.field == "features"
    assert [c for c, _ in err.problems] == ["features", "label", "weight"]
    msgs = dict(err.problems)
    assert msgs["features"].startswith("2 rows") and msgs["label"].startswith("2 rows")
    assert msgs["weight"].startswith("1 rows") and "row 1" in msgs["weight"]
    assert not (tmp_path / "r").exists() and list(tmp_path.iterdir()) == []


def test_add_checks_shapes_and_vocabulary(rng: np.random.Generator) -> None:
    b = RowBatch(SPEC)
    ok = {"episode_id": "e", "family": "f", "decision": 0, "step": 0, "user_id": "u", "item_ids": ["a", "b"],
          "X": np.zeros((2, F)), "y": [0.0, 1.0], "w": [1.0, 1.0], "tags": ["other", "useful"],
          "kept": [True, False]}
    with pytest.raises(ValidationError) as ei:
        b.add(**{**ok, "X": np.zeros((2, F - 1))})
    assert ei.value.field == "X"
    with pytest.raises(ValidationError) as ei:
        b.add(**{**ok, "y": [0.5]})
    assert ei.value.field == "y"
    with pytest.raises(ValidationError, match="source must be one of"):
        b.add(**{**ok, "source": "web"})
    b.add(**ok)
    assert len(b) == 2


def test_write_refuses_existing_dir_bad_manifest_and_empty_batch(tmp_path: Path,
                                                                 rng: np.random.Generator) -> None:
    with pytest.raises(ValidationError, match="empty"):
        write_round(RowBatch(SPEC), tmp_path / "r", manifest={})
    with pytest.raises(ValidationError, match=r"\['rows', 'sha256'\]"):
        write_round(_batch(rng), tmp_path / "r", manifest={"sha256": "x", "rows": 3})
    with pytest.raises(ValidationError, match="JSON-serialisable"):
        write_round(_batch(rng), tmp_path / "r", manifest={"when": object()})
    out = write_round(_batch(rng, episodes=1), tmp_path / "r", manifest={"v": 1})
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_round(_batch(rng), out, manifest={"v": 2})
    write_round(_batch(rng, episodes=2), out, manifest={"v": 2}, overwrite=True)
    assert read_manifest(out)["v"] == 2 and load_rounds(out).num_rows == 20
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_multi_round_aggregation(tmp_path: Path, rng: np.random.Generator) -> None:
    r0 = write_round(_batch(rng, 0, episodes=2, prefix="a"), round_dir(tmp_path, 0), manifest={})
    r1 = write_round(_batch(rng, 1, episodes=3, prefix="b"), round_dir(tmp_path, 1), manifest={})
    ds = load_rounds([r0, r1])
    assert ds.num_rows == 20 + 30
    assert ds["round"] == [0] * 20 + [1] * 30
    X, y, _w, groups = to_numpy(ds)
    X0, y0, _, _ = to_numpy(load_rounds(r0))
    np.testing.assert_array_equal(X[:20], X0)
    np.testing.assert_array_equal(y[:20], y0)
    assert len(np.unique(groups)) == 5
    dg = decision_groups(ds)
    pairs = set(zip(ds["episode_id"], ds["decision"]))
    assert len(np.unique(dg)) == len(pairs) == 10
    # to_numpy honours datasets' index mappings (select/shuffle)
    sub = ds.select([49, 0, 25])
    Xs, ys, _, _ = to_numpy(sub)
    np.testing.assert_array_equal(Xs, X[[49, 0, 25]])
    np.testing.assert_array_equal(ys, y[[49, 0, 25]])


def test_rounds_with_different_feature_specs_do_not_mix(tmp_path: Path, rng: np.random.Generator) -> None:
    r0 = write_round(_batch(rng), tmp_path / "a", manifest={})
    other = RowBatch(spec_for(4, "another-encoder"))
    other.add(episode_id="e", family="f", decision=0, step=0, user_id="u", item_ids=["x"],
              X=np.zeros((1, other.spec.n_features)), y=[1.0], w=[1.0], tags=["useful"], kept=[True])
    r1 = write_round(other, tmp_path / "b", manifest={})
    with pytest.raises(SchemaMismatchError, match="different feature specs"):
        load_rounds([r0, r1])
    with pytest.raises(SchemaMismatchError):
        load_spec([r0, r1])


def test_add_run_slices_labels_per_decision(tmp_path: Path, rng: np.random.Generator) -> None:
    decisions = [SimpleNamespace(user_id="u", step=s, ids=[f"m{s}{k}" for k in range(n)],
                                 X=rng.standard_normal((n, F)).astype(np.float32), kept=np.ones(n, bool),
                                 trigger="every_n", sessions=[f"sess{s}"] * (n - 1) + [None])
                 for s, n in ((5, 3), (9, 4))]
    run = SimpleNamespace(episode_id="ep7", decisions=decisions)
    labels = SimpleNamespace(y=np.linspace(0, 1, 7, dtype=np.float32), w=np.ones(7, np.float32),
                             tag=["useful"] * 3 + ["stale"] * 4)
    b = RowBatch(SPEC, round_index=2)
    b.add_run(run, labels, family="procurement")  # type: ignore[arg-type]
    t = b.to_table()
    assert t["decision"].to_pylist() == [0, 0, 0, 1, 1, 1, 1]
    assert t["step"].to_pylist() == [5, 5, 5, 9, 9, 9, 9]
    assert t["item_id"].to_pylist()[3] == "m90" and t["tag"].to_pylist()[3] == "stale"
    assert t["session"].to_pylist() == ["sess5", "sess5", "", "sess9", "sess9", "sess9", ""]  # "" = no session
    np.testing.assert_array_equal(t["label"].to_numpy(), labels.y)
    with pytest.raises(ValidationError, match="labels cover 6 rows"):
        b.add_run(run, SimpleNamespace(y=labels.y[:6], w=labels.w[:6], tag=labels.tag[:6]),  # type: ignore[arg-type]
                  family="procurement")
    manifest = json.loads((write_round(b, tmp_path / "r", manifest={}) / MANIFEST_FILE).read_text())
    assert manifest["round"] == 2 and manifest["decisions"] == 2
