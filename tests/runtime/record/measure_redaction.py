"""Measure the default redactor on the held-out batch ``redaction_heldout.jsonl``.

The batch was written without looking at the detectors (``runtime/record/redaction/detectors.py``), so
its figures estimate how redaction does on phrasings it was not tuned to. Each line is one JSON
object ``{"id", "text", "kind", "secret", "lang"}``: ``kind``/``secret`` are ``null`` for a benign
look-alike, otherwise ``secret`` is the exact substring of ``text`` that must not survive.

- recall: the share of secret lines whose ``secret`` no longer occurs in the redacted text;
- false-positive rate: the share of benign lines whose text redaction changed at all;
- recall per kind and per language, and the misses and false positives with their redacted text.

Redaction uses :func:`runtime.record.redaction.redact`, i.e. the default :class:`Redactor` (all
kinds), which is what the record builder — and so the store — uses unless ``redaction_disable``
is configured.

Usage: ``python tests/runtime/record/measure_redaction.py [path.jsonl]`` prints a JSON summary.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_PATH = HERE / "redaction_heldout.jsonl"

_ROOT = str(HERE.parents[2])
if _ROOT not in sys.path:  # run as a script from anywhere: make the repo's `runtime` importable
    sys.path.insert(0, _ROOT)


def load(path: str | Path = DEFAULT_PATH) -> list[dict[str, Any]]:
    """The batch's rows, in file order (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _share(hit: int, total: int) -> float | None:
    return round(hit / total, 4) if total else None


def measure(path: str | Path = DEFAULT_PATH) -> dict[str, Any]:
    """Run every line of ``path`` through the default redactor and summarise the outcome."""
    from runtime.record.redaction import redact

    rows = load(path)
    caught: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # kind -> [caught, total]
    caught_lang: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    benign_lang: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # lang -> [changed, total]
    misses: list[dict[str, Any]] = []
    false_positives: list[dict[str, Any]] = []
    n_secret = n_caught = n_benign = n_changed = 0
    for row in rows:
        text, secret, lang = row["text"], row.get("secret"), row.get("lang", "?")
        out = redact(text).text
        if secret is not None:
            kind = row.get("kind") or "?"
            ok = secret not in out
            n_secret += 1
            n_caught += ok
            for table, key in ((caught, kind), (caught_lang, lang)):
                table[key][0] += ok
                table[key][1] += 1
            if not ok:
                misses.append({"id": row["id"], "kind": kind, "lang": lang, "redacted": out})
        else:
            changed = out != text
            n_benign += 1
            n_changed += changed
            benign_lang[lang][0] += changed
            benign_lang[lang][1] += 1
            if changed:
                false_positives.append({"id": row["id"], "lang": lang, "text": text, "redacted": out})
    return {
        "path": str(path),
        "secret_lines": n_secret,
        "benign_lines": n_benign,
        "recall": _share(n_caught, n_secret),
        "fp_rate": _share(n_changed, n_benign),
        "recall_per_kind": {k: {"recall": _share(c, t), "caught": c, "total": t} for k, (c, t) in sorted(caught.items())},
        "recall_per_lang": {k: {"recall": _share(c, t), "caught": c, "total": t}
                            for k, (c, t) in sorted(caught_lang.items())},
        "fp_per_lang": {k: {"fp_rate": _share(c, t), "changed": c, "total": t}
                        for k, (c, t) in sorted(benign_lang.items())},
        "misses": misses,
        "false_positives": false_positives,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(json.dumps(measure(args[0] if args else DEFAULT_PATH), ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
