"""The shape of the runtime: rooms, one-way calls, no private reaches.

Walking one record from ``write`` to archived (a write whose session change fires a retention
decision that archives it) must only ever call *down*: the module-to-module calls observed form
a DAG whose only entry is the scope facade, and no room calls back into the store or the scope.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

from runtime import MemoryStore, RetentionPolicy, Triggers
from runtime.encoders import HashEmbedder
from runtime.scoring import FakeScorer

ROOT = Path(__file__).resolve().parents[2]
ROOMS = {"experiments", "record", "store", "retention", "scoring", "encoders", "annotate", "batch", "integrations", "ui"}


def _module(frame: FrameType | None) -> str | None:
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("runtime"):
            return str(name)
        if not name.startswith(("pydantic", "contextlib", "functools", "typing")):
            return None  # called from a library (numpy, sqlite3...) or the test
        frame = frame.f_back
    return None


def test_a_record_walks_down_from_write_to_archived(tmp_path: Path) -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    with MemoryStore.open(tmp_path / "s.sqlite", embedder=HashEmbedder(dim=32)) as store:
        me = store.scope(user_id="u1", policy=RetentionPolicy(
            capacity=1, scorer=FakeScorer(lambda r: 0.9 if "second" in r.content else 0.1),
            triggers=Triggers(on_session_end=True)))
        first = me.write("the first memory", session_id="s1")
        me.write("the second memory", session_id="s1")

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event != "call":
                return
            callee = frame.f_globals.get("__name__", "")
            caller = _module(frame.f_back)
            if callee.startswith("runtime") and caller is not None and caller != callee:
                edges[caller].add(callee)

        sys.setprofile(profile)
        try:
            me.write("a third memory in a new session", session_id="s2")  # closes s1 -> decision
        finally:
            sys.setprofile(None)
        assert me.explain(first.id).state == "archive"  # the walk really ended in the archive
    assert edges["runtime.store.scope"], "the walk did not go through the scope facade"
    # No module is ever called by one it (transitively) called: the call graph is a DAG.
    seen: set[str] = set()
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        assert m not in seen or m in done, f"call cycle between modules: {' -> '.join(path + [m])}"
        if m in done:
            return
        seen.add(m)
        for n in sorted(edges.get(m, ())):
            visit(n, path + [m])
        done.add(m)

    for m in sorted(edges):
        visit(m, [])
    callers_of_facade = {c for c, cs in edges.items() for x in cs if x in ("runtime.store.scope", "runtime.store.store")}
    assert callers_of_facade <= {"runtime.store.store", "runtime"}, callers_of_facade


def test_no_module_takes_another_modules_private_names() -> None:
    """``from x import _name`` and ``obj._attr`` on objects of other modules are not allowed; a
    module's own privates are its business."""
    offenders = []
    for path in sorted((ROOT / "runtime").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name.startswith("_") and not a.name.startswith("__")
                                                        for a in node.names):
                offenders.append(f"{path.relative_to(ROOT)}: from {node.module} import _…")
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: ….{node.attr}")
    assert offenders == []


def test_the_rooms_are_the_documented_layout() -> None:
    rooms = {p.name for p in (ROOT / "runtime").iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert rooms == ROOMS
    layout = (ROOT / "docs" / "architecture.md").read_text()
    for room in rooms:
        assert f"`runtime/{room}/`" in layout, f"docs/architecture.md's layout table does not describe runtime/{room}/"
