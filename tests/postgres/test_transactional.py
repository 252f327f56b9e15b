"""Transactional enqueue and finish (the outbox pattern) in a caller's transaction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.servers import PG_DSN
from tether.stores import Lease, NewJob, Outcome
from tether.stores._postgres.store import PostgresStore


@pytest.fixture
def business(pg: PostgresStore, admin: psycopg.Connection[Any]) -> Iterator[str]:
    """A table of the application's own, next to tether's, in the test's schema."""
    table = f'"{pg.schema}".orders'
    admin.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
    yield table


def _count(admin: psycopg.Connection[Any], table: str) -> int:
    row = admin.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def test_enqueue_rolled_back_leaves_no_job(
    pg: PostgresStore, business: str, admin: psycopg.Connection[Any]
) -> None:
    with pytest.raises(RuntimeError), pg.transaction() as conn:
        conn.execute(f"INSERT INTO {business} VALUES (1)")
        (job_id,) = pg.enqueue([NewJob("send.mail")], conn=conn)
        raise RuntimeError("the order failed")
    assert pg.get_job(job_id) is None
    assert _count(admin, business) == 0
    assert pg.list_jobs() == []


def test_enqueue_committed_leaves_one_job(
    pg: PostgresStore, business: str, admin: psycopg.Connection[Any]
) -> None:
    with pg.transaction() as conn:
        conn.execute(f"INSERT INTO {business} VALUES (1)")
        (job_id,) = pg.enqueue([NewJob("send.mail")], conn=conn)
        # not visible to anyone else before the caller commits
        assert pg.get_job(job_id) is None
    job = pg.get_job(job_id)
    assert job is not None and job.status == "pending"
    assert _count(admin, business) == 1


def test_enqueue_in_a_foreign_connection_keeps_its_search_path(
    pg: PostgresStore, business: str
) -> None:
    with psycopg.connect(PG_DSN) as conn:  # not autocommit, search_path untouched
        before = conn.execute("SHOW search_path").fetchone()
        conn.execute(f"INSERT INTO {business} VALUES (7)")
        (job_id,) = pg.enqueue([NewJob("t")], conn=conn)
        assert conn.execute("SHOW search_path").fetchone() == before
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
    assert pg.get_job(job_id) is None
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        (job_id,) = pg.enqueue([NewJob("t")], conn=conn)  # autocommit: committed at once
        assert conn.execute("SHOW search_path").fetchone() == before
    assert pg.get_job(job_id) is not None


def test_finish_with_a_stale_lease_rejects_and_the_caller_rolls_back(
    pg: PostgresStore, business: str, admin: psycopg.Connection[Any]
) -> None:
    pg.enqueue([NewJob("t")])
    (job,) = pg.claim("w1", ["default"], 1, 30)
    stale = Lease(job.id, job.attempt + 1, "w1")
    with pytest.raises(RuntimeError), pg.transaction() as conn:
        conn.execute(f"INSERT INTO {business} VALUES (1)")
        rejected = pg.finish([Outcome(stale, "done", result="1")], conn=conn)
        assert rejected == [stale]
        raise RuntimeError("lease lost: undo the side effects")
    assert _count(admin, business) == 0
    current = pg.get_job(job.id)
    assert current is not None and current.status == "running"


def test_finish_commits_with_the_callers_writes(
    pg: PostgresStore, business: str, admin: psycopg.Connection[Any]
) -> None:
    pg.enqueue([NewJob("t")])
    (job,) = pg.claim("w1", ["default"], 1, 30)
    with pg.transaction() as conn:
        conn.execute(f"INSERT INTO {business} VALUES (1)")
        assert pg.finish([Outcome(job.lease, "done", result="42")], conn=conn) == []
    done = pg.get_job(job.id)
    assert done is not None and (done.status, done.result) == ("done", "42")
    assert _count(admin, business) == 1
