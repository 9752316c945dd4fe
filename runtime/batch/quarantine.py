"""The quarantine file of a batch job: every rejected record with its line, reason and input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

__all__ = ["Quarantine"]


class Quarantine:
    """Rejected rows, written to a temporary file in line order and kept only if there are any."""

    def __init__(self, path: Path, *, with_file: bool = False) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.fh: IO[str] = open(self.tmp, "w", encoding="utf-8")
        self.count = 0
        self.duplicates = 0
        self.with_file = with_file

    def write(self, entries: list[tuple[int, str, Any]], file: str) -> None:
        """Write a chunk's entries ``(line, error, raw input)``, in line order. The raw input is the
        line's text, the row as a mapping (written as JSON), or None (a duplicate id)."""
        for line, error, raw in sorted(entries, key=lambda e: e[0]):
            text = raw if isinstance(raw, str) or raw is None else json.dumps(raw, default=str)
            row: dict[str, Any] = {"line": line, "error": error, "record": text}
            if self.with_file:
                row = {"file": file, **row}
            self.fh.write(json.dumps(row) + "\n")
        self.count += len(entries)

    def close(self, keep: bool) -> None:
        self.fh.close()
        if keep and self.count:
            self.tmp.replace(self.path)
        else:
            self.tmp.unlink(missing_ok=True)
