"""Shared fixtures: a real SQLite store on disk (in ``tmp_path``) with the fast ``HashEmbedder``
test double, a seeded numpy generator, and a fixed "now" so time-dependent behaviour is exact."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# `pytest` (unlike `python -m pytest`) puts tests/ but not the repo root on sys.path, and then the
# folder tests/runtime/ (no __init__.py) would be imported as a namespace package named `runtime`.
# With the root on the path the real package wins (a regular package beats a namespace portion).
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from hypothesis import strategies as st  # noqa: E402

from runtime import MemoryStore, StoreConfig  # noqa: E402
from runtime.encoders import HashEmbedder  # noqa: E402
from runtime.record import (  # noqa: E402
    DialogRole,
    Flag,
    MemIR,
    Metadata,
    Provenance,
    RoleContext,
    Sensitivity,
    SourceType,
    Usage,
)
from tests.pg import PgServer, is_url, start_server, stored_bytes  # noqa: E402

EMBED_DIM = 64
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def rng() -> np.random.Generator:
    """A numpy generator with an explicit seed (every test that draws numbers uses this)."""
    return np.random.default_rng(20250601)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder(dim=EMBED_DIM, seed=0)


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture(scope="session")
def onnx_encoder() -> Any:
    """The real ONNX all-MiniLM-L6-v2 encoder, loaded once; the test is skipped where it is not
    exported (``make encoder``)."""
    from runtime.encoders import load_default_embedder
    from runtime.errors import EncoderUnavailableError

    try:
        return load_default_embedder()
    except EncoderUnavailableError:
        pytest.skip("the ONNX encoder is not exported here (make encoder)")


BACKENDS = ("sqlite", "postgres")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses a store (``make_store``, ``store``, ``store_target``) runs on both
    backends, ``[sqlite]`` and ``[postgres]``, unless marked ``sqlite_only``."""
    if "backend" in metafunc.fixturenames:
        if metafunc.definition.get_closest_marker("sqlite_only"):
            backends = ["sqlite"]
        elif metafunc.definition.get_closest_marker("postgres_only"):
            backends = ["postgres"]
        else:
            backends = list(BACKENDS)
        metafunc.parametrize("backend", backends)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The PostgreSQL server of this test session (started on first use; see tests/pg.py)."""
    yield from start_server()


@pytest.fixture
def store_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], Any]]:
    """``store_target(name)``: where a store called ``name`` lives on this test's backend — a file
    in ``tmp_path`` (SQLite), or a fresh database's URL (PostgreSQL; the same name, the same
    database, within one test)."""
    if backend == "sqlite":
        yield lambda name="mem.sqlite": tmp_path / name
        return
    server: PgServer = request.getfixturevalue("pg_server")
    urls: dict[str, str] = {}

    def _target(name: str = "mem.sqlite") -> str:
        if name not in urls:
            urls[name] = server.fresh()
        return urls[name]

    yield _target
    server.drop_all()


@pytest.fixture
def make_store(store_target: Callable[[str], Any], embedder: HashEmbedder) -> Iterator[Callable[..., MemoryStore]]:
    """Factory: ``make_store(name="mem.sqlite", config=None, embedder=None)`` opens a store on this
    test's backend (see ``store_target``); every store opened through it is closed at teardown."""
    opened: list[MemoryStore] = []

    def _make(name: str = "mem.sqlite", *, config: StoreConfig | None = None,
              embedder: HashEmbedder | None = None) -> MemoryStore:
        st = MemoryStore.open(store_target(name), embedder=embedder or _default, config=config)
        opened.append(st)
        return st

    _default = embedder
    yield _make
    for opened_store in opened:
        opened_store.close()


@pytest.fixture
def store(make_store: Callable[..., MemoryStore]) -> MemoryStore:
    """A fresh store with ``HashEmbedder(dim=64)``: ``tmp_path/mem.sqlite`` (WAL), or a fresh
    PostgreSQL database."""
    return make_store()


