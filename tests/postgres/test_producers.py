"""Nothing a producer does may block a live worker, and a transactional enqueue keeps the
store's idea of "now" (issue #8, F)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import psycopg
import pytest

from tests.servers import PG_DSN
from tether._errors import StoreUnavailable
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore


def _epoch(conn: psycopg.Connection[Any], expr: str) -> float:
    row = conn.execute(f"SELECT extract(epoch FROM {expr})::float8").fetchone()
    assert row is not None
    return float(row[0])


def test_an_open_producer_transaction_that_hit_a_running_key_blocks_no_heartbeat(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    pg.enqueue([NewJob("t", queue="hb", unique_key="order-7")])
    [job] = pg.claim("w1", ["hb"], 1, 30)
    # The worker's heartbeat store: one connection, which gives up on any row lock at once.
    beat = open_pg(min_size=1, max_size=1)
    with beat.transaction() as conn:
        conn.execute("SET SESSION lock_timeout = '500ms'")
    with psycopg.connect(PG_DSN) as producer:  # a transaction left open
        ids = pg.enqueue([NewJob("t", queue="hb", unique_key="order-7")], conn=producer)
        assert ids == [job.id]
        ids = pg.enqueue([NewJob("t", queue="hb", unique_key="order-7"), NewJob("t")],
                         conn=producer)
        assert ids[0] == job.id
        # The holder's heartbeat must not wait on the producer (a lock wait here would hit
        # lock_timeout and raise).
        result = beat.heartbeat("w1", [job.lease], 30)
        assert result.lost == frozenset()
        # Nor any other fenced write of the holder's.
        assert beat.save_checkpoint(job.lease, "1") is True
        producer.rollback()
    assert pg.get_job(job.id).status == "running"  # type: ignore[union-attr]


def test_a_transactional_delay_counts_from_the_statement_not_the_transaction(
    pg: PostgresStore,
) -> None:
    with psycopg.connect(PG_DSN) as producer:
        began = _epoch(producer, "now()")
        producer.execute("SELECT pg_sleep(0.5)")
        [job_id] = pg.enqueue([NewJob("t", delay=60)], conn=producer)
        [batch_id, _] = pg.enqueue([NewJob("t", delay=60), NewJob("t")], conn=producer)
        producer.commit()
    for jid in (job_id, batch_id):
        job = pg.get_job(jid)
        assert job is not None
        # Measured from the statement (>= 0.5 s after the transaction began), not from
        # the transaction's start.
        assert job.created_at >= began + 0.5
        assert job.run_at == pytest.approx(job.created_at + 60, abs=0.01)


def test_a_producer_waits_for_nobody_but_producers_of_the_same_key(
    pg: PostgresStore,
) -> None:
    """ON CONFLICT DO NOTHING: a key held by a committed live job resolves to that job's id
    without any lock; a key inserted by another open transaction is that producer's."""
    with psycopg.connect(PG_DSN) as a:
        [first] = pg.enqueue([NewJob("t", unique_key="k1")], conn=a)
        a.commit()
        assert pg.enqueue([NewJob("t", unique_key="k1")], conn=a) == [first]
        a.commit()
    assert pg.enqueue([NewJob("t", unique_key="k1")]) == [first]
    assert len(pg.list_jobs()) == 1


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:  # reported to the test through `out`
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _wait_for_lock_wait(pg: PostgresStore, waiter: PostgresStore) -> None:
    """Until a backend of ``waiter`` waits on a lock (the racing producer)."""
    deadline = time.monotonic() + 10
    while True:
        with pg.transaction() as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity "
                               "WHERE wait_event_type = 'Lock' AND application_name = %s",
                               (waiter.application_name,)).fetchone()
        if row and row[0]:
            return
        assert time.monotonic() < deadline, "the second producer never waited"
        time.sleep(0.01)


def test_a_key_committed_after_the_statement_began_is_resolved_by_a_retry(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    """Producer A holds a new key in an open transaction; producer B's enqueue of the same key
    waits for it, then conflicts with a row its snapshot cannot see. B's statement rolls back
    whole (unique_key_race, 40001) and runs again: it returns A's job, and nothing else was
    inserted."""
    other = open_pg()
    with psycopg.connect(PG_DSN) as a:
        [a_id] = pg.enqueue([NewJob("t", unique_key="race")], conn=a)
        thread, out = _in_thread(lambda: other.enqueue(
            [NewJob("t", queue="b"), NewJob("t", queue="b", unique_key="race")],
            request_id="b-1"))
        _wait_for_lock_wait(pg, other)
        a.commit()
        thread.join(10)
    assert len(out) == 1 and not isinstance(out[0], BaseException), out
    b_plain, b_key = out[0]
    assert b_key == a_id
    assert [j.id for j in pg.list_jobs()] == sorted([a_id, b_plain])
    # The request record holds what was returned: a replay answers the same.
    assert other.enqueue([NewJob("t", queue="b"), NewJob("t", queue="b", unique_key="race")],
                         request_id="b-1") == [b_plain, b_key]


def test_the_same_race_inside_a_callers_transaction_is_unavailable(
    pg: PostgresStore,
) -> None:
    name = "tether-race-caller"
    """In the caller's own transaction the statement cannot be re-run (the failure aborted the
    transaction): the caller is told to retry it, with StoreUnavailable."""
    with psycopg.connect(PG_DSN) as a, psycopg.connect(PG_DSN, application_name=name) as b:
        pg.enqueue([NewJob("t", unique_key="race2")], conn=a)
        thread, out = _in_thread(lambda: pg.enqueue([NewJob("t", unique_key="race2")], conn=b))
        _wait_for_lock_wait(pg, cast(PostgresStore, SimpleNamespace(application_name=name)))
        a.commit()
        thread.join(10)
        assert len(out) == 1 and isinstance(out[0], StoreUnavailable), out
        b.rollback()
        # The caller's retry of its transaction sees the holder.
        assert pg.enqueue([NewJob("t", unique_key="race2")], conn=b) == [pg.list_jobs()[0].id]


def test_two_calls_with_one_request_id_at_once_insert_once(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    other = open_pg()
    with psycopg.connect(PG_DSN) as a:
        first = pg.enqueue([NewJob("t", queue="r")], conn=a, request_id="same")
        thread, out = _in_thread(lambda: other.enqueue([NewJob("t", queue="r")],
                                                       request_id="same"))
        _wait_for_lock_wait(pg, other)
        a.commit()
        thread.join(10)
    assert out == [first]
    assert [j.id for j in pg.list_jobs(queue="r")] == first
