"""``import runtime`` must not pull in the training stack (DESIGN.md; STYLE habit 1).

Runs in a fresh interpreter so modules imported by other tests do not mask the result. The import
time is printed for the record (``pytest -s``); the 0.3 s goal is checked by ``bench/bench_store.py``,
not asserted here (timings are not test material).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ["torch", "lightning", "pytorch_lightning", "datasets", "sentence_transformers", "transformers",
             "train", "cvxpy", "psycopg", "psycopg_pool", "pgvector",  # the SQLite path never loads the PostgreSQL driver
             "ray", "pyarrow",  # nor Ray or Arrow: `import runtime.batch` is free until a dump is scored
             "langgraph", "langchain_core", "mcp",  # the agent frameworks live in the `integrations` extra
             "starlette", "jinja2", "uvicorn", "selenium", "mkdocs"]  # the inspector (`ui` extra) and the docs

PROBE = """
import json, sys, time
t = time.perf_counter()
import {modules}
{use}
dt = time.perf_counter() - t
forbidden = {forbidden!r}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
print(json.dumps({{"seconds": dt, "loaded": loaded}}))
"""


# What a production agent does: every public name, a store, writes, recall, a retention decision
# with the shipped ONNX scorer (runtime.__init__ resolves names lazily, so `import runtime` alone
# would prove little).
USE = """
for name in runtime.__all__:
    getattr(runtime, name)
from runtime.encoders import HashEmbedder
from runtime.scoring import UtilityScorer, FakeScorer
import runtime.retention, runtime.retention, runtime.retention.rules, runtime.record.redaction, runtime.annotate.assembler, runtime.batch
with runtime.MemoryStore.open(":memory:", embedder=HashEmbedder(64)) as store:
    s = store.scope(user_id="u1")
    s.write_many([f"note {{i}} about the launch" for i in range(20)])
    s.recall("launch", k=3)
    s.retain(capacity=5, scorer=FakeScorer())
"""


@pytest.mark.parametrize(("modules", "use"), [
    ("runtime", ""),
    ("runtime, runtime.store.scope, runtime.store, runtime.store.ranking, runtime.store.filters, runtime.store.sqlite.vector_cache, runtime.store.scope_cache, runtime.record.builder",
     ""),
    ("runtime", USE),
])
def test_import_runtime_leaves_the_training_stack_out(modules: str, use: str) -> None:
    code = PROBE.format(modules=modules, use=use, forbidden=FORBIDDEN)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"import {modules}: {result['seconds']:.3f} s")
    assert result["loaded"] == []


def test_the_probe_would_notice_a_heavy_import() -> None:
    """Positive control: the same probe reports a forbidden module when one is imported."""
    code = PROBE.format(modules="runtime", use="runtime.MemoryStore", forbidden=["sqlite3"])  # store imports sqlite3
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "sqlite3" in json.loads(out.stdout.strip().splitlines()[-1])["loaded"]


# What opening a store and a scope must not load: the decision machinery (model, rules, solver,
# decision models), the write and recall walks and the session consolidation all load at first use.
NOT_AT_OPEN = ["onnxruntime", "utilitynet.features", "utilitynet.dialog", "runtime.scoring.utility",
               "runtime.retention.plan", "runtime.retention.rules", "runtime.retention.solver",
               "runtime.retention.decision", "runtime.store.writing", "runtime.store.recalling",
               "runtime.store.retaining", "runtime.store.session_close", "runtime.store.time_travel",
               "runtime.annotate.claims", "runtime.annotate.extract"]


def test_opening_a_store_and_a_scope_loads_no_decision_machinery(tmp_path: Path) -> None:
    """The cold start (``import runtime`` + ``MemoryStore.open`` + ``scope``) stays free of what only a
    write, a recall or a decision needs; the time it takes is measured by ``bench/bench_store.py``."""
    code = (f"import json, sys, runtime\nwith runtime.MemoryStore.open({str(tmp_path / 'c.sqlite')!r}) as s:\n"
            f"    s.scope(user_id='u')\nprint(json.dumps(sorted(m for m in sys.modules if m in {NOT_AT_OPEN!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
