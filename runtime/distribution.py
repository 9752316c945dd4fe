"""How this package is installed: its distribution name and the remedies error messages print.

The import packages are ``runtime`` and ``utilitynet`` (``train`` lives in the repository: training is
``make train``). The distribution is ``memir-runtime`` — the index already serves an unrelated
package called ``memir``, so no message may ever tell a user to ``pip install memir``.
"""

from __future__ import annotations

__all__ = ["DIST", "pip_extra"]

DIST = "memir-runtime"
"""The distribution name (``pip install memir-runtime``)."""


def pip_extra(*extras: str) -> str:
    """The exact install command for optional extras, e.g. ``pip install 'memir-runtime[encoder]'``."""
    return f"pip install '{DIST}[{','.join(extras)}]'" if extras else f"pip install {DIST}"
