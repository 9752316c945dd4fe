"""Redaction report: recall per kind and false-positive rate on the redaction corpus, and timing.

Prints a Markdown table (kind, n, recall) over ``tests/runtime/record/redaction_corpus.py`` (secrets
planted in natural sentences; a secret counts as caught when nothing that must vanish is left), the
false-positive rate on its benign look-alikes (a sentence counts when redaction changed it at all),
and the time of ``redact()`` over ~2,000 typical chat turns (the training simulator's, or the corpus's
benign sentences when the simulator is not importable).

Usage:
    python bench/redaction_report.py              # table + timing
    python bench/redaction_report.py --misses     # also list what was missed / changed
    python bench/redaction_report.py --timing-only --repeat 9

Compare against another checkout (e.g. the last release) by putting its root first on the path:
``PYTHONPATH=/path/to/other/checkout python bench/redaction_report.py`` — the corpus always comes
from this checkout.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # appended: a PYTHONPATH checkout given first wins for `runtime`
sys.path.append(str(ROOT / "tests" / "runtime" / "record"))

from redaction_corpus import benign, evaluate  # noqa: E402

import runtime.record.redaction as redaction  # noqa: E402


def chat_turns(n: int = 2000) -> tuple[list[str], str]:
    """About ``n`` typical chat turns and where they came from."""
    try:
        from train.simulate import SimConfig, generate
    except ImportError:
        texts = [b.text for b in benign()]
        return (texts * (n // len(texts) + 1))[:n], "the corpus's benign sentences, repeated"
    eps = generate(SimConfig(n_episodes=8, seed=3))
    return [e.content for ep in eps for e in ep.events][:n], "training simulator turns (8 episodes, seed 3)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--misses", action="store_true", help="list missed secrets and false positives")
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--repeat", type=int, default=7, help="timing repeats (the best and the median are shown)")
    args = ap.parse_args()
    print(f"redaction module: {Path(redaction.__file__).parent}")
    if not args.timing_only:
        ev = evaluate(lambda t: redaction.redact(t).text)
        print()
        print(ev.table())
        if args.misses:
            for c, out in ev.missed:
                print(f"MISSED [{c.kind}] {out!r}")
            for b, out in ev.false_positives:
                print(f"CHANGED [{b.category}] {b.text!r} -> {out!r}")
    texts, source = chat_turns()
    for t in texts[:200]:  # warm up (compiled patterns, caches)
        redaction.redact(t)
    runs = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for t in texts:
            redaction.redact(t)
        runs.append(time.perf_counter() - t0)
    chars = sum(map(len, texts)) / len(texts)
    print(f"\nredact() over {len(texts)} {source}, {chars:.0f} chars each on average: best {min(runs) * 1e3:.1f} ms, "
          f"median {statistics.median(runs) * 1e3:.1f} ms ({min(runs) / len(texts) * 1e6:.1f} µs per turn)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
