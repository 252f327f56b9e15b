"""The PostgreSQL flow claim's cost with a long backlog behind a key at its limit (issue 19):
its statements seek, they never read the backlog (EXPLAIN (ANALYZE, BUFFERS) of the claim on a
real server, so the number of pages read is what is asserted, not a timing).

The claim is one call of the server function of migration 0007; the buffers EXPLAIN reports
for it are those of every statement the function ran (lock, counts, the first jobs of the
queue, the group walk, heads, grant), so the bound covers the whole claim."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg

from tether.stores import FlowLimit, NewJob
from tether.stores._postgres.flow import lock_key
from tether.stores._postgres.store import PostgresStore

T = "tests.flow"
BACKLOG = 5_000


def _claim_buffers(conn: psycopg.Connection[Any], store: PostgresStore, flow: list[FlowLimit],
                   queue: str, now: float) -> tuple[int, int]:
    """(shared buffers the whole limited claim touched, hit + read; jobs it granted): one
    real claim of 1 job of ``queue``, committed (autocommit)."""
    params = {"key": lock_key(store.schema), "now": now, "queues": [queue], "limit": 1,
              "owner": "w", "ttl": 30.0, "nonce": f"n{now}", "request": None,
              "scope": [f.scope for f in flow], "name": [f.name for f in flow],
              "conc": [f.concurrency for f in flow], "rate": [f.rate for f in flow],
              "per": [f.per for f in flow], "per_key": [f.per_key for f in flow],
              "pre": [f.group(None) for f in flow]}
    row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + store.queries["flow_claim"],
                       params).fetchone()
    assert row is not None
    plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"]), \
        int(plan["Actual Rows"])


def test_a_blocked_key_backlog_costs_seeks_not_a_scan(
    pg_url: str, open_pg: Callable[..., PostgresStore]
) -> None:
    store = open_pg()
    store.migrate()
    store.enqueue([NewJob(T, limit_key="big") for _ in range(BACKLOG)], now=1_000.0)
    store.enqueue([NewJob(T, limit_key=key) for key in ("s1", "s2") for _ in range(5)],
                  now=1_001.0)
    flow = [FlowLimit("task", T, concurrency=1, per_key=True)]
    (first,) = store.claim("w", ["default"], 1, 30.0, now=1_002.0, flow=flow)
    assert first.limit_key == "big"
    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as conn:
        conn.execute(f'ANALYZE "{store.schema}".jobs')
        # The function's statements are planned by their first run on a connection (catalog
        # reads): the same claim once before, so the claim measured is a steady one.
        assert _claim_buffers(conn, store, flow, "default", 1_003.0)[1] == 1
        buffers, granted = _claim_buffers(conn, store, flow, "default", 1_004.0)
    assert granted == 1
    # Measured 31 (35 with a backlog of 20,000): the first 18 jobs of the queue (all
    # the big key's), then a seek per group, and a few pages per index the grant writes.
    # Reading the big key's backlog is ~40 index pages, and a heap visit per row (5,000).
    assert buffers < 60, buffers
    running = store.list_jobs(status="running", queue="default")
    assert [job.limit_key for job in running] == ["big", "s1", "s2"]
