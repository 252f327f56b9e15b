"""Scenario 6, reap cost: one ``reap_expired`` sweep and one ``claim`` of 100 with a large
finished history present.

The history (H finished ``done`` jobs) is written straight into the store, the way each store lays
it out, because enqueueing and draining a million jobs would take far longer than the measurement:
PostgreSQL ``INSERT ... SELECT generate_series`` into the bench schema's ``jobs`` (then ``VACUUM
ANALYZE``, as autovacuum would after such an insert, and for a large history a ``CHECKPOINT``: old
history is on disk, not dirty in shared_buffers), SQLite a recursive-CTE insert (then ``ANALYZE``
and a WAL checkpoint), Redis pipelined ``HSET`` + ``ZADD`` following the key layout in
``tether/stores/_redis/store.py``. Each run then adds E fresh running jobs whose leases expired an
hour ago (owner ``bench-ghost``), times one ``reap_expired(limit=max(E, 10000))`` that must take all
E back, and one ``claim`` of 100 (the reaped jobs are due again, so it gets 100).
"""

from __future__ import annotations

import sqlite3
import time

from bench.apps import NOOP, make_app
from bench.common import (
    PG_DSN,
    REDIS_URL,
    Config,
    Figure,
    isolated,
    pg_schema,
    redis_prefix,
    sqlite_path,
)

GHOST = "bench-ghost"


# -- PostgreSQL ---------------------------------------------------------------------------
PG_INSERT = """
INSERT INTO "{schema}".jobs (task, queue, payload, status, priority, run_at, attempt,
    max_attempts, max_stalls, locked_by, lease_until, created_at, started_at, finished_at,
    result)
SELECT %(task)s, 'default', '[[], {{}}]', %(status)s, 0, now() - interval '2 days', 1, 5, 3,
    CASE WHEN %(status)s = 'running' THEN %(owner)s END,
    CASE WHEN %(status)s = 'running' THEN now() - interval '1 hour' + g * interval '1 ms' END,
    now() - interval '2 days', now() - interval '2 days',
    CASE WHEN %(status)s = 'done' THEN now() - interval '1 day' + g * interval '1 ms' END,
    CASE WHEN %(status)s = 'done' THEN 'null' END
FROM generate_series(1, %(n)s) g
"""


def pg_load(url: str, n: int, status: str) -> None:
    import psycopg

    schema = pg_schema(url)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(PG_INSERT.format(schema=schema),
                     {"task": NOOP, "status": status, "owner": GHOST, "n": n})
        if status == "done":
            conn.execute(f'VACUUM ANALYZE "{schema}".jobs')
            # History is old in real life: long since written out. Right after a 200 MB bulk
            # load, shared_buffers is full of dirty pages, and the first sweeps paid for
            # writing them out (measured 760-970 ms instead of 170-230 ms). A small history
            # (the smoke run's) leaves little to write, and a CHECKPOINT of the shared server
            # then mostly writes out other clients' pages: 20+ s on a busy test machine.
            if n > 10_000:
                conn.execute("CHECKPOINT")


# -- SQLite -------------------------------------------------------------------------------
SQLITE_INSERT = """
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n)
INSERT INTO jobs (task, queue, payload, status, priority, run_at, attempt, max_attempts,
    max_stalls, locked_by, lease_until, created_at, started_at, finished_at, result)
SELECT :task, 'default', '[[], {}]', :status, 0, :now - 172800, 1, 5, 3,
    CASE WHEN :status = 'running' THEN :owner END,
    CASE WHEN :status = 'running' THEN :now - 3600 + i / 1000.0 END,
    :now - 172800, :now - 172800,
    CASE WHEN :status = 'done' THEN :now - 86400 + i / 1000.0 END,
    CASE WHEN :status = 'done' THEN 'null' END
FROM g
"""


