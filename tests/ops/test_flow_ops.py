"""Flow limits and snoozes where operators look (issue #19): ``tether stats``, ``tether job``,
``tether jobs`` and the dashboard show the app's declared limits with the jobs running under
them now, and each job's limit key and snoozes (the snoozes also in its history)."""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.test_cli_ops import run
from tether._appspec import load_app
from tether._flowview import declared
from tether.stores import Outcome, Store, open_store

APP = """
import tether
app = tether.App({url!r}, lease_ttl=30)
app.queue("emails", concurrency=5, rate="100/m")

@app.task(name="flow.api", concurrency=3)
def api(n): return n

@app.task(name="flow.per_customer", concurrency=2, rate="10/30s", limit_key="customer")
def per_customer(customer, n=0): return n

@app.task(name="flow.send", queue="emails", rate="5/s")
def send(to): return to

@app.task(name="flow.free")
def free(): return None
"""


@pytest.fixture
def flow_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Store]]:
    """(MODULE:APP, its store) with jobs running under every kind of limit:
    flow.api 2 of 3, flow.per_customer 3 (acme 2, bolt 1), queue emails 1."""
    name = "flowapp_" + uuid.uuid4().hex[:8]
    url = f"sqlite:///{tmp_path / 'flow.db'}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(APP.format(url=url)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TETHER_URL", raising=False)
    monkeypatch.delenv("TETHER_APP", raising=False)
    spec = f"{name}:app"
    app = load_app(spec)
    tasks = app.runtime.registry.tasks
    for n in range(4):
        tasks["flow.api"].enqueue(n)
    for customer in ("acme", "acme", "bolt", "bolt"):
        tasks["flow.per_customer"].enqueue(customer)
    tasks["flow.send"].enqueue("a@b")
    tasks["flow.free"].enqueue()
    store = open_store(url)
    # Claimed with the app's limits, as a worker would: the store grants exactly the slots.
    flow = app.runtime.registry.flow()
    store.claim("w-1", ["default", "emails"], 100, 30, flow=flow)
    try:
        yield spec, store
    finally:
        store.close()
        app.close()


def test_stats_shows_each_declared_limit_with_its_running_jobs(
    flow_app: tuple[str, Store], capsys: pytest.CaptureFixture[str]
) -> None:
    spec, store = flow_app
    code, out, err = run(capsys, "stats", "--app", spec, "--json")
    assert code == 0, err
    rows = {(r["scope"], r["name"]): r for r in json.loads(out)["limits"]}
    assert set(rows) == {("task", "flow.api"), ("task", "flow.per_customer"),
                         ("task", "flow.send"), ("queue", "emails")}
    api = rows[("task", "flow.api")]
    assert (api["concurrency"], api["running"], api["rate"], api["limit_key"]) == \
        (3, 3, None, None)
    keyed = rows[("task", "flow.per_customer")]
    assert (keyed["concurrency"], keyed["rate"], keyed["limit_key"]) == (2, "10/30s",
                                                                         "customer")
    assert (keyed["running"], keyed["keys_running"], keyed["busiest_running"]) == (4, 2, 2)
    emails = rows[("queue", "emails")]
    assert (emails["concurrency"], emails["rate"], emails["running"]) == (5, "100/m", 1)
    assert rows[("task", "flow.send")]["rate"] == "5/s"

    code, out, _ = run(capsys, "stats", "--app", spec)
    assert code == 0 and "flow limits" in out
    line = next(x for x in out.splitlines() if "flow.api" in x)
    assert "3 of 3 running" in line, out
    line = next(x for x in out.splitlines() if "flow.per_customer" in x)
    assert "4 running (2 per customer; busiest" in line and "10/30s" in line, out
    line = next(x for x in out.splitlines() if x.startswith("queue") and "emails" in x)
    assert "1 of 5 running" in line and "100/m" in line, out

    url = store.info().url
    code, out, _ = run(capsys, "stats", "--url", url, "--json")
    assert json.loads(out)["limits"] is None  # limits live in the app's code, not the store


