"""mkdocs hook: the evaluation and benchmark plots live in ``reports/`` (where ``make eval`` and
``make bench`` write them); the site serves them under ``figures/`` without a copy in ``docs/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPORTS = Path(__file__).resolve().parents[1] / "reports"


def on_files(files: Files, config: Any) -> Files:
    for png in sorted(REPORTS.glob("*.png")):
        files.append(File.generated(config, f"figures/{png.name}", abs_src_path=str(png)))
    return files
