"""A hostile rule regex cannot stall retention: ``(a+)+$`` (exponential in Python's ``re``) runs
on RE2 in linear time — at most 50 ms extra over the same decision without the rule — and a
pattern RE2 cannot run in linear time (a backreference) is refused at the boundary."""

from __future__ import annotations

import time

import pytest

from runtime import MemoryStore
from runtime.errors import ValidationError
from runtime.scoring import make_baseline

HOSTILE = {"must_keep": [{"name": "evil", "when": {"content_regex": "(a+)+$"}}]}


def _best(fn, n: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def test_hostile_regex_adds_at_most_50ms(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", agent_id="a")
    me.write_many(["a" * n + "!" for n in range(10, 210)])  # 200 near-matches, up to 209 characters
    scorer = make_baseline("recency")
    plain = _best(lambda: me.retain(150, scorer=scorer, dry_run=True))
    hostile = _best(lambda: me.retain(150, scorer=scorer, rules=HOSTILE, dry_run=True))
    print(f"retention {plain * 1e3:.1f} ms, with (a+)+$ {hostile * 1e3:.1f} ms")
    assert hostile - plain <= 0.050


def test_backreference_is_refused_with_the_reason(store: MemoryStore) -> None:
    me = store.scope(user_id="alice", agent_id="a")
    me.write("x")
    with pytest.raises(ValidationError, match="linear-time engine"):
        me.retain(1, scorer=make_baseline("recency"), rules={"must_keep": [
            {"name": "bad", "when": {"content_regex": r"(a)\1"}}]})
