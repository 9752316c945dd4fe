"""``memir ui`` in a real browser: Debian's Chromium, driven by Selenium, against the CLI started as an
operator starts it, over a store built through the public API with the real encoder, on both
backends. A person's walk: every page, a decision clicked through to an item's explanation, the time
slider moved, a recall run; each checked against the API's own answers. Another user's memory never
appears, and the browser console stays free of errors.

Never skipped: ``make test`` installs ``chromium`` and ``chromium-driver`` (Debian) first. With
``MEMIR_UI_SCREENSHOTS=DIR`` set, a screenshot of each page is written there (the docs' images).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from runtime import MemoryStore
from runtime.store import format_context
from tests.runtime.ui.demo import OTHER_USER_TEXT, SECRET, build

pytestmark = pytest.mark.slow

CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if Path(p).exists()), None)
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = os.environ.get("MEMIR_UI_SCREENSHOTS")


def serve(target: Any, tmp_path: Path, *who: str) -> Iterator[str]:
    """``memir ui TARGET WHO...`` on a free port, a child process as an operator starts it: its address.
    Its HOME is fresh; the encoder is the one this test process loaded (``make test`` also exports it)."""
    from runtime.encoders.onnx import default_encoder_dir

    env = {**os.environ, "HOME": str(tmp_path), "MEMIR_ENCODER_DIR": str(default_encoder_dir())}
    cmd = [sys.executable, "-m", "runtime.cli", "ui", str(target), *who, "--port", "0"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        m = re.search(r"on (http://\S+)", line)
        assert m, f"memir ui did not start: {line!r}"
        yield m.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture
def demo(store_target: Any, onnx_encoder: Any, backend: str) -> Any:
    return build(store_target("ui.sqlite"), onnx_encoder)


@pytest.fixture
def served(demo: Any, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """The demo store, and ``memir ui --user alice`` serving it."""
    for url in serve(demo.target, tmp_path, "--user", "alice"):
        yield url, demo


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    assert CHROMIUM is not None and Path(CHROMEDRIVER).exists(), \
        "Chromium is missing: `apt-get install chromium chromium-driver` (make test installs them)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'chrome'}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def check_page(driver: Any, name: str) -> None:
    """No other user's memory, no secret, no console error; a screenshot when asked for."""
    html = driver.page_source
    assert "BLUEHERON" not in html and OTHER_USER_TEXT not in unescape(html), f"{name}: another user's memory"
    assert SECRET not in html and "[API_KEY]" not in html, f"{name}: a secret is shown"
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, f"{name}: console errors {errors}"
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def ids(driver: Any, css: str) -> list[str]:
    from selenium.webdriver.common.by import By
    return [e.get_attribute("data-id") for e in driver.find_elements(By.CSS_SELECTOR, css)]


