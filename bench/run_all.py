"""`make bench`: every benchmark in one go; each prints its figures beside a baseline from the same run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHES = [
    ("store", ["bench/bench_store.py", "--quick"]),
    ("retention", ["bench/bench_retention.py"]),
    ("encoder", ["bench/bench_encoder.py"]),
    ("scorer", ["bench/bench_scorer.py"]),
    ("batch scoring", ["bench/bench_batch.py"]),
    ("integrations", ["bench/bench_integrations.py"]),
    ("cold-tier formats", ["bench/bench_tiers.py"]),
    ("peer stores", ["bench/bench_peers.py"]),
]


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    failed = []
    for name, cmd in BENCHES:
        print(f"\n=== {name} ({' '.join(cmd)}) ===", flush=True)
        if subprocess.run([sys.executable, *cmd], cwd=root).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
