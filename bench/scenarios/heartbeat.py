"""Scenario 5, heartbeat cost: statements spent renewing leases, by number in flight.

For each size N (e.g. 10 and 1,000): N sleeping jobs, one instrumented worker
(``bench.hbworker``: the real Worker with concurrency N and counters on its heartbeat thread),
a short ``lease_ttl`` so the interval (lease_ttl / 3) is about a second. Each measuring window
is one run. Reported per N: ``Store.heartbeat`` calls per interval, driver statements per
heartbeat call, heartbeat statements per second; on PostgreSQL also a server-side cross-check,
the ``pg_stat_user_tables.n_tup_upd`` rate of the bench schema's ``workers`` table (every
heartbeat touches its worker row once; PostgreSQL flushes these counters up to ~1 s late).

Claim verified: one statement per worker per interval, whatever the number in flight.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bench.apps import SLEEP, make_app
from bench.common import PG_DSN, Config, Figure, isolated, pg_schema
from bench.procs import WorkerProc


def _pg_worker_updates(schema: str) -> int:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(n_tup_upd, 0) FROM pg_stat_user_tables "
            "WHERE schemaname = %s AND relname = 'workers'", (schema,)).fetchone()
    return int(row[0]) if row else 0


def measure(kind: str, cfg: Config, inflight: int) -> tuple[list[dict[str, Any]], float | None]:
    """Window records from the child (each with >= 2 heartbeat calls), and on PostgreSQL
    the server-side workers-row update rate."""
    with isolated(kind, cfg) as url:
        app = make_app(url)
        child: WorkerProc | None = None
        try:
            app.runtime.registry.tasks[SLEEP].enqueue_many([((3600.0,), {})] * inflight)
            child = WorkerProc(
                url, inflight, log_dir=cfg.workdir, lease_ttl=cfg.hb_lease_ttl,
                module=["-m", "bench.hbworker", str(inflight), repr(cfg.hb_window),
                        str(cfg.runs)])
            assert child.proc.stdout is not None
            windows: list[dict[str, Any]] = []
            server: float | None = None
            mark: tuple[int, float] | None = None
            for line in child.proc.stdout:
                rec = json.loads(line)
                if "error" in rec:
                    raise RuntimeError(f"{rec['error']}\n{child.log_tail()}")
                if rec["mean_gap"] is None:
                    raise RuntimeError("fewer than 2 heartbeats in a window: make hb_window "
                                       "longer than 2 intervals (lease_ttl / 3)")
                windows.append(rec)
                if kind == "postgres":
                    now = (_pg_worker_updates(pg_schema(url)), time.monotonic())
                    if mark is not None:
                        server = (now[0] - mark[0]) / (now[1] - mark[1])
                    mark = now
            if len(windows) < cfg.runs:
                raise RuntimeError(f"heartbeat worker stopped early:\n{child.log_tail()}")
            return windows, server
        finally:
            if child is not None:
                child.kill()
            app.close()


def run(kind: str, cfg: Config) -> list[Figure]:
    figs: list[Figure] = []
    per_beat: dict[int, float] = {}
    per_interval: dict[int, Figure] = {}
    for n in cfg.hb_inflight:
        windows, server = measure(kind, cfg, n)
        interval = windows[0]["interval"]
        calls = Figure(kind, "heartbeat", f"heartbeat calls per interval ({n:,} in flight)",
                       "calls", [interval / w["mean_gap"] for w in windows],
                       note=f"interval {interval:g} s (lease_ttl {cfg.hb_lease_ttl:g} s / 3); "
                       "interval / mean gap between calls")
        stmts = Figure(kind, "heartbeat", f"driver statements per heartbeat ({n:,} in flight)",
                       "stmts", [w["statements"] / max(w["calls"], 1) for w in windows],
                       note="SQLite counts BEGIN/COMMIT too" if kind == "sqlite" else "")
        rate = Figure(kind, "heartbeat", f"heartbeat statements/s ({n:,} in flight)",
                      "stmts/s", [w["statements"] / w["calls"] / w["mean_gap"]
                                  for w in windows])
        figs += [calls, stmts, rate]
        if server is not None:
            figs.append(Figure(kind, "heartbeat",
                               f"server: workers-row updates/s ({n:,} in flight)", "upd/s",
                               [server], note="pg_stat_user_tables cross-check, approximate",
                               sample_kind="whole measurement"))
        per_beat[n] = stmts.median
        per_interval[n] = calls
    largest = max(cfg.hb_inflight)
    top = per_interval[largest]
    same = len({round(v, 2) for v in per_beat.values()}) == 1
    top.target = "1 call per worker per interval, same statements at every in-flight size"
    top.met = 0.85 <= top.median <= 1.15 and same
    if not same:
        top.note += "; statements per beat differ by in-flight size: " + ", ".join(
            f"{k}: {v:.2f}" for k, v in per_beat.items())
    return figs