def unit_vectors(rng: np.random.Generator, n: int, dim: int = EMBED_DIM) -> np.ndarray:
    """``n`` random float32 unit vectors."""
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def file_bytes(db_path: str | Path) -> dict[str, bytes]:
    """Raw bytes of a store: an SQLite file and its ``-wal``/``-shm`` companions (those that
    exist), or every table file of a PostgreSQL store's database (``tests/pg.py``)."""
    if is_url(db_path):
        return stored_bytes(str(db_path))
    out = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(db_path) + suffix)
        if p.exists():
            out[p.name] = p.read_bytes()
    return out


# ---------------------------------------------------------------- hypothesis strategies for MemIR
ids = st.from_regex(r"[A-Za-z0-9_.:@\-]{1,24}", fullmatch=True)
labels = st.text(min_size=1, max_size=24).map(str.strip).filter(lambda s: bool(s) and "\x00" not in s)
# Timezones: naive (taken as UTC), UTC and two offsets, so normalisation to UTC is exercised.
zones = st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30)),
                         timezone(timedelta(hours=-8))])
# 1900–2200: the store's REAL timestamp columns are microsecond-exact in this range (see test_store).
datetimes = st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1), timezones=zones)
half_lives = st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=3650))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=16))
contents = st.text(min_size=1, max_size=200).filter(lambda s: s.strip() and "\x00" not in s)


@st.composite
def memir_records(draw: st.DrawFn, user_id: str | None = None, agent_id: str | None = None,
                  with_parents: bool = True) -> MemIR:
    """A random valid MemIR with every field group populated (or defaulted) at random."""
    prov = Provenance(
        type=draw(st.sampled_from(SourceType)),
        user_id=user_id or draw(ids),
        agent_id=agent_id or draw(ids),
        session_id=draw(st.none() | ids),
        timestamp=draw(st.none() | datetimes),
        source_entity=draw(st.none() | labels),
        trigger=draw(st.none() | labels),
        derived_from=draw(st.lists(ids, max_size=3)) if with_parents else [],
        source_uri=draw(st.none() | st.text(max_size=40)),
        source_version=draw(st.none() | labels),
    )
    role = RoleContext(
        active_role=draw(labels), sub_role=draw(st.none() | labels),
        dialog_role=draw(st.sampled_from(DialogRole)), tone=draw(st.none() | labels),
        task_id=draw(st.none() | ids))
    meta = Metadata(
        confidence=draw(st.floats(0.0, 1.0)),
        freshness_half_life=draw(st.none() | half_lives),
        expires_at=draw(st.none() | datetimes),
        tags=draw(st.lists(labels, max_size=4)),
        related=draw(st.lists(ids, max_size=3)),
        sensitivity=draw(st.sampled_from(Sensitivity)),
        flags=draw(st.lists(st.sampled_from(Flag), max_size=4)),
        attributes=draw(st.dictionaries(labels, json_scalars, max_size=4)),
    )
    usage = Usage(access_count=draw(st.integers(0, 10**6)), last_accessed_at=draw(st.none() | datetimes),
                  utility=draw(st.none() | st.floats(-1e6, 1e6)), retention_reason=draw(st.none() | labels))
    rec_id = draw(ids.filter(lambda i: i not in prov.derived_from))
    return MemIR(id=rec_id, content=draw(contents), created_at=draw(datetimes), provenance=prov,
                 role_context=role, metadata=meta, usage=usage)


WORDS = ["must", "flight", "Lisbon", "Friday", "budget", "400", "thanks", "Ana", "hotel", "moved", "ASAP",
         "review", "10:30", "my", "you"]


def word_records(rng: np.random.Generator, n: int, now: datetime, *, flag: Flag, flag_every: int,
                 random_confidence: bool = False) -> list[MemIR]:
    """``n`` short records from a fixed vocabulary (realistic text for featurize/scorer tests).

    Draw order per record: words, length, age, then (optionally) confidence — so a seed gives the
    same records wherever the helper is used.
    """
    out = []
    for i in range(n):
        content = " ".join(rng.choice(WORDS, int(rng.integers(1, 12))))
        created = now - timedelta(hours=float(rng.uniform(0, 500)))
        md = Metadata(flags=[flag] if i % flag_every == 0 else [])
        if random_confidence:
            md = Metadata(confidence=float(rng.uniform()), flags=md.flags)
        out.append(MemIR(content=content, created_at=created, provenance=Provenance(user_id="u"), metadata=md))
    return out