def test_a_person_walks_the_inspector(served: tuple[str, Any], browser: Any, onnx_encoder: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url, demo = served
    wait = WebDriverWait(browser, 30)
    with MemoryStore.open(demo.target, embedder=onnx_encoder, create=False) as store:
        scope = store.scope(user_id="alice")

        # Memories: the working set, as Scope.list gives it; then every tier.
        browser.get(url)
        wait.until(ec.presence_of_element_located((By.ID, "memories")))
        assert "memir inspector" in browser.title
        assert sorted(ids(browser, "tr.memory")) == sorted(r.id for r in scope.list())
        check_page(browser, "memories")
        Select = __import__("selenium.webdriver.support.select", fromlist=["Select"]).Select
        Select(browser.find_element(By.ID, "f-tier")).select_by_value("any")
        browser.find_element(By.ID, "apply").click()
        wait.until(ec.url_contains("tier=any"))
        assert sorted(ids(browser, "tr.memory")) == sorted(r.id for r in scope.list(tier="any"))

        # One memory: its lineage, corrections and recall count.
        browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{demo.ids["budget v2"]}"] a.memory-link').click()
        wait.until(ec.presence_of_element_located((By.ID, "versions")))
        assert browser.find_element(By.ID, "memory-content").text == "The team offsite budget is now 15k EUR."
        assert "12k EUR" in browser.find_element(By.ID, "versions").text
        check_page(browser, "memory")

        # Decisions → one decision → an item's explanation.
        browser.find_element(By.ID, "nav-decisions").click()
        wait.until(ec.presence_of_element_located((By.ID, "decisions")))
        assert ids(browser, "tr.decision") == [d.decision_id for d in scope.decisions(100)]
        check_page(browser, "decisions")
        target = [d for d in scope.decisions(100) if d.archived][0]
        browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{target.decision_id}"] a.decision-link').click()
        wait.until(ec.presence_of_element_located((By.ID, "utility-histogram")))
        full = scope.decision(target.decision_id)
        assert browser.find_element(By.ID, "n-kept").text == str(len(full.kept))
        assert sorted(ids(browser, "tr.item")) == sorted(full.items)
        assert browser.find_elements(By.ID, "cut-line")
        check_page(browser, "decision")
        dropped = full.archived[0]
        browser.find_element(By.CSS_SELECTOR, f'tr[data-id="{dropped}"] a.explain-link').click()
        wait.until(ec.presence_of_element_located((By.ID, "explain-summary")))
        assert browser.find_element(By.ID, "explain-summary").text == scope.explain(dropped).summary
        check_page(browser, "explain")

        # Time travel: move the slider back to the first decision; the page follows.
        browser.find_element(By.ID, "nav-time-travel").click()
        slider = wait.until(ec.presence_of_element_located((By.ID, "when")))
        past = list(reversed(scope.decisions(100)))
        assert slider.get_attribute("value") == str(len(past) - 1)
        slider.send_keys(Keys.HOME)
        wait.until(ec.url_contains("i=0"))
        wait.until(ec.presence_of_element_located((By.ID, "travel-count")))
        then = scope.memories_at(past[0].decision_id)
        assert browser.find_element(By.ID, "travel-decision").text == past[0].decision_id
        assert ids(browser, "#travel-working tr[data-id]") == [w.memory_id for w in then.working]
        box = browser.find_element(By.ID, "q")  # what would it have recalled then?
        box.send_keys("which food allergy?")
        browser.find_element(By.ID, "go").click()
        wait.until(ec.presence_of_element_located((By.ID, "travel-recall")))
        vecs = onnx_encoder.encode([w.content or "" for w in then.working] + ["which food allergy?"])
        sims = [float(v @ vecs[-1]) for v in vecs[:-1]]
        best = then.working[max(range(len(sims)), key=sims.__getitem__)].memory_id
        assert ids(browser, "#travel-recall li")[0] == best
        check_page(browser, "time_travel")

        # Recall playground: type a query; the hits and the prompt block are the API's.
        browser.find_element(By.ID, "nav-recall").click()
        box = wait.until(ec.presence_of_element_located((By.ID, "q")))
        box.send_keys("what is alice allergic to?")
        browser.find_element(By.ID, "apply").click()
        wait.until(ec.presence_of_element_located((By.ID, "hits")))
        hits = scope.recall("what is alice allergic to?", k=5, update_usage=False)
        assert ids(browser, "tr.hit") == [h.record.id for h in hits]
        assert browser.find_element(By.ID, "prompt-block").text == format_context(hits).strip()
        check_page(browser, "recall")

        # Health: the tiers are the scope's counts, and the chart is drawn.
        browser.find_element(By.ID, "nav-health").click()
        wait.until(ec.presence_of_element_located((By.ID, "tier-history")))
        tiers = browser.find_element(By.ID, "tiers").text
        for tier in ("working", "archive"):
            assert f"{tier} {scope.count(tier=tier)}" in tiers  # type: ignore[arg-type]
        check_page(browser, "health")

        # Another user's memory by its id: a 404 page, nothing of it rendered.
        bob = store.scope(user_id="bob").list(tier="any")[0]
        browser.get(url.rstrip("/") + f"/memory/{bob.id}")
        assert "404" in browser.find_element(By.TAG_NAME, "h1").text
        html = unescape(browser.page_source)
        assert f"no memory '{bob.id}' in scope user='alice'" in html  # what the API says of a foreign id
        assert bob.content not in html and "BLUEHERON" not in html


def test_an_admin_picks_a_user_and_sees_only_that_user(demo: Any, tmp_path: Path, browser: Any,
                                                       onnx_encoder: Any) -> None:
    """``--admin``: the users page lists every scope; each page after it shows the one picked."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 30)
    with MemoryStore.open(demo.target, embedder=onnx_encoder, create=False) as store:
        users = [(u, a) for u, a, _ in store.admin_users()]
        bob = [r.id for r in store.scope(user_id="bob").list(tier="any")]
        for url in serve(demo.target, tmp_path, "--admin"):
            browser.get(url)
            table = wait.until(ec.presence_of_element_located((By.ID, "users")))
            assert [tuple(r.text.split()[:2]) for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")] == users
            if SHOTS:
                Path(SHOTS).mkdir(parents=True, exist_ok=True)
                browser.save_screenshot(str(Path(SHOTS) / "users.png"))
            browser.find_element(By.LINK_TEXT, "bob").click()
            wait.until(ec.presence_of_element_located((By.ID, "memories")))
            assert browser.find_element(By.ID, "scope-label").text == "bob/default"
            Select = __import__("selenium.webdriver.support.select", fromlist=["Select"]).Select
            Select(browser.find_element(By.ID, "f-tier")).select_by_value("any")
            browser.find_element(By.ID, "apply").click()
            wait.until(ec.url_contains("tier=any"))
            assert sorted(ids(browser, "tr.memory")) == sorted(bob)
            assert "Zephyr" in browser.page_source and "peanuts" not in browser.page_source  # bob's, not alice's
            browser.find_element(By.ID, "nav-decisions").click()  # links keep the user picked
            wait.until(ec.presence_of_element_located((By.ID, "decisions")))
            assert "user=bob" in browser.current_url
            errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
            assert not errors, errors
