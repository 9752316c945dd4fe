"""Causality both ways (seed 000 §2.1, §3.1): a memory's parents through ``derived_from``, and what
it led to — ``children``, ``descendants`` to a depth — in the scope's API, in ``explain``, in the
CLI and in the agent tools, on both backends; never across users, and consistent with cascade
forgetting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime import MemoryStore
from runtime.cli import main
from runtime.errors import NotFoundError, ValidationError
from runtime.integrations.tools import call_tool


def _family(store: MemoryStore) -> dict[str, str]:
    """root -> (a, b); a -> c; (b, c) -> d (a diamond: d is reached along two paths); an unrelated x."""
    me = store.scope(user_id="alice")
    ids: dict[str, str] = {}
    ids["root"] = me.write("The user booked a flight to Oslo on 12 May").id
    ids["a"] = me.write("The user travels to Norway in May", derived_from=[ids["root"]],
                        source_type="derived_inference").id
    ids["b"] = me.write("The user needs a hotel in Oslo for 12 May", derived_from=[ids["root"]],
                        source_type="derived_inference").id
    ids["c"] = me.write("The user may need a Norwegian SIM card", derived_from=[ids["a"]],
                        source_type="derived_inference").id
    ids["d"] = me.write("Suggest a hotel with a SIM card desk", derived_from=[ids["b"], ids["c"]],
                        source_type="derived_inference").id
    ids["x"] = me.write("The user's favourite colour is green").id
    return ids


def test_children_descendants_and_parents_walk_the_derivation_graph(store: MemoryStore) -> None:
    ids = _family(store)
    me = store.scope(user_id="alice")
    assert [r.id for r in me.children(ids["root"])] == [ids["a"], ids["b"]]          # oldest first
    assert [r.id for r in me.descendants(ids["root"], depth=1)] == [ids["a"], ids["b"]]
    assert [r.id for r in me.descendants(ids["root"], depth=2)] == [ids["a"], ids["b"], ids["c"], ids["d"]]
    assert [r.id for r in me.descendants(ids["root"])] == [ids["a"], ids["b"], ids["c"], ids["d"]]  # d once
    assert [r.id for r in me.descendants(ids["a"])] == [ids["c"], ids["d"]]
    assert me.children(ids["d"]) == [] and me.children(ids["x"]) == []
    assert [r.id for r in me.parents(ids["d"])] == sorted([ids["b"], ids["c"]],
                                                          key=lambda i: (me.get(i).event_time, i))
    assert me.parents(ids["root"]) == []
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValidationError, match="depth"):
            me.descendants(ids["root"], depth=bad)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        me.children("mem_nope")


def test_explain_names_both_directions_and_lineage_never_crosses_users(store: MemoryStore) -> None:
    ids = _family(store)
    me, bob = store.scope(user_id="alice"), store.scope(user_id="bob")
    e = me.explain(ids["b"])
    assert e.derived_from == [ids["root"]] and e.children == [ids["d"]]
    assert "derived from" in e.summary and "1 memory derived from it" in e.summary
    assert me.explain(ids["x"]).children == [] and me.explain(ids["x"]).derived_from == []
    # bob cannot see alice's lineage, not even by naming her ids, and his own graph is his
    for call in (bob.children, bob.descendants, bob.parents, bob.explain):
        with pytest.raises(NotFoundError):
            call(ids["root"])
    mine = bob.write("Bob's note derived from nothing of alice's")
    assert bob.children(mine.id) == [] and bob.explain(mine.id).children == []
    # a child bob writes cannot name alice's memory as its parent
    with pytest.raises((ValidationError, NotFoundError)):
        bob.write("bob derives from alice", derived_from=[ids["root"]])
    assert [r.id for r in me.children(ids["root"])] == [ids["a"], ids["b"]]


def test_cascade_forgetting_acts_on_exactly_the_descendants(store: MemoryStore) -> None:
    ids = _family(store)
    me = store.scope(user_id="alice")
    expected = {r.id for r in me.descendants(ids["a"])}
    report = me.forget(ids["a"], cascade="delete")
    assert set(report.deleted) == expected | {ids["a"]}
    assert [r.id for r in me.children(ids["root"])] == [ids["b"]]          # what is left of the graph
    assert me.children(ids["b"]) == []                                       # d went with c


def test_explain_in_the_cli_and_the_tools_shows_the_lineage(store: MemoryStore, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    ids = _family(store)
    me = store.scope(user_id="alice")
    out = call_tool(me, "explain_memory", {"memory_id": ids["c"]})
    assert out["derived_from"] == [ids["a"]] and out["children"] == [ids["d"]]
    assert "children" not in call_tool(me, "explain_memory", {"memory_id": ids["x"]})
    target = str(store.path)
    store.close()
    assert main(["explain", target, ids["c"], "--user", "alice"]) == 0
    text = capsys.readouterr().out
    assert f"derived from: {ids['a']}" in text and f"led to: {ids['d']}" in text
    assert main(["explain", target, ids["c"], "--user", "alice", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["children"] == [ids["d"]]


def test_the_async_twins_answer_the_same(store: MemoryStore) -> None:
    import asyncio

    ids = _family(store)
    me = store.scope(user_id="alice")

    async def go() -> tuple[list[str], list[str], list[str]]:
        kids, every, ups = await asyncio.gather(me.achildren(ids["root"]), me.adescendants(ids["root"], depth=2),
                                                me.aparents(ids["d"]))
        return [r.id for r in kids], [r.id for r in every], [r.id for r in ups]

    kids, every, ups = asyncio.run(go())
    assert kids == [r.id for r in me.children(ids["root"])]
    assert every == [r.id for r in me.descendants(ids["root"], depth=2)]
    assert ups == [r.id for r in me.parents(ids["d"])]
