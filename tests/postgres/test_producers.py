"""Nothing a producer does may block a live worker, and a transactional enqueue keeps the
store's idea of "now" (issue #8, F)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.servers import PG_DSN
from tether.stores.base import NewJob
from tether.stores.postgres.store import PostgresStore


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
