"""docs/architecture.md walks the write and retain paths stop by stop; every stop it names exists.

A stop names a file (`` `runtime/store/writing.py` ``) and usually a function or class in it
(`` `runtime/store/writing.py` · `write_one` ``, `` · `Scope.retain` ``). The walk is only useful
while it is true, so this test fails when a file moves or a name changes without the doc.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
WALKS = ("## 4. The write walk", "## 5. The recall walk", "## 6. The retain walk")
NAMED = re.compile(r"`([\w/]+\.py)`(?:\s*·\s*`([\w.]+)`)?")


def _section(text: str, title: str) -> str:
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else None]


def _stops() -> list[tuple[str, str, str | None]]:
    text = DOC.read_text(encoding="utf-8")
    out = []
    for title in WALKS:
        for path, symbol in NAMED.findall(_section(text, title)):
            out.append((title, path, symbol or None))
    return out


def test_each_walk_has_numbered_stops() -> None:
    text = DOC.read_text(encoding="utf-8")
    for title in WALKS:
        numbers = [int(n) for n in re.findall(r"^(\d+)\. \*\*", _section(text, title), flags=re.M)]
        assert numbers and numbers == list(range(1, len(numbers) + 1)), f"{title}: stops {numbers}"


@pytest.mark.parametrize(("walk", "path", "symbol"), _stops())
def test_every_named_stop_exists(walk: str, path: str, symbol: str | None) -> None:
    # a full path, or one relative to runtime/ or runtime/store/ (the recall walk's backend files)
    file = next((c for c in (ROOT / path, ROOT / "runtime" / path, ROOT / "runtime" / "store" / path) if c.is_file()),
                None)
    assert file is not None, f"{walk}: {path} does not exist"
    if symbol is None:
        return
    module = importlib.import_module(".".join(file.relative_to(ROOT).with_suffix("").parts))
    obj: object = module
    for part in symbol.split("."):
        assert hasattr(obj, part), f"{walk}: {path} has no {symbol}"
        obj = getattr(obj, part)
