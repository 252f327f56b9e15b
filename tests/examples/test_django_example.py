"""examples/django_app run for real: migrations, the views through Django's test client, and
``manage.py tether_worker`` running the jobs (``--burst``, or until SIGTERM), on three set-ups.

* ``postgres``: Django and tether in one PostgreSQL database (fresh schemas per test); the job
  is written on Django's own connection, so it commits and rolls back with the order.
* ``sqlite``, ``redis``: Django on SQLite, tether on an SQLite file / Redis; the job is
  enqueued by ``transaction.on_commit``, so a failing view enqueues nothing.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.crash.harness import wait_for
from tests.examples.conftest import EXAMPLES, PYTHON, example_env, stop
from tests.servers import PG_DSN, isolated_url
from tether.stores import Store, open_store

SHOP = EXAMPLES / "django_app"
DRIVER = Path(__file__).with_name("django_driver.py")
pytestmark = pytest.mark.slow


class Shop:
    """One set-up of the example: its environment, tether's store and the order table."""

    def __init__(self, kind: str, env: dict[str, str], url: str, tmp: Path,
                 pg_schema: str | None = None) -> None:
        self.kind, self.env, self.url, self.tmp, self.pg_schema = kind, env, url, tmp, pg_schema

    def manage(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PYTHON, "manage.py", *args], cwd=SHOP, env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def receipts(self) -> dict[int, str]:
        """The order table as the database has it (not through Django)."""
        if self.pg_schema is not None:
            import psycopg

            with psycopg.connect(PG_DSN) as conn:
                rows = conn.execute(f'SELECT id, receipt FROM "{self.pg_schema}".shop_order'
                                    ).fetchall()
        else:
            with sqlite3.connect(self.env["SHOP_SQLITE"]) as conn:
                rows = conn.execute("SELECT id, receipt FROM shop_order").fetchall()
        return {int(i): str(r) for i, r in rows}


