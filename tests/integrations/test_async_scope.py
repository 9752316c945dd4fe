"""The async scope: ``awrite / arecall / aretain / aforget`` with real concurrency.

What is checked: 100 concurrent coroutines get exactly what the sync calls give (contents,
redaction, vectors, isolation, errors), their texts are embedded in a handful of encoder calls
rather than 100, every blocking call runs off the event loop's thread, and the loop keeps
ticking while they run.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime import FakeScorer, MemoryStore, StoreConfig
from runtime.encoders import HashEmbedder
from runtime.errors import NotFoundError, ValidationError
from tests.conftest import EMBED_DIM

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_integrations import with_heartbeat  # noqa: E402  (the benchmark's own loop-stall measurement)

N = 100


class _ThreadRecordingEmbedder(HashEmbedder):
    """HashEmbedder that records the thread of every encode and can be made slow."""

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__(dim=EMBED_DIM, seed=0)
        self.delay_s = delay_s
        self.threads: set[int] = set()
        self.batches: list[int] = []

    def encode(self, texts: Any) -> np.ndarray:
        self.threads.add(threading.get_ident())
        self.batches.append(len(texts))
        if self.delay_s:
            time.sleep(self.delay_s)
        return super().encode(texts)


def test_100_concurrent_writes_and_recalls_match_the_sync_path(make_store: Any) -> None:
    emb = _ThreadRecordingEmbedder()
    store = make_store("async.sqlite", embedder=emb)
    ref = make_store("sync.sqlite", embedder=HashEmbedder(dim=EMBED_DIM, seed=0))
    texts = [f"note {i}: Orion budget line {i}, call +44 20 7946 09{i:02d}" for i in range(N)]
    a, s = store.scope(user_id="alice"), ref.scope(user_id="alice")

    async def go() -> tuple[list[Any], list[Any]]:
        recs = await asyncio.gather(*(a.awrite(t, tags=["orion"], session_id="s1") for t in texts))
        hits = await asyncio.gather(*(a.arecall(f"note {i}", k=3) for i in range(N)))
        return recs, hits

    loop_thread: list[int] = []

    async def main() -> tuple[list[Any], list[Any]]:
        loop_thread.append(threading.get_ident())
        return await go()

    recs, hits = asyncio.run(main())
    sync_recs = [s.write(t, tags=["orion"], session_id="s1") for t in texts]
    # the same stored contents (phone numbers redacted the same way), in call order
    assert [r.content for r in recs] == [r.content for r in sync_recs]
    assert all("7946" not in r.content for r in recs)
    assert a.count() == N
    # the same vectors as the sync path stores
    got = {r.content: v for r, v in zip(*a.list_with_vectors()[:2])}
    want = {r.content: v for r, v in zip(*s.list_with_vectors()[:2])}
    assert got.keys() == want.keys()
    for c in got:
        np.testing.assert_allclose(got[c], want[c], rtol=0, atol=1e-6)
    # the same recall results as the sync path (similarities; ties may break by write time)
    for i, hs in enumerate(hits):
        want_hits = s.recall(f"note {i}", k=3)
        np.testing.assert_allclose([h.score.similarity for h in hs], [h.score.similarity for h in want_hits],
                                   atol=1e-6)
    # 200 texts, a few encoder calls; none of them on the event loop's thread
    assert len(emb.batches) <= 10 and sum(emb.batches) == 2 * N
    assert loop_thread[0] not in emb.threads


def test_the_event_loop_keeps_ticking_while_blocking_work_runs() -> None:
    """A deliberately slow encoder (500 ms a call): the loop's heartbeat never waits for it.

    Were any encode (or anything as slow) run on the loop, the heartbeat would stall ≥ 500 ms; the
    bound leaves room for what a busy 2-core box does to any thread (a starved core). The objects
    alive before the test are frozen out of the garbage collector while it measures: in the full
    suite (torch, Ray and every earlier test's modules loaded) one full collection that happened to
    land on the loop's thread stalled it 497 ms, which is the suite's heap, not the store.
    bench/bench_integrations.py reports the stalls with the real encoder."""
    emb = _ThreadRecordingEmbedder(delay_s=0.5)
    loop_thread: list[int] = []
    with MemoryStore.open(":memory:", embedder=emb) as store:
        a = store.scope(user_id="alice")

        async def work() -> list[Any]:
            loop_thread.append(threading.get_ident())
            recs = await asyncio.gather(*(a.awrite(f"item {i} for the heartbeat") for i in range(N)))
            await asyncio.gather(*(a.arecall(f"item {i}", k=2) for i in range(N)))
            await a.aretain(capacity=10, scorer=FakeScorer())
            return recs

        gc.collect()
        gc.freeze()
        try:
            recs, lag = asyncio.run(with_heartbeat(work()))
        finally:
            gc.unfreeze()
    assert len(recs) == N
    print(f"longest event-loop stall with 100 coroutines and a 500 ms encoder: {lag * 1000:.1f} ms")
    assert loop_thread[0] not in emb.threads
    assert lag < 0.3, f"the loop was held up {lag * 1000:.0f} ms"


def test_a_bad_item_fails_alone_and_cancellation_leaves_the_rest(store: MemoryStore) -> None:
    a = store.scope(user_id="alice")

    async def go() -> list[Any]:
        return await asyncio.gather(a.awrite("fine one"), a.awrite("   "), a.awrite("fine two", confidence=2.0),
                                    a.awrite("fine three"), return_exceptions=True)

    out = asyncio.run(go())
    assert isinstance(out[1], ValidationError) and out[1].field == "content"
    assert isinstance(out[2], ValidationError) and "confidence" in str(out[2].field)
    assert sorted(r.content for r in a.list()) == ["fine one", "fine three"]

    async def cancel_one() -> list[Any]:
        tasks = [asyncio.create_task(a.awrite(f"kept {i}")) for i in range(5)]
        tasks[2].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    res = asyncio.run(cancel_one())
    assert isinstance(res[2], asyncio.CancelledError)
    assert {f"kept {i}" for i in (0, 1, 3, 4)} <= {r.content for r in a.list()}


def test_concurrent_users_stay_isolated(store: MemoryStore) -> None:
    alice, bob = store.scope(user_id="alice"), store.scope(user_id="bob")

    async def go() -> list[Any]:
        writes = [alice.awrite(f"alice secret plan {i}") for i in range(50)]
        writes += [bob.awrite(f"bob grocery list {i}") for i in range(50)]
        await asyncio.gather(*writes)
        return await asyncio.gather(*(bob.arecall(f"alice secret plan {i}", k=5) for i in range(50)))

    for hits in asyncio.run(go()):
        assert hits and all(h.record.provenance.user_id == "bob" for h in hits)
    assert alice.count() == 50 and bob.count() == 50


def test_async_update_history_forget_retain_explain(store: MemoryStore) -> None:
    a = store.scope(user_id="alice")

    async def go() -> None:
        old = await a.awrite("Orion budget is 40k", tags=["orion"])
        new = await a.aupdate(old.id, "Orion budget is 55k")
        assert [v.record.content for v in await a.ahistory(new.id)] == ["Orion budget is 40k", "Orion budget is 55k"]
        assert (await a.aget(new.id)).metadata.tags == ["orion"]
        await asyncio.gather(*(a.awrite(f"filler {i}") for i in range(20)))
        d = await a.aretain(capacity=5, scorer=FakeScorer())
        assert len(d.kept) == 5
        assert (await a.aexplain(d.kept[0])).memory_id == d.kept[0]
        rep = await a.aforget(new.id)
        assert set(rep.deleted) | set(rep.redacted) >= {old.id, new.id}
        with pytest.raises(NotFoundError):
            await a.aget(new.id)
        assert len(await a.alist(limit=3)) == 3

    asyncio.run(go())


def test_async_workers_is_validated() -> None:
    with pytest.raises(ValidationError, match="async_workers"):
        StoreConfig(async_workers=0)
