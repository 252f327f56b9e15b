"""PostgreSQL: the job exists iff the caller commits; handler writes commit iff the lease holds."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import psycopg
import pytest

import tether
from tests.servers import PG_DSN, isolated_url
from tests.worker.helpers import running, status, wait_until
from tether._errors import ConfigError
from tether.stores import NewJob

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def pg_app(tmp_path: object) -> Iterator[tuple[tether.App, str]]:
    with isolated_url("postgres", tmp_path) as url:  # type: ignore[arg-type]
        app = tether.App(url, lease_ttl=1.5, poll_interval=0.1)
        schema = url.rsplit("schema=", 1)[1]
        app.store.migrate()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE TABLE "{schema}".ledger (job_id bigint, attempt int, note text)')
        try:
            yield app, schema
        finally:
            app.close()


def test_enqueue_inside_the_callers_transaction(pg_app: tuple[tether.App, str]) -> None:
    app, _ = pg_app

    @app.task
    def f(n: int) -> None: ...

    with psycopg.connect(PG_DSN) as conn:
        rolled_back = f.enqueue(1, conn=conn)
        conn.rollback()
        committed = f.enqueue(2, conn=conn)
        assert app.store.get_job(committed) is None  # not visible before the commit
        conn.commit()
    assert app.store.get_job(rolled_back) is None
    assert app.get_job(committed).status == "pending"


def test_transaction_commits_writes_with_the_completion(pg_app: tuple[tether.App, str]) -> None:
    app, schema = pg_app

    @app.task
    def record(note: str) -> None:
        job = tether.current_job()
        with job.transaction() as conn:
            conn.execute(f'INSERT INTO "{schema}".ledger VALUES (%s, %s, %s)',
                         (job.id, job.attempt, note))

    completed: list[int] = []
    app.on("completed", lambda event: completed.append(event.job_id))
    ids = record.enqueue_many([((f"n{i}",), {}) for i in range(10)])
    with running(app, concurrency=3):
        wait_until(lambda: all(status(app, i) == "done" for i in ids))
        # Completed inside the handler's transaction: logs and metrics still see each one.
        wait_until(lambda: sorted(completed) == ids)
    with psycopg.connect(PG_DSN) as conn:
        rows = conn.execute(f'SELECT job_id FROM "{schema}".ledger ORDER BY job_id').fetchall()
    assert [r[0] for r in rows] == ids


def test_stale_transaction_rolls_back_everything(pg_app: tuple[tether.App, str]) -> None:
    app, schema = pg_app
    go = threading.Event()
    outcome: list[str] = []

    @app.task(max_attempts=5)
    def slow() -> None:
        job = tether.current_job()
        if job.attempt == 1:
            go.wait(10)
            try:
                with job.transaction() as conn:
                    conn.execute(f'INSERT INTO "{schema}".ledger VALUES (%s, %s, %s)',
                                 (job.id, job.attempt, "zombie"))
            except tether.LeaseLost:
                outcome.append("rejected")
                raise
        else:
            with job.transaction() as conn:
                conn.execute(f'INSERT INTO "{schema}".ledger VALUES (%s, %s, %s)',
                             (job.id, job.attempt, "live"))

    job_id = slow.enqueue()
    with running(app, concurrency=2):
        wait_until(lambda: status(app, job_id) == "running")
        # The lease lapses under the first attempt (as if the worker had been paused). The
        # reap steps over a row another session holds (SKIP LOCKED): a heartbeat renewing
        # the lease at that moment makes one call reap nothing, so reap until it is taken.
        wait_until(lambda: app.store.reap_expired(0, now=app.store.now() + 60))
        wait_until(lambda: status(app, job_id) == "done")
        go.set()
        wait_until(lambda: outcome == ["rejected"])
    with psycopg.connect(PG_DSN) as conn:
        rows = conn.execute(f'SELECT attempt, note FROM "{schema}".ledger').fetchall()
    assert rows == [(2, "live")]


def test_transaction_needs_a_transactional_store(tmp_path: object) -> None:
    app = tether.App(f"sqlite:///{tmp_path}/t.db")  # type: ignore[str-bytes-safe]
    with pytest.raises(ConfigError, match="transaction"):
        app.enqueue_jobs([tether._task.make_new_job("t", [], {})], conn=object())
    app.close()


def test_a_bad_job_inside_the_callers_transaction_is_its_own_error(
        pg_app: tuple[tether.App, str]) -> None:
    """A job the store refuses (a payload that is not JSON text) raises the job's TypeError,
    not "cannot enqueue inside a caller's transaction": the PostgreSQL store can, and says so
    by its capabilities instead of the App guessing from a TypeError."""
    app, _ = pg_app
    bad = NewJob("t", payload=b"{}")  # type: ignore[arg-type]
    with psycopg.connect(PG_DSN) as conn:
        with pytest.raises(TypeError, match="payload must be JSON text"):
            app.enqueue_jobs([bad], conn=conn)
        conn.rollback()

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(PG_DSN) as aconn:
            with pytest.raises(TypeError, match="payload must be JSON text"):
                await app.aenqueue_jobs([bad], conn=aconn)
        await app.aclose()

    asyncio.run(scenario())
    assert app.store.counts() == []


def test_a_workflow_enqueued_inside_the_callers_transaction(
        pg_app: tuple[tether.App, str]) -> None:
    """Issue #20: every level of a chain goes through the caller's connection, so the whole
    workflow exists iff the caller commits (the children name parents the same transaction
    inserted)."""
    app, _ = pg_app

    @app.task
    def step(x: int = 0) -> int:
        return x + 1

    with psycopg.connect(PG_DSN) as conn:
        gone = tether.chain(step.s(0), step.s(), step.s()).enqueue(conn=conn)
        conn.rollback()
        kept = tether.chain(step.s(0), step.s(), step.s()).enqueue(conn=conn)
        assert app.store.get_job(kept.last) is None  # not visible before the commit
        conn.commit()
    assert app.store.get_jobs(list(gone.ids)) == []
    assert [app.get_job(i).status for i in kept.ids] == ["pending", "waiting", "waiting"]
    with running(app, concurrency=2):
        assert app.wait(kept.last, timeout=30) == 3
