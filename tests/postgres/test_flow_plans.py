"""The PostgreSQL flow claim's cost with a long backlog behind a key at its limit (issue 19):
its statements seek, they never read the backlog (EXPLAIN (ANALYZE, BUFFERS) on a real
server, so the number of index pages read is what is asserted, not a timing)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg

from tether.stores import FlowLimit, NewJob
from tether.stores._postgres.store import PostgresStore

T = "tests.flow"
BACKLOG = 5_000


def _buffers(conn: psycopg.Connection[Any], text: str, params: dict[str, Any]) -> int:
    """Shared buffers the whole statement touched (hit + read)."""
    row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text, params).fetchone()
    assert row is not None
    plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


def test_a_blocked_key_backlog_costs_seeks_not_a_scan(
    pg_url: str, open_pg: Callable[..., PostgresStore]
) -> None:
    store = open_pg()
    store.migrate()
    store.enqueue([NewJob(T, limit_key="big") for _ in range(BACKLOG)], now=1_000.0)
    store.enqueue([NewJob(T, limit_key="small") for _ in range(10)], now=1_001.0)
    flow = [FlowLimit("task", T, concurrency=1, per_key=True)]
    (first,) = store.claim("w", ["default"], 1, 30.0, now=1_002.0, flow=flow)
    assert first.limit_key == "big"
    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as conn:
        conn.execute(f'ANALYZE "{store.schema}".jobs')
        groups = _buffers(conn, store.queries["flow_groups"], {"queues": ["default"]})
        heads = _buffers(conn, store.queries["flow_heads"], {
            "now": 1_003.0, "queues": ["default"], "tasks": [T], "fkeys": ["=small"],
            "caps": [1]})
    # A few index pages per group; reading the big key's backlog is ~40 pages a step.
    assert groups < 25, groups
    assert heads < 10, heads
    (second,) = store.claim("w", ["default"], 10, 30.0, now=1_003.0, flow=flow)
    assert second.limit_key == "small"
