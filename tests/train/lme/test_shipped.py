"""The shipped LongMemEval rows: a round trip (named features and embeddings to fp16; embeddings only
when asked for), checksums, and a clear refusal of rows built for another encoder or feature schema."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from runtime.errors import ValidationError
from train.conversation_rows import ConversationRows
from train.lme.shipped import read_shipped, write_shipped
from utilitynet.features import FEATURE_NAMES, spec_for

D = 8


def rows(qid: str, n: int, seed: int) -> ConversationRows:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, len(FEATURE_NAMES) + D)).astype(np.float32)
    items = [f"D1:{i % 3 + 1}" for i in range(n)]  # turns repeat across decisions: one vector each
    for i, it in enumerate(items):
        X[i, len(FEATURE_NAMES):] = X[items.index(it), len(FEATURE_NAMES):]
    y = (np.arange(n) % 4 == 0).astype(np.float32)
    return ConversationRows(qid, X, y, np.ones(n, np.float32), ["evidence" if v else "other" for v in y], items,
                            np.arange(n, dtype=np.int32) // 2, np.arange(n, dtype=np.int32),
                            [f"s{i % 2}" for i in range(n)], np.arange(n) % 3 == 0)


def test_round_trip_split_and_checks(tmp_path: Path) -> None:
    spec = spec_for(D, "enc-a")
    parts = [rows("q1", 6, 0), rows("q2", 5, 1), rows("q3", 4, 2)]
    out = write_shipped(parts, {"q1": 0, "q2": 1, "q3": 2}, 0, spec, tmp_path / "lme", source={"file": "x"},
                        want_vectors=True)
    assert (out / "LICENSE").read_text().startswith("The rows in this directory are derived from LongMemEval")
    train, val, man = read_shipped(out, spec)
    assert man["rows"] == 15 and man["vectors"] == 9 and man["questions"] == {"lme": 2, "lme-validation": 1}
    assert val.has_vectors and train.has_vectors
    np.testing.assert_allclose(val.X, parts[0].X, rtol=2e-3, atol=2e-3)  # fp16: 3 significant digits
    np.testing.assert_allclose(train.X, np.vstack([parts[1].X, parts[2].X]), rtol=2e-3, atol=2e-3)
    assert train.y.tolist() == parts[1].y.tolist() + parts[2].y.tolist()
    assert val.session.tolist() == parts[0].session and val.kept.tolist() == parts[0].kept.tolist()
    assert len(set(train.decision[:5]) & set(train.decision[5:])) == 0  # decisions never shared across questions
    with pytest.raises(ValidationError, match="encoder"):
        read_shipped(out, spec_for(D, "enc-b"))
    with (out / "rows.parquet").open("r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02")
    with pytest.raises(ValidationError, match="sha256"):
        read_shipped(out, spec)


def test_rows_without_vectors_read_back_with_zero_embeddings(tmp_path: Path) -> None:
    spec = spec_for(D, "enc-a")
    parts = [rows("q1", 6, 0), rows("q2", 5, 1)]
    out = write_shipped(parts, {"q1": 0, "q2": 1}, 0, spec, tmp_path / "lme", source={"file": "x"})
    train, val, man = read_shipped(out, spec)
    assert man["vectors"] == 0 and not train.has_vectors
    m = len(FEATURE_NAMES)
    np.testing.assert_allclose(train.X[:, :m], parts[1].X[:, :m], rtol=2e-3, atol=2e-3)
    assert not train.X[:, m:].any()
