"""Job dependencies on PostgreSQL (issue #20): what this store adds to the contract suite
(tests/contract/test_workflows.py) and the forced races (test_workflow_races.py).

* A finish of jobs without children never calls ``resolve_links`` (the server's function
  statistics say so), so the no-workflow path costs what it did.
* ``enqueue(conn=)`` naming an unknown parent raises JobNotFound without aborting the
  caller's transaction (the statement writes nothing instead of raising in SQL); a job the
  batch folds onto an earlier one with its unique_key still has its parents checked.
* The async producer links children with the same statement.
* After migration 0008, the ON CONFLICT spelling of the previous release still finds the
  unique index (a process not restarted yet keeps enqueueing with keys).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest

from tether._errors import JobNotFound
from tether.stores import NewJob, Outcome
from tether.stores._postgres.store import PostgresStore


def _resolve_calls(pg: PostgresStore, with_child: bool) -> int:
    """How many times a real finish of two running jobs (rolled back) called resolve_links,
    counted by the server (track_functions, this transaction's own statistics)."""
    queue = f"q{int(with_child)}"
    pg.enqueue([NewJob("t", queue=queue) for _ in range(2)])
    jobs = pg.claim("w", [queue], 2, 30.0)
    if with_child:
        pg.enqueue([NewJob("t", queue="kids", after=(jobs[0].id,))])
    params = {
        "now": None, "done": pg.done_channel, "done_key": pg.done_key, "gate": True,
        "channel": pg.channel, "ids": "{" + ",".join(str(j.id) for j in jobs) + "}",
        "batch": json.dumps([{"id": j.id, "attempt": j.attempt, "owner": "w",
                              "token": j.lease_token, "kind": "done", "result": "1",
                              "error": None, "reason": "done", "retry_delay": 0.0,
                              "digest": "d"} for j in jobs]),
    }
    with psycopg.connect(pg._connector.dsn) as conn:
        conn.execute("SET LOCAL track_functions = 'pl'")
        assert len(conn.execute(pg.queries["finish"], params).fetchall()) == 2
        row = conn.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
                           "WHERE schemaname = %s AND funcname = 'resolve_links'",
                           (pg.schema,)).fetchone()
        conn.rollback()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("with_child", [False, True])
def test_resolve_links_runs_only_for_a_parent(pg: PostgresStore, with_child: bool) -> None:
    assert _resolve_calls(pg, with_child) == (1 if with_child else 0)


def test_an_unknown_parent_leaves_the_callers_transaction_usable(pg: PostgresStore) -> None:
    with pg.transaction() as conn:
        [first] = pg.enqueue([NewJob("t")], conn=conn)
        with pytest.raises(JobNotFound) as info:
            pg.enqueue([NewJob("t", after=(first + 100,))], conn=conn)
        assert info.value.job_id == first + 100
        [second] = pg.enqueue([NewJob("t", after=(first,))], conn=conn)
    assert [j.id for j in pg.list_jobs()] == [first, second]
    assert pg.job_links(first).children == (second,)


def test_a_job_folded_onto_its_unique_key_still_needs_known_parents(pg: PostgresStore) -> None:
    """The batch folds a repeated unique_key onto its first job before it is sent; the
    parents the folded job names are checked all the same (it links nothing)."""
    [parent] = pg.enqueue([NewJob("t")])
    with pytest.raises(JobNotFound) as info:
        pg.enqueue([NewJob("t", unique_key="k"),
                    NewJob("t", unique_key="k", after=(parent, parent + 10))])
    assert info.value.job_id == parent + 10
    assert [j.id for j in pg.list_jobs()] == [parent]
    first, again = pg.enqueue([NewJob("t", unique_key="k"),
                               NewJob("t", unique_key="k", after=(parent,))])
    assert first == again and pg.job_links(parent).children == ()


def test_the_async_producer_links_children(pg: PostgresStore) -> None:
    [parent] = pg.enqueue([NewJob("t", queue="p")])

    async def run() -> list[int]:
        producer = pg.async_producer()
        try:
            with pytest.raises(JobNotFound):
                await producer.enqueue([NewJob("t"), NewJob("t", after=(parent + 50,))])
            return await producer.enqueue([NewJob("t", after=(parent, parent)),
                                           NewJob("t", after=(parent,), allow_failure=True)])
        finally:
            await producer.aclose()

    kids = asyncio.run(run())
    assert [pg.job_links(k).parents for k in kids] == [(parent,), (parent,)]
    assert [j.status for j in pg.get_jobs(kids)] == ["waiting", "waiting"]
    assert pg.cancel(parent) == "cancelled"
    assert [(j.status, j.failure_reason) for j in pg.get_jobs(kids)] == [
        ("cancelled", "dependency_failed"), ("pending", None)]
    [job] = pg.claim("w", ["default"], 5, 30.0)
    assert job.id == kids[1]
    assert pg.finish([Outcome(job.lease, "done", result="1")]) == []


def test_the_previous_on_conflict_spelling_still_finds_the_index(
    pg: PostgresStore, admin: psycopg.Connection[Any]
) -> None:
    insert = (f'INSERT INTO "{pg.schema}".jobs (task, payload, queue, run_at, max_attempts, '
              "max_stalls, created_at, unique_key) VALUES ('t', '[[], {}]', 'q', now(), 1, 1, "
              "now(), 'k') ON CONFLICT (unique_key) WHERE status IN ('pending', 'running') "
              "AND unique_key IS NOT NULL DO NOTHING RETURNING id")
    assert len(admin.execute(insert).fetchall()) == 1
    assert admin.execute(insert).fetchall() == []
