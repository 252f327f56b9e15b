"""Scenario 1, enqueue: N jobs one by one (``task.enqueue``) and as one ``enqueue_many``.

On PostgreSQL also the reference: one bare ``INSERT ... RETURNING id`` round trip with psycopg;
tether's single enqueue should cost at most 1.5x that.
"""

from __future__ import annotations

import time

from bench import baseline
from bench.apps import NOOP, make_app
from bench.common import Config, Figure, isolated, pg_schema


def run(kind: str, cfg: Config) -> list[Figure]:
    n = cfg.enqueue_jobs
    single: list[float] = []
    many: list[float] = []
    insert_s: list[float] = []
    for _ in range(cfg.runs):
        with isolated(kind, cfg) as url:
            app = make_app(url)
            try:
                task = app.tasks[NOOP]
                for _ in range(min(50, n)):  # warm: connection, pool, prepared statements
                    task.enqueue()
                t0 = time.perf_counter()
                for _ in range(n):
                    task.enqueue()
                single.append(n / (time.perf_counter() - t0))
                calls: list[tuple[tuple[()], dict[str, object]]] = [((), {})] * n
                t0 = time.perf_counter()
                ids = task.enqueue_many(calls)
                many.append(n / (time.perf_counter() - t0))
                assert len(ids) == n
                if kind == "postgres":
                    insert_s.append(baseline.insert_round_trip(pg_schema(url), n))
            finally:
                app.close()
    figs = [
        Figure(kind, "enqueue", f"enqueue one by one ({n:,})", "jobs/s", single),
        Figure(kind, "enqueue", f"enqueue_many ({n:,} in one call)", "jobs/s", many),
    ]
    if kind == "postgres":
        figs[1].expect(">=", 30_000)
        ref = Figure(kind, "enqueue", "bare INSERT ... RETURNING id round trip", "ms",
                     [s * 1000 for s in insert_s], note="psycopg alone, autocommit")
        per_enqueue = Figure(kind, "enqueue", "single enqueue cost", "ms",
                             [1000 / r for r in single])
        ratio = per_enqueue.median / ref.median
        per_enqueue.expect("<=", 1.5 * ref.median,
                           text=f"<= 1.5x INSERT round trip ({1.5 * ref.median:.3f} ms)")
        per_enqueue.note = f"{ratio:.2f}x the bare INSERT round trip"
        figs += [per_enqueue, ref]
    return figs
