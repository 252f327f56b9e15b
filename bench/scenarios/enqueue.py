"""Scenario 1, enqueue: N jobs one by one (``task.enqueue``) and as one ``enqueue_many``.

On PostgreSQL also the reference: one bare ``INSERT ... RETURNING id`` round trip with psycopg;
tether's single enqueue should cost at most 1.5x that. The two are measured *interleaved*:
blocks of tether enqueues alternate with blocks of bare INSERTs on their own connection, and
each run's ratio is the median tether block over the median bare block of that run. On a
machine shared with other work, figures taken a minute apart differ by 2x (issue #10 saw the
same code at 1.4x and 2.2x), so only a ratio measured under the same load means anything.
The bare INSERT is also run into tether's own ``jobs`` table (same row shape and indexes), to
tell what the table costs from what tether's statement and Python add.

tether's enqueue skips its NOTIFY while no worker waits idle (a waiting worker's listener holds
the store's "jobs key", see producers.sql), as here, where no worker runs. So a third variant,
``waited``, runs tether's enqueue while a connection holds that key as an idle worker does:
the cost of the enqueue that wakes a worker.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import psycopg

from bench import baseline
from bench.apps import NOOP, make_app
from bench.common import PG_DSN, Config, Figure, isolated, pg_schema

#: Operations per interleaved block.
BLOCK = 200


def _blocks(fns: dict[str, Callable[[], object]], n: int,
            around: dict[str, tuple[Callable[[], object], Callable[[], object]]] | None = None
            ) -> dict[str, list[float]]:
    """Seconds per operation of each block, the variants run round robin, n ops each;
    ``around[name]`` runs (before, after) each of that variant's blocks, outside its timing."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    around = around or {}
    done = 0
    while done < n:
        size = min(BLOCK, n - done)
        for name, fn in fns.items():
            before, after = around.get(name, (_nothing, _nothing))
            before()
            t0 = time.perf_counter()
            for _ in range(size):
                fn()
            out[name].append((time.perf_counter() - t0) / size)
            after()
        done += size
    return out


def _nothing() -> None:
    return None


def _insert(conn: psycopg.Connection[object], sql: str) -> Callable[[], object]:
    return lambda: conn.execute(sql, (NOOP, "[[], {}]")).fetchone()


def run(kind: str, cfg: Config) -> list[Figure]:
    n = cfg.enqueue_jobs
    single: list[float] = []
    many: list[float] = []
    insert_s: list[float] = []
    same_s: list[float] = []
    ratios: list[float] = []
    waited_s: list[float] = []
    waited_ratios: list[float] = []
    for _ in range(cfg.runs):
        with isolated(kind, cfg) as url:
            app = make_app(url)
            bare: psycopg.Connection[object] | None = None
            holder: psycopg.Connection[object] | None = None
            try:
                task = app.runtime.registry.tasks[NOOP]
                fns: dict[str, Callable[[], object]] = {"tether": task.enqueue}
                around: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
                if kind == "postgres":
                    schema = pg_schema(url)
                    bare = psycopg.connect(PG_DSN, autocommit=True)
                    baseline.create_table(bare, schema)
                    slim = (f'INSERT INTO "{schema}".bare_jobs (task, payload) '
                            "VALUES (%s, %s) RETURNING id")
                    same = (f'INSERT INTO "{schema}".jobs (task, payload, queue, priority, '
                            "run_at, max_attempts, max_stalls, created_at) VALUES (%s, %s, "
                            "'default', 0, statement_timestamp(), 5, 3, statement_timestamp()) "
                            "RETURNING id")
                    fns["bare"] = _insert(bare, slim)
                    fns["same"] = _insert(bare, same)
                    fns["waited"] = task.enqueue
                    holder = psycopg.connect(PG_DSN, autocommit=True)
                    holder.execute(f'LISTEN "{schema}_jobs"')  # the NOTIFYs signal someone
                    key = app.store._connector.jobs_key  # type: ignore[attr-defined]
                    around["waited"] = (  # what an idle worker's listener holds while it waits
                        lambda h=holder, k=key: h.execute(
                            "SELECT pg_advisory_lock_shared(%s)", (k,)),
                        lambda h=holder, k=key: h.execute(
                            "SELECT pg_advisory_unlock_shared(%s)", (k,)))
                for fn in fns.values():  # warm: connections, pool, prepared statements
                    for _ in range(min(50, n)):
                        fn()
                blocks = _blocks(fns, n, around)
                single.append(1 / statistics.median(blocks["tether"]))
                if bare is not None:
                    insert_s.append(statistics.median(blocks["bare"]))
                    same_s.append(statistics.median(blocks["same"]))
                    ratios.append(statistics.median(blocks["tether"]) / insert_s[-1])
                    waited_s.append(statistics.median(blocks["waited"]))
                    waited_ratios.append(waited_s[-1] / insert_s[-1])
                calls: list[tuple[tuple[()], dict[str, object]]] = [((), {})] * n
                t0 = time.perf_counter()
                ids = task.enqueue_many(calls)
                many.append(n / (time.perf_counter() - t0))
                assert len(ids) == n
            finally:
                if bare is not None:
                    bare.close()
                if holder is not None:
                    holder.close()
                app.close()
    figs = [
        Figure(kind, "enqueue", f"enqueue one by one ({n:,})", "jobs/s", single,
               note=f"median of {BLOCK}-job blocks"),
        Figure(kind, "enqueue", f"enqueue_many ({n:,} in one call)", "jobs/s", many),
    ]
    if kind == "postgres":
        figs[1].expect(">=", 30_000)
        ref = Figure(kind, "enqueue", "bare INSERT ... RETURNING id round trip", "ms",
                     [s * 1000 for s in insert_s],
                     note="psycopg alone, autocommit, interleaved with tether's enqueues")
        same_ref = Figure(kind, "enqueue", "bare INSERT into tether's jobs table", "ms",
                          [s * 1000 for s in same_s],
                          note="same row shape and indexes as tether's, interleaved")
        per_enqueue = Figure(kind, "enqueue", "single enqueue cost", "ms",
                             [1000 / r for r in single])
        ratio = Figure(kind, "enqueue", "single enqueue / bare INSERT (same run)", "x", ratios,
                       note="ratio of the interleaved blocks' medians, per run")
        # The target sits on "single enqueue cost" (the figure bench/report.py's TARGETS names)
        # but is judged on the per-run ratio: the median of each run's interleaved ratio.
        per_enqueue.expect("<=", 1.5, value=ratio.median,
                           text="<= 1.5x the bare INSERT round trip in the same run")
        per_enqueue.note = f"{ratio.median:.2f}x the bare INSERT round trip in the same run"
        waited = Figure(kind, "enqueue", "single enqueue while a worker waits (NOTIFY sent)",
                        "ms", [s * 1000 for s in waited_s],
                        note=f"{statistics.median(waited_ratios):.2f}x the bare INSERT in the "
                             "same run; an idle worker's listener holds the jobs key")
        figs += [per_enqueue, ref, same_ref, ratio, waited]
    return figs
