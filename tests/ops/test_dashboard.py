"""The dashboard over HTTP on every store: pages, actions (POST + CSRF), read-only, auth."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from tether._task import make_new_job
from tether.dashboard._app import create_app
from tether.stores import Outcome, Store, WorkerInfo, open_store

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def seed(store: Store) -> dict[str, int]:
    """A failed job (with a traceback), a pending one in queue q, a running one, a worker."""
    (failed,) = store.enqueue([make_new_job("d.fail", [1], {"why": "x"}, max_attempts=1,
                                            queue="dq")])
    (job,) = store.claim("w-1", ["dq"], 1, 30)
    store.finish([Outcome(job.lease, "error", reason="error",
                          error="ValueError: kaput\nTraceback (most recent call last):\n  f()")])
    (running,) = store.enqueue([make_new_job("d.run", [], {}, queue="rq")])
    store.claim("w-1", ["rq"], 1, 30)
    (pending,) = store.enqueue([make_new_job("d.wait", [], {}, queue="q")])
    store.register_worker(WorkerInfo("w-1", "h", 1, ("dq", "rq"), 2))
    return {"failed": failed, "running": running, "pending": pending}


@pytest.fixture
def seeded(store_url: str) -> Iterator[tuple[Store, dict[str, int]]]:
    store = open_store(store_url)
    store.migrate()
    try:
        yield store, seed(store)
    finally:
        store.close()


def csrf(client: TestClient) -> str:
    client.get("/")
    token = client.cookies.get("tether_csrf")
    assert token
    return token


def test_pages_and_actions(store_url: str, seeded: tuple[Store, dict[str, int]]) -> None:
    store, ids = seeded
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        page = c.get("/").text
        assert "w-1" in page and "live" in page and "dq" in page
        page = c.get("/jobs?status=failed").text
        assert f'href="/jobs/{ids["failed"]}"' in page and "kaput" in page
        assert "d.run" not in page
        page = c.get(f"/jobs/{ids['failed']}").text
        assert "Traceback (most recent call last)" in page
        assert '"why": "x"' in html.unescape(page)
        assert c.get(f"/jobs/{ids['running']}").text.count('http-equiv="refresh"') == 1
        assert c.get("/jobs/999999").status_code == 404
        token = csrf(c)
        assert c.post(f"/act/retry/{ids['failed']}", data={}).status_code == 403
        assert c.post(f"/act/retry/{ids['failed']}", data={"csrf": "forged"}).status_code == 403
        r = c.post(f"/act/retry/{ids['failed']}", data={"csrf": token},
                   headers={"origin": "http://evil.example"})
        assert r.status_code == 403
        r = c.post(f"/act/retry/{ids['failed']}", data={"csrf": token, "back": "/jobs"},
                   follow_redirects=False)
        assert r.status_code == 303 and "retried" in r.headers["location"]
        assert store.get_job(ids["failed"]).status == "pending"  # type: ignore[union-attr]
        c.post("/act/pause/q", data={"csrf": token})
        assert store.paused_queues() == ["q"]
        c.post("/act/resume/q", data={"csrf": token})
        assert store.paused_queues() == []
        c.post(f"/act/cancel/{ids['running']}", data={"csrf": token})
        assert store.get_job(ids["running"]).cancel_requested  # type: ignore[union-attr]
        c.post("/act/purge/q", data={"csrf": token, "s_pending": "1"})
        assert store.get_job(ids["pending"]) is None
        assert c.post("/act/cancel/999999", data={"csrf": token}).status_code == 404
        assert c.post("/act/nonsense", data={"csrf": token}).status_code == 400


def test_keyset_pages_newest_first(store_url: str, seeded: tuple[Store, dict[str, int]]) -> None:
    store, _ = seeded
    made = store.enqueue([make_new_job("d.many", [i], {}, queue="many") for i in range(60)])
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        first = c.get("/jobs?queue=many").text
        assert f'href="/jobs/{made[-1]}"' in first and f'href="/jobs/{made[9]}"' not in first
        second = c.get(f"/jobs?queue=many&cursor={made[10]}").text
        assert f'href="/jobs/{made[9]}"' in second and f'href="/jobs/{made[0]}"' in second


def test_retry_by_filter(store_url: str, seeded: tuple[Store, dict[str, int]]) -> None:
    store, ids = seeded
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        token = csrf(c)
        c.post("/act/retry-filtered", data={"csrf": token, "queue": "other"})
        assert store.get_job(ids["failed"]).status == "failed"  # type: ignore[union-attr]
        r = c.post("/act/retry-filtered", data={"csrf": token, "queue": "dq"},
                   follow_redirects=False)
        assert "retried+1" in r.headers["location"]
        assert store.get_job(ids["failed"]).status == "pending"  # type: ignore[union-attr]


def test_read_only_and_auth(tmp_path: object, store_url: str,
                            seeded: tuple[Store, dict[str, int]]) -> None:
    _, ids = seeded
    with TestClient(create_app(lambda: open_store(store_url), read_only=True)) as c:
        page = c.get("/jobs?status=failed").text
        assert "retry" not in page.split("<table")[1]
        assert c.post(f"/act/retry/{ids['failed']}", data={"csrf": csrf(c)}).status_code == 403
    with TestClient(create_app(lambda: open_store(store_url), token="s3cret")) as c:
        assert c.get("/").status_code == 401
        assert c.get("/healthz").status_code == 200
        assert c.get("/", headers={"authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/", headers={"authorization": "Bearer nope"}).status_code == 401
        r = c.get("/jobs?token=s3cret", follow_redirects=False)
        assert r.status_code == 303 and "token" not in r.headers["location"]
        assert c.get("/jobs").status_code == 200  # the cookie now carries it
    with TestClient(create_app(lambda: open_store(store_url), basic="ops:pw")) as c:
        assert c.get("/").status_code == 401
        good = base64.b64encode(b"ops:pw").decode()
        assert c.get("/", headers={"authorization": f"Basic {good}"}).status_code == 200
        bad = base64.b64encode(b"ops:nope").decode()
        assert c.get("/", headers={"authorization": f"Basic {bad}"}).status_code == 401


@pytest.mark.parametrize("store_kind", ["postgres", "redis"])  # the stores that can lose data
def test_the_overview_says_when_the_store_lost_data(
    store_kind: str, store_url: str, seeded: tuple[Store, dict[str, int]]
) -> None:
    """Issue 18, B: a data loss the stores counted (a PostgreSQL failover to a standby that
    lagged, a Redis restart without persistence) is on the overview, as in `tether stats`."""
    store, _ = seeded
    if store_kind == "postgres":
        from tether.stores._postgres.store import PostgresStore

        assert isinstance(store, PostgresStore)
        with store.transaction() as conn:
            conn.execute(store.queries["identity_ensure"])
            conn.execute(f'UPDATE "{store.schema}".identity SET data_loss = 2, '
                         "last_data_loss_at = now(), timeline = 1")
    else:
        from tether.stores._redis.store import RedisStore

        assert isinstance(store, RedisStore)
        store._client.hset(store._key("incidents"), mapping={"data_loss": 2,
                                                             "last_data_loss_at": 1.0})
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        page = html.unescape(c.get("/").text)
    assert "lost tether's data" in page and "2 time(s)" in page, page[:2000]


def test_hand_backs_are_shown_apart_from_attempts(store_url: str) -> None:
    from tests.ops.test_cli_ops import handed_back_job

    job_id = handed_back_job(store_url)
    with TestClient(create_app(lambda: open_store(store_url))) as c:
        page = c.get("/jobs").text
        assert "2/3 (5 handed back)" in page and "7/3" not in page
        page = c.get(f"/jobs/{job_id}").text
        assert "2 of 3, 5 handed back (claim 7)" in page and "7 of 3" not in page
