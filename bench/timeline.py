"""One large drain, part by part: does anything slow down as the queue is worked off?

``python -m bench.timeline --store postgres|redis|sqlite [--jobs 1000000] [--parts 10] [-c 10]``

Why: issue #23's "1,000,000 queued keeps >= 90 % of the 10,000 rate" compares two whole
drains, and one slow run says nothing about its cause. Here one worker drains N queued no-op
jobs (the drain scenario's protocol, bench/scenarios/drain.py) and the drain is cut into
``--parts`` equal parts of the id range: the part ends when its last id is done (jobs are
claimed in id order, so this is the cheap point lookup the drain scenario polls too). Per part:
the rate, the worker's CPU per job (its process tree, /proc) and the server's (every
``postgres`` / ``redis-server`` process on the machine, /proc: run it on a quiet machine), and
what the store says of itself:

* Redis: the server time per job spent in scripts (``INFO commandstats``, EVALSHA) and memory;
* PostgreSQL: the ``jobs`` table's dead row versions, its vacuums (tether's housekeeping and
  autovacuum), its size, checkpoints and buffer reads against hits.

A cost that grows with the queue shows as a part-by-part trend; a flat timeline means the
size is not the cause.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from typing import Any

import psycopg
import redis

from bench.apps import make_app
from bench.common import PG_DSN, REDIS_URL, Config, isolated, pg_schema
from bench.procs import WorkerProc, wait_registered
from bench.scenarios.drain import load

#: The server processes whose CPU counts as the store's (none: SQLite runs in the worker).
SERVER_PROCESS = {"postgres": "postgres", "redis": "redis-server"}


def server_cpu(kind: str) -> float:
    """User + system seconds of every process of the store's server on this machine."""
    name = SERVER_PROCESS.get(kind)
    if name is None:
        return 0.0
    pids = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True,
                          check=False).stdout.split()
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a backend that ended in between
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def store_stats(kind: str, url: str) -> dict[str, Any]:
    """What the store says of itself now (counters: the caller takes differences)."""
    if kind == "redis":
        r = redis.Redis.from_url(REDIS_URL)
        try:
            ev = r.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
            return {"evalsha_usec": ev["usec"], "memory": r.info("memory")["used_memory"]}
        finally:
            r.close()
    if kind == "postgres":
        with psycopg.connect(PG_DSN, autocommit=True) as c:
            bg = c.execute("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
                           ).fetchone()
            row = c.execute(
                "SELECT n_dead_tup, vacuum_count + autovacuum_count, "
                "pg_total_relation_size(relid) FROM pg_stat_user_tables "
                "WHERE schemaname = %s AND relname = 'jobs'", (pg_schema(url),)).fetchone()
            io = c.execute(
                "SELECT coalesce(sum(heap_blks_read + idx_blks_read), 0), "
                "coalesce(sum(heap_blks_hit + idx_blks_hit), 0) FROM pg_statio_user_tables "
                "WHERE schemaname = %s", (pg_schema(url),)).fetchone()
        assert bg is not None and row is not None and io is not None
        return {"checkpoints": bg[0], "dead": row[0], "vacuums": row[1], "size": row[2],
                "read": int(io[0]), "hit": int(io[1])}
    return {}


def describe(kind: str, before: dict[str, Any], after: dict[str, Any], jobs: int) -> str:
    """The store's part of one line: per-job server time, or table and buffer figures."""
    if kind == "redis":
        return (f"EVALSHA {(after['evalsha_usec'] - before['evalsha_usec']) / jobs:5.1f} us/job"
                f", memory {after['memory'] / 2**20:,.0f} MiB")
    if kind == "postgres":
        return (f"dead {after['dead']:>7,}, vacuums +{after['vacuums'] - before['vacuums']}, "
                f"checkpoints +{after['checkpoints'] - before['checkpoints']}, "
                f"jobs {after['size'] / 2**20:,.0f} MiB, blocks read "
                f"+{after['read'] - before['read']:,} / hit +{after['hit'] - before['hit']:,}")
    return ""


def run(kind: str, jobs: int, parts: int, concurrency: int) -> list[float]:
    """Drain ``jobs`` on a fresh store, print one line per part; returns the parts' rates."""
    cfg = Config()
    rates: list[float] = []
    with isolated(kind, cfg) as url:
        t0 = time.time()
        last = load(url, jobs)
        print(f"{kind}: {jobs:,} jobs loaded in {time.time() - t0:.1f} s", flush=True)
        first = last - jobs + 1
        app = make_app(url)
        worker: WorkerProc | None = None
        try:
            worker = WorkerProc(url, concurrency, log_dir=cfg.workdir or "/tmp")
            start = wait_registered(app.store, [worker])
            prev = (start, worker.tree_cpu_seconds(), server_cpu(kind), store_stats(kind, url))
            for k in range(1, parts + 1):
                mark = first + jobs * k // parts - 1
                while True:
                    job = app.store.get_job(mark)
                    if job is not None and job.status in ("done", "failed", "cancelled"):
                        break
                    if not worker.alive():
                        raise RuntimeError(f"worker died:\n{worker.log_tail()}")
                    time.sleep(0.01)
                now = (time.time(), worker.tree_cpu_seconds(), server_cpu(kind),
                       store_stats(kind, url))
                n = jobs // parts
                rates.append(n / (now[0] - prev[0]))
                print(f"part {k:2}: {rates[-1]:8,.0f} jobs/s, worker "
                      f"{1e6 * (now[1] - prev[1]) / n:5.1f} us/job, server "
                      f"{1e6 * (now[2] - prev[2]) / n:5.1f} us/job; "
                      f"{describe(kind, prev[3], now[3], n)}", flush=True)
                prev = now
            print(f"{kind}: {jobs / (prev[0] - start):,.0f} jobs/s over the whole drain",
                  flush=True)
        finally:
            if worker is not None:
                worker.stop()
            app.close()
    return rates


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.timeline",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--store", choices=("sqlite", "postgres", "redis"), required=True)
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--parts", type=int, default=10)
    p.add_argument("-c", "--concurrency", type=int, default=10)
    args = p.parse_args(argv)
    run(args.store, args.jobs, args.parts, args.concurrency)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