@pytest.fixture(params=["postgres", "sqlite", "redis"])
def shop(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shop]:
    kind: str = request.param
    with isolated_url("sqlite" if kind == "sqlite" else kind, tmp_path) as url:
        if kind == "postgres":
            import psycopg

            schema = "shop_" + uuid.uuid4().hex[:12]
            tether_schema = url.rsplit("schema=", 1)[1]
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            env = example_env(SHOP_DB="postgres", SHOP_PG_SCHEMA=schema,
                              SHOP_TETHER_SCHEMA=tether_schema)
            try:
                yield Shop(kind, env, url, tmp_path, pg_schema=schema)
            finally:
                with psycopg.connect(PG_DSN, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        else:
            env = example_env(SHOP_SQLITE=str(tmp_path / "shop.sqlite3"), TETHER_URL=url)
            yield Shop(kind, env, url, tmp_path)


@pytest.fixture
def store(shop: Shop) -> Iterator[Store]:
    s = open_store(shop.url)
    try:
        yield s
    finally:
        s.close()


def _drive(shop: Shop, scenario: str) -> dict[str, Any]:
    result = subprocess.run([PYTHON, str(DRIVER), scenario], cwd=SHOP, env=shop.env,
                            capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    seen: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return seen


def test_order_and_job_commit_together_and_the_worker_runs_it(
    shop: Shop, store: Store, processes: list[subprocess.Popen[str]]
) -> None:
    migrated = shop.manage("migrate", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    seen = _drive(shop, "requests")
    same_connection = shop.kind == "postgres"
    assert seen["mode"] == ("connection" if same_connection else "on_commit")

    # The view: one order, one job.
    assert seen["ok_status"] == 200, seen
    order_id = seen["ok_body"]["order"]
    if same_connection:
        assert isinstance(seen["ok_body"]["job"], int)  # written inside the transaction
    else:
        assert seen["ok_body"]["job"] is None  # waited for the commit

    # A view that raises after enqueueing: neither the order nor the job exists.
    assert seen["failing_status"] == 500
    assert seen["failing_new_orders"] == 0
    assert seen["failing_new_jobs"] == 0
    # ... and a savepoint rolled back inside a committed transaction takes its job along.
    assert seen["savepoint_new_jobs"] == 0

    # Inside an open transaction nobody else sees the job; after the commit exactly one.
    assert (seen["inside_id"] is not None) is same_connection
    assert seen["inside_visible"] is False
    assert seen["after_commit_jobs"] == 1

    jobs = store.list_jobs(limit=100)
    assert sorted(json.loads(j.payload)[0][0] for j in jobs) == sorted(
        [order_id, seen["pen_order"]])
    assert all(j.status == "pending" and j.task == "shop.tasks.send_receipt" for j in jobs)
    ids = [j.id for j in jobs]

    # The worker: manage.py tether_worker runs both jobs, writing through the ORM. With
    # --burst it exits when no job is due; on PostgreSQL a long-running one is stopped by
    # SIGTERM once both are done (it drains and exits 0). On SQLite the handlers run in --pool
    # process children, which set Django up themselves.
    if shop.kind != "postgres":
        pool = ["--pool", "process"] if shop.kind == "sqlite" else []
        ran = shop.manage("tether_worker", "--burst", "-c", "2", *pool, timeout=90)
        assert ran.returncode == 0, ran.stderr[-3000:]
    else:
        worker = subprocess.Popen([PYTHON, "manage.py", "tether_worker", "-c", "2"], cwd=SHOP,
                                  env=shop.env, text=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        processes.append(worker)

        def finished() -> bool:
            if worker.poll() is not None:
                raise AssertionError(f"worker exited {worker.returncode}: "
                                     f"{worker.stderr.read() if worker.stderr else ''}")
            return all((j := store.get_job(i)) is not None and j.status == "done"
                       for i in ids)

        wait_for(finished, 60, "both jobs done", interval=0.1)
        assert stop(worker) == 0
    done = {i: store.get_job(i) for i in ids}
    assert all(j is not None and j.status == "done" for j in done.values()), done
    for job in done.values():  # on PostgreSQL atomic_job() completed it (no result kept)
        assert job is not None
        assert (job.result is None) is same_connection, job.result
    receipts = shop.receipts()
    job_of = {json.loads(j.payload)[0][0]: j.id for j in jobs}
    assert receipts[order_id] == f"receipt for book (job {job_of[order_id]})"
    assert receipts[seen["pen_order"]].startswith("receipt for pen (job ")
    assert len(receipts) == 2  # the failing view's order never committed


    # atomic_job(): on PostgreSQL a lost lease rolls the task's writes back with the refused
    # completion; a live one commits both. Elsewhere it is a plain atomic block.
    seen = _drive(shop, "atomic")
    stale, live = seen["stale"], seen["live"]
    if same_connection:
        assert stale == {"joined": True, "lease_lost": True, "receipt": "",
                         "status": "pending"}
        assert live == {"joined": True, "lease_lost": False, "receipt": "live write",
                        "status": "done"}
    else:
        assert stale == {"joined": False, "lease_lost": False, "receipt": "stale write",
                         "status": "pending"}
        assert live == {"joined": False, "lease_lost": False, "receipt": "live write",
                        "status": "running"}


def test_the_transaction_setting_picks_the_mode(shop: Shop) -> None:
    """auto: the same connection exactly when tether is on Django's PostgreSQL database;
    connection: refused at once where it cannot work; on_commit: also on PostgreSQL."""
    migrated = shop.manage("migrate", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    seen = _drive(shop, "modes")
    if shop.kind == "postgres":
        assert (seen["auto"], seen["connection"]) == ("connection", "connection")
    else:
        assert seen["auto"] == "on_commit"
        assert seen["connection"].startswith("ImproperlyConfigured: settings.TETHER")
    assert seen["on_commit"] == "on_commit"
    assert seen["elsewhere_auto"] == "on_commit"
    assert seen["psycopg2_auto"] == "on_commit"
    if shop.kind == "postgres":
        [warning] = seen["psycopg2_warnings"]
        assert "psycopg 3" in warning and "not DATABASES" not in warning, warning
    assert seen["elsewhere_connection"].startswith("ImproperlyConfigured: settings.TETHER")
    assert (seen["on_commit_id"], seen["on_commit_inside"], seen["on_commit_after"]) == (
        None, 0, 1)


def test_the_readme_flow_under_runserver(
    shop: Shop, store: Store, processes: list[subprocess.Popen[str]]
) -> None:
    """What the README has a user do, as processes: ``manage.py migrate``, ``manage.py
    runserver``, a POST over HTTP, ``manage.py tether_worker --burst``, then the receipt over
    HTTP; and the failing view over HTTP leaves neither an order nor a job."""
    import socket

    import httpx

    migrated = shop.manage("migrate", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([PYTHON, "manage.py", "runserver", "--noreload",
                               f"127.0.0.1:{port}"], cwd=SHOP, env=shop.env, text=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    processes.append(server)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        try:
            return httpx.get(f"{base}/orders/0/", timeout=2).status_code in (404, 500)
        except httpx.TransportError:
            return False

    wait_for(up, 60, "runserver answering", interval=0.1)
    with httpx.Client(base_url=base, timeout=30) as client:
        placed = client.post("/orders/", data={"item": "book"})
        assert placed.status_code == 200, placed.text
        body = placed.json()
        same_connection = shop.kind == "postgres"
        assert body["mode"] == ("connection" if same_connection else "on_commit")
        assert (body["job"] is not None) is same_connection
        assert client.post("/orders/failing/", data={"item": "lamp"}).status_code == 500
        [job] = store.list_jobs(limit=10)
        assert json.loads(job.payload)[0] == [body["order"]], "one job: the failing view's is gone"

        ran = shop.manage("tether_worker", "--burst", timeout=90)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "burst done: ran 1 job(s) (1 done)" in ran.stderr
        receipt = client.get(f"/orders/{body['order']}/").json()["receipt"]
        assert receipt == f"receipt for book (job {job.id})"
    assert len(shop.receipts()) == 1, "the failing view's order never committed"
    stop(server)
