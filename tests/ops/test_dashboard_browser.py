"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by selenium): every page loads, a failed job is found and retried through the UI, and a
screenshot of each page is written to the test's temporary directory (never the repo).

Like the store servers, a missing browser skips the test on a developer machine and fails it
under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("selenium")
pytest.importorskip("starlette")

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.ops.conftest import Spawn
from tests.ops.test_dashboard import seed
from tests.ports import free_port
from tether.stores import open_store

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"



def click(browser: Any, element: Any) -> None:
    """Click a link or button and wait for the next page to replace this one.

    The old page is marked with a JavaScript global that a new document cannot have. Any driver
    error while the browser is between documents is retried: chromedriver answers a command that
    races a navigation with "unhandled inspector error" (a WebDriverException, not a stale
    element), and waiting on ``staleness_of`` let that one escape and fail CI.
    """
    browser.execute_script("window.__tetherOldPage = true;")
    element.click()

    def replaced(driver: Any) -> bool:
        state = driver.execute_script(
            "return [window.__tetherOldPage === true, document.readyState];")
        return state[0] is False and state[1] == "complete"

    WebDriverWait(browser, 20, ignored_exceptions=(WebDriverException,)).until(replaced)


def await_dashboard(proc: subprocess.Popen[str], port: int) -> str:
    """The base URL of a dashboard process once its health check answers; fails when the
    process exits first or it has not come up within 30 s."""
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"{base}/healthz", timeout=2).read()
            return base
        except OSError:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the dashboard did not come up"
            time.sleep(0.1)


@pytest.fixture
def browser() -> Iterator[Any]:
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        message = "chromium / chromedriver not installed (apt-get install chromium " \
                  "chromium-driver)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    driver.set_page_load_timeout(30)
    driver.implicitly_wait(10)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_find_and_retry_a_failed_job_in_chromium(tmp_path: Path, spawn: Spawn,
                                                 browser: Any) -> None:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    store = open_store(url)
    store.migrate()
    ids = seed(store)
    port = free_port()
    proc = spawn("dashboard", "--url", url, "--port", str(port))
    base = await_dashboard(proc, port)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        browser.get(base + "/")
        assert browser.title == "Overview · tether"
        assert "w-1" in browser.find_element(By.ID, "workers").text
        assert "dq" in browser.find_element(By.ID, "queues").text
        browser.save_screenshot(str(shots / "overview.png"))

        click(browser, browser.find_element(By.LINK_TEXT, "Jobs"))
        assert "d.wait" in browser.find_element(By.ID, "jobs").text
        browser.save_screenshot(str(shots / "jobs.png"))

        click(browser, browser.find_element(By.LINK_TEXT, "Dead letters"))
        table = browser.find_element(By.ID, "jobs")
        assert "kaput" in table.text and "d.wait" not in table.text
        browser.save_screenshot(str(shots / "dead-letters.png"))

        click(browser, table.find_element(By.LINK_TEXT, str(ids["failed"])))
        assert browser.find_element(By.ID, "status").text == "failed"
        assert "Traceback" in browser.find_element(By.ID, "attempts").text
        browser.save_screenshot(str(shots / "job-failed.png"))

        click(browser, browser.find_element(By.ID, "retry"))
        assert "retried" in browser.find_element(By.ID, "note").text
        assert browser.find_element(By.ID, "status").text == "pending"
        browser.save_screenshot(str(shots / "job-retried.png"))
        job = store.get_job(ids["failed"])
        assert job is not None and job.status == "pending"

        browser.get(f"{base}/jobs?since=nonsense")
        assert "expected a duration" in browser.page_source
    finally:
        store.close()
    names = sorted(p.name for p in shots.iterdir())
    assert names == ["dead-letters.png", "job-failed.png", "job-retried.png", "jobs.png",
                     "overview.png"]
    assert all((shots / n).stat().st_size > 5000 for n in names)
    print(f"screenshots in {shots}")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_flow_limits_and_snoozes_in_chromium(tmp_path: Path, spawn: Spawn,
                                             browser: Any) -> None:
    """Issue #19: with ``--app`` the overview lists the declared limits and the slots held
    now; a snoozed job's page shows its key, its snoozes and their reasons."""
    import textwrap

    from tests.ops.conftest import ROOT
    from tests.ops.test_flow_ops import APP, snoozed_job

    url = f"sqlite:///{tmp_path / 'flow.db'}"
    (tmp_path / "dashflowapp.py").write_text(textwrap.dedent(APP.format(url=url)))
    store = open_store(url)
    store.migrate()
    job_id = snoozed_job(store)
    port = free_port()
    proc = spawn("dashboard", "--app", "dashflowapp:app", "--port", str(port),
                 env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])})
    base = await_dashboard(proc, port)
    try:
        browser.get(base + "/")
        limits = browser.find_element(By.ID, "limits").text
        assert "flow.per_customer" in limits and "2 per customer" in limits
        assert "0 of 5 running" in limits and "100/m" in limits
        browser.save_screenshot(str(tmp_path / "overview-limits.png"))
        browser.get(f"{base}/jobs/{job_id}")
        assert browser.find_element(By.ID, "limit-key").text == "acme"
        assert browser.find_element(By.ID, "snoozes").text == "2 snoozed"
        assert "429 from the API" in browser.find_element(By.ID, "attempts").text
        browser.save_screenshot(str(tmp_path / "job-snoozed.png"))
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_workflow_graph_in_chromium(tmp_path: Path, spawn: Spawn, browser: Any) -> None:
    """Issue #20: a waiting job's page lists its parents and draws the workflow as SVG, a box
    per job in its status's colour; clicking a box opens that job."""
    from tests.ops.test_workflow_ops import diamond

    url = f"sqlite:///{tmp_path / 'wf.db'}"
    store = open_store(url)
    store.migrate()
    ids = diamond(store)
    port = free_port()
    proc = spawn("dashboard", "--url", url, "--port", str(port))
    base = await_dashboard(proc, port)
    try:
        browser.get(f"{base}/jobs/{ids['d']}")
        assert browser.find_element(By.ID, "status").text == "waiting"
        assert "waiting on 2 of 2" in browser.find_element(By.ID, "parents").text
        graph = browser.find_element(By.ID, "graph")
        assert graph.size["width"] > 300 and graph.size["height"] > 100, "drawn, not empty"
        done = browser.find_element(By.ID, f"node-{ids['a']}")
        fill = browser.execute_script(
            "return getComputedStyle(arguments[0].querySelector('rect')).fill;", done)
        assert fill == "rgb(220, 252, 231)", "a done job's box is green"
        assert browser.find_element(By.ID, f"node-{ids['d']}").get_attribute(
            "data-status") == "waiting"
        browser.save_screenshot(str(tmp_path / "job-workflow.png"))
        click(browser, done)
        assert browser.find_element(By.ID, "status").text == "done"
        assert str(ids["b"]) in browser.find_element(By.ID, "children").text
    finally:
        store.close()
    assert (tmp_path / "job-workflow.png").stat().st_size > 5000
