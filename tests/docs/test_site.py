"""The documentation: every Python block of the README and of ``docs/`` is run by a test; the new
pages' examples run as written; the site builds with ``mkdocs build --strict`` (a broken link, a
missing page or a bad API reference fails); the README's links point at pages that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.examples import ROOT, block, blocks, run_block

TESTS = ROOT / "tests"


def test_every_python_block_is_run_by_a_test() -> None:
    run = set()
    for path in TESTS.rglob("*.py"):
        run |= set(re.findall(r"\b(?:run_block|block|doc_block)\(\s*\"([\w-]+)\"", path.read_text(encoding="utf-8")))
    python = [b for b in blocks() if b.lang == "python"]
    assert len(python) >= 20
    untagged = [b.path.name for b in python if b.tag is None]
    assert untagged == ["README.md"], f"only the README's agent example may be untagged: {untagged}"
    missing = sorted({f"{b.path.relative_to(ROOT)}: {b.tag}" for b in python if b.tag and b.tag not in run})
    assert missing == [], f"python blocks no test runs: {missing}"


def test_the_getting_started_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_block("getting-started", tmp_path, monkeypatch, capsys).splitlines()
    assert lines[0].startswith("Content: ") and lines[1] == "4 kept of 6"
    assert re.match(r"mem_\w+ is archive; last decision dec_\w+ at .* \(session_end:tue\): dropped \(below_cut, "
                    r"archive\)$", lines[2])
    shown = block("getting-started").path.read_text()
    assert f"\n{lines[1]}\n" in shown  # the page shows what it prints


def test_the_rules_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = run_block("rules", tmp_path, monkeypatch, capsys)
    assert out.splitlines() == ["True", "kept (must_keep, keep)",
                                "kept (above_cut, keep); utility adjusted by budgets matter +0.5",
                                "kept (required_by_implication, keep)", "['capacity', 'implies']"]
    assert out in block("rules").path.read_text()  # the page shows exactly this


def test_the_inspector_app_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from starlette.testclient import TestClient

    from runtime import MemoryStore
    with MemoryStore.open(tmp_path / "agent.sqlite") as store:
        store.scope(user_id="u42").write("The inspector example's memory.")
    namespace: dict[str, object] = {}
    monkeypatch.chdir(tmp_path)
    b = block("ui-app")
    exec(compile(b.code.replace('token="…"', 'token="t0ken"'), "docs/inspector.md", "exec"), namespace)
    client = TestClient(namespace["app"], base_url="http://inspector.local")  # type: ignore[arg-type]
    assert client.get("/memories").status_code == 401
    page = client.get("/memories", headers={"Authorization": "Bearer t0ken"})
    assert page.status_code == 200 and "The inspector example&#39;s memory." in page.text
    namespace["store"].close()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                        "PATH": "/usr/bin:/bin"}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    site = tmp_path / "site"
    for page in ("index.html", "getting-started/index.html", "inspector/index.html", "reference/store/index.html"):
        assert (site / page).is_file(), page
    assert "agent.sqlite" in (site / "index.html").read_text()  # the README's example, included
    reference = (site / "reference" / "store" / "index.html").read_text()
    assert "class=\"doc doc-heading\"" in reference and ":meth:" not in reference and ":class:" not in reference
    assert (site / "figures" / "lme_cv_recall_by_type.png").is_file()


def test_the_readme_is_a_landing_page_whose_links_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    links = re.findall(r"\]\(((?:docs/)[^)#]*)", readme)
    assert len(links) >= 12
    for link in links:
        assert (ROOT / link).exists(), link
