"""Checksums of the files memir ships, builds or reads back (models, encoders, training rows)."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_sha256"]


def file_sha256(path: str | Path, *, chunk: int = 1 << 22) -> str:
    """The hex sha256 of a file, read in chunks (hashlib releases the GIL: a thread can hash while
    another works)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()
