"""The dashboard's issue #24 features over HTTP on every store: history, search by task prefix
and argument, bulk actions with their confirmation, workers with their jobs, the JSON API
(same auth and CSRF rules as the pages) and the live-update script."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from tests.ops.test_dashboard import csrf, seed
from tether._task import make_new_job
from tether.dashboard._app import create_app
from tether.stores import Outcome, Store, WorkerInfo, open_store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def billing(store: Store) -> dict[str, list[int]]:
    """Jobs to search: two billing tasks for user 7 and 8, a mail task for user 7; one of the
    user-7 charges done, one failed, in queue ``bill``."""
    charges = store.enqueue([make_new_job("billing.charge", [7], {"user_id": 7},
                                          queue="bill", max_attempts=1) for _ in range(2)])
    (refund,) = store.enqueue([make_new_job("billing.refund", [8], {"user_id": 8},
                                            queue="bill")])
    (mail,) = store.enqueue([make_new_job("mail.send", ["a@b"], {"user_id": 7},
                                          queue="mail")])
    claimed = store.claim("w-bill", ["bill"], 2, 30)
    store.finish([Outcome(claimed[0].lease, "done", result="1"),
                  Outcome(claimed[1].lease, "error", reason="error", error="Declined")])
    return {"charges": charges, "refund": [refund], "mail": [mail]}


@pytest.fixture
def filled(store_url: str) -> Iterator[tuple[Store, dict[str, list[int]]]]:
    store = open_store(store_url)
    store.migrate()
    try:
        yield store, billing(store)
    finally:
        store.close()


def test_search_by_task_prefix_and_argument(
    store_url: str, filled: tuple[Store, dict[str, list[int]]]
) -> None:
    _, ids = filled
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        def found(query: str) -> set[int]:
            r = c.get(f"/api/jobs?{query}")
            assert r.status_code == 200, r.text
            return {j["id"] for j in r.json()["jobs"]}

        assert found("prefix=billing.") == {*ids["charges"], *ids["refund"]}
        assert found("prefix=billing.&arg=user_id%3D7") == set(ids["charges"])
        assert found("arg=7") == {*ids["charges"], *ids["mail"]}
        assert found("arg=a%40b") == set(ids["mail"])
        assert found("prefix=billing.&status=failed") == {ids["charges"][1]}
        assert found("prefix=nothing.") == set()
        assert c.get("/api/jobs?since=nonsense").status_code == 400
        page = c.get("/jobs?prefix=billing.&arg=user_id%3D7").text
        assert f'href="/jobs/{ids["charges"][0]}"' in page
        assert f'href="/jobs/{ids["mail"][0]}"' not in page
        assert 'value="user_id=7"' in page


def test_history_counts_and_charts(
    store_url: str, filled: tuple[Store, dict[str, list[int]]]
) -> None:
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        h = c.get("/api/history?window=15m").json()
        assert len(h["buckets"]) == len(h["all"]["done"]) == 60
        assert sum(h["all"]["done"]) == 1 and sum(h["all"]["failed"]) == 1
        assert sum(h["queues"]["bill"]["started"]) == 2
        assert sum(h["tasks"]["billing.charge"]["failed"]) == 1
        assert h["all"]["depth"][-1] == 2  # the refund and the mail wait
        assert h["queues"]["mail"]["depth"][-1] == 1
        assert all(w is None or w >= 0 for w in h["all"]["wait_avg"])
        assert h["examined"] == 4 and h["truncated"] is False
        only = c.get("/api/history?window=1h&prefix=mail.").json()
        assert set(only["tasks"]) == {"mail.send"}
        assert c.get("/api/history?window=2y").status_code == 400
        page = c.get("/history?window=15m").text
        for chart in ("throughput-all", "depth-all", "wait-all", "throughput-queue-bill",
                      "throughput-task-billing.charge"):
            assert f'id="{chart}"' in page
        assert 'data-failed="1"' in page and 'data-done="1"' in page


def test_bulk_retry_cancel_delete_with_confirmation(
    store_url: str, filled: tuple[Store, dict[str, list[int]]]
) -> None:
    store, ids = filled
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        preview = c.get("/api/bulk?action=retry&prefix=billing.").json()
        assert preview["count"] == 1 and preview["ids"] == [ids["charges"][1]]
        page = c.get("/bulk?action=cancel&arg=user_id%3D7").text
        assert "This will cancel <b>1</b> job(s)" in page  # the mail job; the charges finished
        refused = c.get("/api/bulk?action=delete&prefix=billing.")
        assert refused.status_code == 400 and "exactly one queue" in refused.json()["refused"]
        assert c.get("/api/bulk?action=delete&queue=bill&status=pending").json()["count"] == 1

        form = {"action": "retry", "ids": ",".join(map(str, preview["ids"]))}
        assert c.post("/api/act/bulk", data=form).status_code == 403  # no CSRF token
        assert c.post("/api/act/bulk", data=form,
                      headers={"x-csrf-token": "forged"}).status_code == 403
        token = c.get("/api/csrf").json()["csrf"]
        r = c.post("/api/act/bulk", data=form, headers={"x-csrf-token": token})
        assert r.status_code == 200 and r.json()["note"].startswith("retried 1 of 1")
        assert store.get_job(ids["charges"][1]).status == "pending"  # type: ignore[union-attr]

        r = c.post("/act/bulk", data={"csrf": csrf(c), "action": "cancel",
                                      "ids": str(ids["mail"][0]), "back": "/jobs"},
                   follow_redirects=False)
        assert r.status_code == 303 and "cancelled+1" in r.headers["location"]
        assert store.get_job(ids["mail"][0]).status == "cancelled"  # type: ignore[union-attr]

        r = c.post("/api/act/bulk", data={"action": "delete", "queue": "bill",
                                          "status": "pending"},
                   headers={"x-csrf-token": token})
        assert r.json()["note"] == "deleted 2 pending job(s) from bill", r.text
        assert store.get_job(ids["refund"][0]) is None
        r = c.post("/api/act/bulk", data={"action": "delete", "queue": "bill"},
                   headers={"x-csrf-token": token})
        assert r.status_code == 400 and "exactly one queue" in r.json()["error"]
    with TestClient(create_app(lambda: open_store(store_url), read_only=True)) as c:
        assert 'id="bulk"' not in c.get("/jobs").text
        assert 'id="confirm"' not in c.get("/bulk?action=cancel").text
        token = c.get("/api/csrf").json()["csrf"]
        r = c.post("/api/act/bulk", data={"action": "retry", "ids": "1"},
                   headers={"x-csrf-token": token})
        assert r.status_code == 403


def test_workers_with_their_jobs(store_url: str) -> None:
    store = open_store(store_url)
    store.migrate()
    try:
        ids = seed(store)  # w-1 registered, holding the running job of queue rq
        store.register_worker(WorkerInfo("w-idle", "h", 2, ("q",), 1))
        with TestClient(create_app(lambda: open_store(store_url))) as c:
            workers = {w["id"]: w for w in c.get("/api/workers").json()["workers"]}
            assert [j["id"] for j in workers["w-1"]["jobs"]] == [ids["running"]]
            assert workers["w-1"]["jobs"][0]["task"] == "d.run"
            assert workers["w-1"]["live"] is True and workers["w-idle"]["jobs"] == []
            page = c.get("/workers").text
            assert 'id="worker-w-1"' in page and f'href="/jobs/{ids["running"]}"' in page
            assert "idle" in page
    finally:
        store.close()


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres", "redis", "remote-sqlite"])
def test_every_page_has_a_json_twin_behind_the_same_auth(store_url: str) -> None:
    """Also through the remote store: the dashboard needs only the Admin role."""
    store = open_store(store_url)
    store.migrate()
    try:
        ids = seed(store)
        with TestClient(create_app(lambda: open_store(store_url), token="s3cret")) as c:
            for path in ("/api/overview", "/api/jobs", f"/api/jobs/{ids['failed']}",
                         "/api/history", "/api/workers", "/api/bulk?action=retry",
                         "/api/csrf", "/workers", "/history", "/bulk?action=retry"):
                assert c.get(path).status_code == 401, path
            auth = {"authorization": "Bearer s3cret"}
            o = c.get("/api/overview", headers=auth).json()
            assert o["totals"]["failed"] == 1 and o["store"] == store.kind
            assert {q["name"] for q in o["queues"]} == {"dq", "rq", "q"}
            assert o["workers"][0]["id"] == "w-1"
            j = c.get(f"/api/jobs/{ids['failed']}", headers=auth).json()
            assert j["status"] == "failed" and j["args"] == [1] and j["kwargs"] == {"why": "x"}
            assert j["error"] == "ValueError: kaput" and j["parents"] == []
            assert c.get("/api/jobs/999999", headers=auth).status_code == 404
            listed = c.get("/api/jobs?status=failed", headers=auth).json()
            assert [x["id"] for x in listed["jobs"]] == [ids["failed"]]
            assert listed["next_cursor"] is None
    finally:
        store.close()


def test_live_script_is_served_and_used(store: Store, store_url: str) -> None:
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        r = c.get("/static/live.js")
        assert r.status_code == 200 and "text/javascript" in r.headers["content-type"]
        assert "data-live" in r.text
        for path in ("/", "/workers", "/history"):
            page = c.get(path).text
            assert '<script src="/static/live.js" defer></script>' in page
            assert "data-live" in page, path


def test_history_buckets_follow_the_rows_times(store: Store) -> None:
    """A job due at T-607, started at T-307 and done at T-200 (15 s buckets from T-900):
    waiting in the buckets that end between, a 300 s wait where it started, done where it
    finished; a job due later that never started waits from its due time to now."""
    from tether.dashboard._history import history

    t = store.now()
    (a,) = store.enqueue([make_new_job("h.a", [], {}, queue="h")], now=t - 607)
    (job,) = store.claim("w-h", ["h"], 1, 900, now=t - 307)
    assert job.id == a
    store.finish([Outcome(job.lease, "done", result="1")], now=t - 200)
    store.enqueue([make_new_job("h.b", [], {}, queue="h")], now=t - 100)
    h = history(store, t, "15m").queues["h"]
    assert h.depth[19:39] == [1] * 20 and h.depth[39:53] == [0] * 14
    assert h.depth[53:] == [1] * 7  # h.b, due at t-100: buckets ending from t-90 on
    assert h.depth[:19] == [0] * 19
    assert h.started[39] == 1 and h.wait_avg[39] == pytest.approx(300)
    assert h.wait_max[39] == pytest.approx(300) and h.wait_avg[40] is None
    assert h.done[46] == 1 and sum(h.done) == 1 and sum(h.failed) == 0


def test_a_bulk_confirmation_covers_at_most_a_thousand_jobs(store: Store, store_url: str) -> None:
    from tether.dashboard._bulk import MOST

    made = store.enqueue([make_new_job("cap.job", [i], {}, queue="cap")
                          for i in range(MOST + 1)])
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        preview = c.get("/api/bulk?action=cancel&queue=cap&prefix=cap.").json()
        assert preview["count"] == MOST and preview["capped"] is True
        assert preview["ids"] == sorted(made, reverse=True)[:MOST]  # newest first
        page = c.get("/bulk?action=cancel&queue=cap").text
        assert "run it again for the rest" in page


def test_the_history_page_draws_the_busiest_groups(store: Store, store_url: str) -> None:
    from tether.dashboard._app import CHARTED

    store.enqueue([make_new_job(f"t.{i:02}", [], {}, queue="many") for i in range(CHARTED + 2)])
    (job,) = store.claim("w", ["many"], 1, 30)  # t.00, the oldest: the busiest now
    store.finish([Outcome(job.lease, "done", result="1")])
    store.enqueue([make_new_job("t.99", [], {}, queue="many")])
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        page = c.get("/history?window=15m").text
        drawn = [f"t.{i:02}" for i in range(CHARTED)]
        assert all(f'id="throughput-task-{t}"' in page for t in drawn)
        assert 'id="throughput-task-t.12"' not in page and 'id="throughput-task-t.99"' not in page
        assert "3 quieter queue(s) or task(s) not drawn" in page
        assert len(c.get("/api/history?window=15m").json()["tasks"]) == CHARTED + 3