def sqlite_load(url: str, n: int, status: str) -> None:
    conn = sqlite3.connect(sqlite_path(url), timeout=30.0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(SQLITE_INSERT, {"n": n, "task": NOOP, "status": status, "owner": GHOST,
                                     "now": time.time()})
        conn.execute("COMMIT")
        if status == "done":
            conn.execute("ANALYZE")
            # As on PostgreSQL: old history is in the database file, not in a WAL that the
            # first sweep's COMMIT would have to checkpoint (1M rows: ~100 MB of WAL).
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


# -- Redis --------------------------------------------------------------------------------
def redis_load(url: str, n: int, status: str) -> None:
    import redis

    p = redis_prefix(url)
    client = redis.Redis.from_url(REDIS_URL)
    try:
        (now_s, now_us) = client.time()
        now = now_s + now_us / 1e6
        last = int(client.incrby(f"{p}:ids", n))
        first = last - n + 1
        client.sadd(f"{p}:queues", "default")
        base = {"task": NOOP, "queue": "default", "payload": "[[], {}]", "status": status,
                "priority": "0", "run_at": repr(now - 172800), "attempt": "1",
                "max_attempts": "5", "failures": "0", "stall_count": "0", "max_stalls": "3",
                "interruptions": "0", "created_at": repr(now - 172800),
                "started_at": repr(now - 172800), "cancel_requested": "0", "errors": "[]"}
        step = 2000
        for lo in range(first, last + 1, step):
            ids = range(lo, min(lo + step, last + 1))
            pipe = client.pipeline(transaction=False)
            scores: dict[str, float] = {}
            for i in ids:
                fields = dict(base, id=str(i))
                if status == "done":
                    t = now - 86400 + (i - first) / 1000
                    fields.update(finished_at=repr(t), result="null")
                else:
                    t = now - 3600 + (i - first) / 1000
                    fields.update(locked_by=GHOST, lease_until=repr(t))
                pipe.hset(f"{p}:job:{i}", mapping=fields)  # type: ignore[arg-type]
                scores[str(i)] = t
            pipe.zadd(f"{p}:idx:default:{status}", {str(i): i for i in ids})
            pipe.zadd(f"{p}:finished:done" if status == "done" else f"{p}:running", scores)
            pipe.execute()
    finally:
        client.close()


LOADERS = {"postgres": pg_load, "sqlite": sqlite_load, "redis": redis_load}


def run(kind: str, cfg: Config) -> list[Figure]:
    load = LOADERS[kind]
    h, e = cfg.reap_history, cfg.reap_expired
    sweeps: list[float] = []
    claims: list[float] = []
    with isolated(kind, cfg) as url:
        app = make_app(url)
        try:
            store = app.store
            t0 = time.perf_counter()
            load(url, h, "done")
            load_s = time.perf_counter() - t0
            for _ in range(cfg.runs):
                load(url, e, "running")
                t0 = time.perf_counter()
                reaped = store.reap_expired(0.0, limit=max(e, 10_000))
                sweeps.append(1000 * (time.perf_counter() - t0))
                if len(reaped) != e:
                    raise RuntimeError(f"reap took back {len(reaped)} of {e} expired leases")
                t0 = time.perf_counter()
                claimed = store.claim("bench-claimer", ["default"], cfg.claim_batch, 30.0)
                claims.append(1000 * (time.perf_counter() - t0))
                if len(claimed) != min(cfg.claim_batch, e):
                    raise RuntimeError(f"claim got {len(claimed)} jobs")
        finally:
            app.close()
    history = f"{h:,} finished present"
    sweep = Figure(kind, "reap", f"reap sweep of {e:,} expired leases ({history})", "ms",
                   sweeps, note=f"history loaded in {load_s:.1f} s")
    claim = Figure(kind, "reap", f"claim of {cfg.claim_batch} ({history})", "ms", claims)
    sweep.expect("<", 50.0)
    claim.expect("<", 5.0)
    return [sweep, claim]
