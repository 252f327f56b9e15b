"""Issue #24's dashboard tools in a real headless Chromium, on SQLite and PostgreSQL: history
charts, search by task prefix and argument, bulk actions through their confirmation, workers
with their jobs, and live updates (the page changes without a reload). Same browser set-up and
skip rule as tests/ops/test_dashboard_browser.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("selenium")
pytest.importorskip("starlette")

from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.ops.conftest import Spawn
from tests.ops.test_dashboard import seed
from tests.ops.test_dashboard_api import billing
from tests.ops.test_dashboard_browser import await_dashboard, browser, click  # noqa: F401
from tests.ports import free_port
from tether._task import make_new_job
from tether.stores import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180),
              pytest.mark.parametrize("store_kind", ["sqlite", "postgres", "redis"])]


@pytest.fixture
def dashboard(store: Store, store_url: str, spawn: Spawn) -> Iterator[str]:
    """A dashboard process on the test's store; its base URL."""
    port = free_port()
    proc = spawn("dashboard", "--url", store_url, "--port", str(port))
    yield await_dashboard(proc, port)


def wait_for(browser: Any, check: Any, timeout: float = 30) -> Any:  # noqa: F811
    return WebDriverWait(browser, timeout, ignored_exceptions=(WebDriverException,)).until(
        check)


def test_history_charts(store: Store, dashboard: str, browser: Any,  # noqa: F811
                        tmp_path: Path) -> None:
    billing(store)
    browser.get(f"{dashboard}/history?window=15m")
    assert browser.title == "History · tether"
    chart = browser.find_element(By.ID, "throughput-all")
    assert chart.size["width"] > 300 and chart.size["height"] > 100
    failed = chart.find_element(By.CSS_SELECTOR, "rect.failed")
    assert failed.get_attribute("data-failed") == "1"
    assert browser.execute_script(
        "return getComputedStyle(arguments[0]).fill;", failed) == "rgb(220, 38, 38)"
    assert browser.find_element(By.ID, "throughput-task-billing.charge").is_displayed()
    depth = browser.find_element(By.ID, "depth-queue-mail")
    values = depth.find_element(By.TAG_NAME, "polyline").get_attribute("data-values")
    assert values.split(",")[-1] == "1", "the mail job waits now"
    browser.save_screenshot(str(tmp_path / "history.png"))
    assert (tmp_path / "history.png").stat().st_size > 5000


def test_search_by_prefix_and_argument(store: Store, dashboard: str, browser: Any,  # noqa: F811
                                       tmp_path: Path) -> None:
    ids = billing(store)
    browser.get(f"{dashboard}/jobs")
    form = browser.find_element(By.ID, "search")
    form.find_element(By.NAME, "prefix").send_keys("billing.")
    form.find_element(By.NAME, "arg").send_keys("user_id=7")
    click(browser, form.find_element(By.TAG_NAME, "button"))
    table = browser.find_element(By.ID, "jobs")
    shown = {int(a.text) for a in table.find_elements(By.CSS_SELECTOR, "td.num a")}
    assert shown == set(ids["charges"])
    assert "billing.refund" not in table.text and "mail.send" not in table.text
    browser.save_screenshot(str(tmp_path / "search.png"))


def test_bulk_retry_delete_and_cancel_ask_first(store: Store, dashboard: str, browser: Any,  # noqa: F811
                                         tmp_path: Path) -> None:
    ids = billing(store)
    browser.get(f"{dashboard}/jobs?prefix=billing.&status=failed")
    click(browser, browser.find_element(By.ID, "bulk-retry"))
    assert "This will retry 1 job(s)" in browser.find_element(By.ID, "count").text
    browser.save_screenshot(str(tmp_path / "bulk-confirm.png"))
    assert store.get_job(ids["charges"][1]).status == "failed"  # type: ignore[union-attr]
    click(browser, browser.find_element(By.ID, "confirm-button"))
    assert "retried 1 of 1" in browser.find_element(By.ID, "note").text
    assert store.get_job(ids["charges"][1]).status == "pending"  # type: ignore[union-attr]

    browser.get(f"{dashboard}/jobs?queue=bill&status=pending")
    click(browser, browser.find_element(By.ID, "bulk-delete"))
    assert "This will delete 2 job(s)" in browser.find_element(By.ID, "count").text
    click(browser, browser.find_element(By.ID, "confirm-button"))
    assert "deleted 2 pending job(s) from bill" in browser.find_element(By.ID, "note").text
    assert store.get_job(ids["refund"][0]) is None

    browser.get(f"{dashboard}/jobs?queue=mail")
    click(browser, browser.find_element(By.ID, "bulk-cancel"))
    assert "This will cancel 1 job(s)" in browser.find_element(By.ID, "count").text
    click(browser, browser.find_element(By.ID, "confirm-button"))
    assert "cancelled 1" in browser.find_element(By.ID, "note").text
    assert store.get_job(ids["mail"][0]).status == "cancelled"  # type: ignore[union-attr]


def test_workers_with_jobs_update_live(store: Store, dashboard: str, browser: Any,  # noqa: F811
                                       tmp_path: Path) -> None:
    """The workers page lists each worker's running jobs, and a job claimed after the page
    loaded appears on it without a reload (the live script swaps the region in)."""
    ids = seed(store)
    browser.get(f"{dashboard}/workers")
    held = browser.find_element(By.ID, "worker-w-1")
    assert "live" in held.text
    assert str(ids["running"]) in browser.find_element(
        By.CSS_SELECTOR, "table.held[data-worker='w-1']").text
    browser.execute_script("window.__tetherSamePage = true;")
    (later,) = store.enqueue([make_new_job("d.later", [], {}, queue="rq")])
    store.claim("w-1", ["rq"], 1, 30)
    wait_for(browser, lambda d: "d.later" in d.find_element(
        By.CSS_SELECTOR, "table.held[data-worker='w-1']").text)
    assert browser.execute_script("return window.__tetherSamePage === true;"), "no reload"
    assert browser.execute_script("return window.tetherLiveUpdates;") >= 1
    assert f"/jobs/{later}" in browser.page_source
    browser.save_screenshot(str(tmp_path / "workers.png"))


def test_overview_updates_live_and_has_a_json_twin(store: Store, dashboard: str,
                                                  browser: Any) -> None:  # noqa: F811
    seed(store)
    browser.get(f"{dashboard}/")
    assert "fresh" not in browser.find_element(By.ID, "queues").text
    browser.execute_script("window.__tetherSamePage = true;")
    store.enqueue([make_new_job("d.fresh", [], {}, queue="fresh")])
    wait_for(browser, lambda d: "fresh" in d.find_element(By.ID, "queues").text)
    assert browser.execute_script("return window.__tetherSamePage === true;")
    assert "live, updated" in browser.find_element(By.ID, "live-status").text
    browser.get(f"{dashboard}/api/overview")
    body = json.loads(browser.find_element(By.TAG_NAME, "body").text)
    assert {q["name"] for q in body["queues"]} >= {"fresh", "dq"}
