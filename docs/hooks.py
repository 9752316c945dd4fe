"""mkdocs hooks: the evaluation and benchmark plots live in ``reports/`` (where ``make eval`` and
``make bench`` write them), and the site serves them under ``figures/`` without a copy in ``docs/``;
the docstrings' Sphinx-style roles render as plain code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def on_files(files: Files, config: Any) -> Files:
    for png in sorted(REPORTS.glob("*.png")):
        files.append(File.generated(config, f"figures/{png.name}", abs_src_path=str(png)))
    return files


_ROLE = re.compile(r":(?:meth|class|func|mod|attr|data|exc|obj):<code>~?([\w.]+)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """The docstrings cross-reference Sphinx-style (``:meth:`open```, ``:class:`~a.b.C```), which
    the Python handler renders as the role's name before the code: show the code alone, as Sphinx
    would (the last dotted part for a ``~`` reference)."""
    return _ROLE.sub(lambda m: f"<code>{m.group(1).rsplit('.', 1)[-1] if '~' in m.group(0) else m.group(1)}</code>",
                     html)