def snoozed_job(store: Store) -> int:
    """A keyed job its handler snoozed twice (the second time with a reason), now pending."""
    from tether._task import make_new_job

    (job_id,) = store.enqueue([make_new_job("flow.per_customer", ["acme"], {},
                                            limit_key="acme", max_attempts=3,
                                            queue="snoozy")])
    for reason in (None, "429 from the API: try in 30 s"):
        (job,) = store.claim("w-2", ["snoozy"], 1, 30)
        store.finish([Outcome(job.lease, "snoozed", error=reason, retry_delay=0.0)])
    return job_id


def test_job_views_show_the_limit_key_and_the_snoozes(
    flow_app: tuple[str, Store], capsys: pytest.CaptureFixture[str]
) -> None:
    _, store = flow_app
    url = store.info().url
    job_id = snoozed_job(store)
    code, out, _ = run(capsys, "job", str(job_id), "--url", url, "--json")
    data = json.loads(out)
    assert (data["limit_key"], data["snoozes"], data["tries"]) == ("acme", 2, 0)
    assert [e["reason"] for e in data["errors"]] == ["snoozed", "snoozed"]
    code, out, _ = run(capsys, "job", str(job_id), "--url", url)
    lines = {x.split(None, 1)[0]: x.split(None, 1)[1] for x in out.splitlines()
             if x and not x.startswith((" ", "attempt 1", "attempt 2"))}
    assert lines["limit_key"] == "acme" and lines["snoozes"] == "2", out
    assert "attempt 2 snoozed at" in out and "429 from the API" in out
    code, out, _ = run(capsys, "jobs", "--url", url)
    assert code == 0
    [row] = [x for x in out.splitlines() if x.startswith(str(job_id))]
    assert "0/3 (2 snoozed)" in row, row


def test_dashboard_shows_limits_and_a_jobs_key_and_snoozes(
    flow_app: tuple[str, Store]
) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from tether.dashboard._app import create_app

    spec, store = flow_app
    job_id = snoozed_job(store)
    limits = declared(load_app(spec).runtime.registry)
    url = store.info().url
    with TestClient(create_app(lambda: open_store(url), flow=limits)) as c:
        page = c.get("/").text
        assert 'id="limits"' in page and "3 of 3 running" in page
        assert "2 per customer" in page and "10/30s" in page and "1 of 5 running" in page
        page = c.get(f"/jobs/{job_id}").text
        assert 'id="limit-key">acme<' in page and "2 snoozed" in page
        assert "429 from the API" in page
    with TestClient(create_app(lambda: open_store(url))) as c:
        assert 'id="limits"' not in c.get("/").text  # the app is not known


def test_enqueue_sets_the_limit_key_by_name_or_from_the_app(
    flow_app: tuple[str, Store], capsys: pytest.CaptureFixture[str]
) -> None:
    """A producer without the task's code must give the key itself (docs/flow-control.md);
    with --app it is read from the call, as the task's own enqueue reads it."""
    spec, store = flow_app
    url = store.info().url
    code, out, err = run(capsys, "enqueue", "flow.per_customer", "--url", url, "--args",
                         '["acme"]', "--limit-key", "acme")
    assert code == 0, err
    job = store.get_job(int(out))
    assert job is not None and job.limit_key == "acme"
    code, out, _ = run(capsys, "enqueue", "flow.per_customer", "--app", spec, "--args",
                       '{"customer": 7}')
    job = store.get_job(int(out))
    assert code == 0 and job is not None and job.limit_key == "7"
    code, out, _ = run(capsys, "enqueue", "flow.per_customer", "--app", spec, "--args",
                       '["acme"]', "--limit-key", "acme:eu")
    job = store.get_job(int(out))
    assert code == 0 and job is not None and job.limit_key == "acme:eu"
