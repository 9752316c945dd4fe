"""The code blocks of the README and of ``docs/``, found by their tag, for the tests that run them.

A block is tagged by the HTML comment on the line above its fence, which the rendered pages do not
show::

    <!-- example: fleet -->
    ```python
    ...
    ```

The README's one untagged ``python`` block is its agent example (the site includes it by snippet).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?:<!-- example: ([\w-]+) -->\n)?```(\w*)\n(.*?)^```$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    path: Path
    tag: str | None
    lang: str
    code: str


def sources() -> list[Path]:
    """The README and every page of the site, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> Iterator[Block]:
    for path in sources():
        for tag, lang, code in FENCE.findall(path.read_text(encoding="utf-8")):
            yield Block(path, tag or None, lang, code)


def block(tag: str, lang: str = "python") -> Block:
    """The one ``lang`` block tagged ``tag`` (an ``AssertionError`` names the trouble otherwise)."""
    found = [b for b in blocks() if b.tag == tag and b.lang == lang]
    assert len(found) == 1, f"expected one ```{lang} block tagged {tag!r} in README.md or docs/, found {len(found)}"
    return found[0]


def needs_encoder() -> None:
    from runtime.encoders import load_default_embedder
    from runtime.errors import EncoderUnavailableError

    try:
        load_default_embedder()
    except EncoderUnavailableError:
        pytest.skip("the ONNX encoder is not exported here (make encoder)")


def run_block(tag: str, where: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """Execute the ```python block tagged ``tag`` in ``where``; return what it printed."""
    needs_encoder()
    b = block(tag)
    monkeypatch.chdir(where)
    exec(compile(b.code, str(b.path.relative_to(ROOT)), "exec"), {"__name__": "docs"})
    return capsys.readouterr().out.strip()
