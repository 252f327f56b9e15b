"""PostgreSQL specifics of #12's completion notifications and async producer: NOTIFY's payload
limit, the 'any' payload, and enqueue inside the caller's AsyncConnection transaction."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from tests.contract.aioloop import run_unblocked
from tests.servers import PG_DSN
from tether.stores import NewJob, Outcome
from tether.stores._postgres.store import PostgresStore


def test_a_batch_past_the_payload_limit_notifies_any(pg: PostgresStore) -> None:
    """2,500 ids do not fit NOTIFY's 8,000 bytes: the finish still succeeds (no 'payload
    string too long') and a waiter on one of them is woken by the '*' payload."""
    n = 2500
    ids = pg.enqueue([NewJob("t", queue="big") for _ in range(n)])
    jobs = pg.claim("w1", ["big"], n, 60)
    assert len(jobs) == n
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(pg.wait_for_finish([ids[-1]], 20)))
    waiter.start()
    waiter.join(0.3)
    started = time.monotonic()
    assert pg.finish([Outcome(j.lease, "done", result="1") for j in jobs]) == []
    waiter.join(20)
    assert result == [True]
    assert time.monotonic() - started < 5


def test_an_any_payload_wakes_every_waiter(
    pg: PostgresStore, admin: psycopg.Connection[Any]
) -> None:
    job_id = pg.enqueue([NewJob("t")])[0]
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(pg.wait_for_finish([job_id], 20)))
    waiter.start()
    waiter.join(0.3)
    started = time.monotonic()
    admin.execute("SELECT pg_notify(%s, '*')", (pg.done_channel,))
    waiter.join(20)
    assert result == [True]  # spurious (the job is pending): the caller re-reads
    assert time.monotonic() - started < 5


def test_no_notification_when_nothing_ended(pg: PostgresStore) -> None:
    """A retry (error with attempts left) sends nothing on the done channel."""
    pg.enqueue([NewJob("t", queue="r", max_attempts=3)])
    [job] = pg.claim("w1", ["r"], 1, 60)
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.done_channel}"')
        listener.execute("SELECT pg_advisory_lock_shared(%s)", (pg.done_key,))  # a waiter
        pg.finish([Outcome(job.lease, "error", error="again")])
        assert list(listener.notifies(timeout=0.5)) == []
        [again] = pg.claim("w1", ["r"], 1, 60, now=pg.now() + 3600)
        pg.finish([Outcome(again.lease, "done", result="1")])
        notes = list(listener.notifies(timeout=2.0, stop_after=1))
    assert [n.payload for n in notes] == [str(job.id)]


def test_enqueue_inside_the_callers_async_transaction(pg: PostgresStore) -> None:
    """conn=: the jobs commit or roll back with the caller's transaction."""

    async def main() -> tuple[list[int], list[int]]:
        producer = pg.async_producer()
        try:
            async with await psycopg.AsyncConnection.connect(PG_DSN) as conn:
                async with conn.transaction():
                    kept = await producer.enqueue([NewJob("kept")], conn=conn)
                try:
                    async with conn.transaction():
                        dropped = await producer.enqueue([NewJob("dropped")], conn=conn)
                        raise RuntimeError("roll back")
                except RuntimeError:
                    pass
            return kept, dropped
        finally:
            await producer.aclose()

    kept, dropped = run_unblocked(main)
    assert pg.get_job(kept[0]) is not None
    assert pg.get_job(dropped[0]) is None


def test_the_done_channel_is_listened_to_only_while_someone_waits(pg: PostgresStore) -> None:
    """A worker that never waits for results does not receive the fleet's finishes."""
    pg.wait_for_jobs(["default"], 0.01)  # the listener runs, as on every idle worker
    assert not pg._listener.done_ready()
    job_id = pg.enqueue([NewJob("t")])[0]
    assert pg.wait_for_finish([job_id], 0.2) is False
    assert pg._listener.done_ready()


def test_no_notification_when_nobody_waits(pg: PostgresStore) -> None:
    """Without a waiter holding the done key, finishing sends no NOTIFY (its cost is saved);
    with one, it does."""
    pg.enqueue([NewJob("t", queue="n") for _ in range(2)])
    first, second = pg.claim("w1", ["n"], 2, 60)
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.done_channel}"')
        pg.finish([Outcome(first.lease, "done", result="1")])
        assert list(listener.notifies(timeout=0.5)) == []
        listener.execute("SELECT pg_advisory_lock_shared(%s)", (pg.done_key,))
        pg.finish([Outcome(second.lease, "done", result="1")])
        notes = list(listener.notifies(timeout=2.0, stop_after=1))
    assert [n.payload for n in notes] == [str(second.id)]


def test_a_finish_inside_the_callers_transaction_always_notifies(pg: PostgresStore) -> None:
    """conn=: the done key is never taken inside a caller's transaction (it would be held
    until the caller commits), so the NOTIFY is sent, at the caller's commit."""
    pg.enqueue([NewJob("t", queue="c")])
    [job] = pg.claim("w1", ["c"], 1, 60)
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.done_channel}"')
        with pg.transaction() as conn:
            pg.finish([Outcome(job.lease, "done", result="1")], conn=conn)
        notes = list(listener.notifies(timeout=2.0, stop_after=1))
    assert [n.payload for n in notes] == [str(job.id)]


@pytest.mark.slow
def test_a_waiter_whose_listener_cannot_get_the_done_key_still_wakes(
    pg: PostgresStore, admin: psycopg.Connection[Any]
) -> None:
    """Another session holds the done key exclusively (a finish that never commits, at the
    extreme): the listener never becomes ready, and the waiter falls back to reading its job
    every second instead of sleeping to its timeout."""
    pg.enqueue([NewJob("t", queue="k")])
    [job] = pg.claim("w1", ["k"], 1, 60)
    admin.execute("SELECT pg_advisory_lock(%s)", (pg.done_key,))
    try:
        result: list[bool] = []
        waiter = threading.Thread(target=lambda: result.append(pg.wait_for_finish([job.id], 20)))
        waiter.start()
        waiter.join(1.5)
        assert not pg._listener.done_ready()
        started = time.monotonic()
        with pg.transaction() as conn:  # any finish: this one notifies, the poll would see it
            pg.finish([Outcome(job.lease, "done", result="1")], conn=conn)
        waiter.join(20)
        assert result == [True]
        assert time.monotonic() - started < 5
    finally:
        admin.execute("SELECT pg_advisory_unlock(%s)", (pg.done_key,))
