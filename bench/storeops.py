"""``python -m bench.storeops``: interleaved microbenchmarks of single store operations (#10).

Machine load moves by 2-3x within seconds on a shared box, so comparing two figures taken a
minute apart says little. Every variant here runs in short blocks, round robin, in one
process, and each reports the median of its blocks' per-operation times: the ratios are
measured under the same load.

    python -m bench.storeops enqueue [--rounds 15 --block 200]
    python -m bench.storeops hot --store sqlite|postgres|redis [--rounds 15 --block 20]

``enqueue`` compares, on one PostgreSQL schema: a bare psycopg ``INSERT ... RETURNING id``
into tether's own ``jobs`` table (same table shape, same indexes), the bench's slim reference
table, ``store.enqueue`` of one job with and without a request id, and ``task.enqueue``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from bench.apps import NOOP, make_app
from bench.baseline import create_table
from bench.common import PG_DSN, REDIS_URL
from tether.stores import NewJob, Outcome
from tether.stores._replay import new_request_id


def backend_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the given local server processes have used so far: what a
    statement costs the server, which load on a shared machine disturbs far less than the
    wall time. 0.0 where /proc is not readable (a remote server)."""
    ns = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat") as f:  # on-CPU nanoseconds, no tick rounding
                ns += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return ns / 1e9


def interleave(variants: dict[str, Callable[[], object]], rounds: int, block: int,
               pids: Callable[[], list[int]] = list, warm: int = 50
               ) -> dict[str, dict[str, list[float]]]:
    """Per-operation wall seconds, client CPU seconds and server CPU seconds (``pids``: the
    server processes serving the variants) of each block of each variant, run round robin."""
    times: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "client": [], "server": []} for name in variants}
    for fn in variants.values():  # warm: connections, prepared statements
        for _ in range(warm):
            fn()
    for _ in range(rounds):
        for name, fn in variants.items():
            backends = pids()
            s0, c0, t0 = backend_cpu(backends), time.process_time(), time.perf_counter()
            for _ in range(block):
                fn()
            t1, c1, s1 = time.perf_counter(), time.process_time(), backend_cpu(backends)
            times[name]["wall"].append((t1 - t0) / block)
            times[name]["client"].append((c1 - c0) / block)
            times[name]["server"].append((s1 - s0) / block)
    return times


def pg_backends(*conns: psycopg.Connection[object]) -> list[int]:
    return [c.info.backend_pid for c in conns if not c.closed]


def show(times: dict[str, dict[str, list[float]]], ref: str) -> None:
    """One line per variant: medians in ms and the wall-time ratio to ``ref``."""
    base = statistics.median(times[ref]["wall"])
    print(f"  {'':38s} {'wall ms':>8s} {'ratio':>6s} {'client':>7s} {'server':>7s}")
    for name, t in times.items():
        wall = statistics.median(t["wall"])
        print(f"  {name:38s} {wall * 1e3:8.3f} {wall / base:5.2f}x "
              f"{statistics.median(t['client']) * 1e3:7.3f} "
              f"{statistics.median(t['server']) * 1e3:7.3f}")


def app_backends(conn: psycopg.Connection[object], *names: str) -> list[int]:
    """Server pids of the connections opened under the given application names."""
    rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = ANY(%s)",
                        (list(names),)).fetchall()
    return [int(r[0]) for r in rows]


def enqueue(rounds: int, block: int) -> None:
    schema = f"bench_ops_{uuid.uuid4().hex[:10]}"
    url = f"{PG_DSN}?schema={schema}"
    app = make_app(url)
    app.store.migrate()
    conn = psycopg.connect(PG_DSN, autocommit=True)
    try:
        create_table(conn, schema)
        task = app.runtime.registry.tasks[NOOP]
        store = app.store
        job = task.new_job((), {})
        same = (f'INSERT INTO "{schema}".jobs (task, payload, queue, priority, run_at, '
                "max_attempts, max_stalls, created_at) VALUES (%s, %s, %s, 0, "
                "statement_timestamp(), 5, 3, statement_timestamp()) RETURNING id")
        slim = f'INSERT INTO "{schema}".bare_jobs (task, payload) VALUES (%s, %s) RETURNING id'
        variants: dict[str, Callable[[], object]] = {
            "bare INSERT, tether jobs table": lambda: conn.execute(
                same, (NOOP, "[[], {}]", "default")).fetchone(),
            "bare INSERT, slim bench table": lambda: conn.execute(
                slim, (NOOP, "[[], {}]")).fetchone(),
            "store.enqueue, request id": lambda: store.enqueue(
                [job], request_id=new_request_id()),
            "store.enqueue, no request id": lambda: store.enqueue([job]),
            "task.enqueue()": task.enqueue,
        }
        pids = [conn.info.backend_pid]
        def backends() -> list[int]:
            if len(pids) == 1:
                pids.extend(app_backends(conn, getattr(store, "application_name", "")))
            return pids
        times = interleave(variants, rounds, block, backends)
    finally:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.close()
        app.close()
    print(f"load {os.getloadavg()[0]:.2f}; {rounds} rounds x {block} ops, medians of blocks; "
          "client/server: CPU ms per op")
    show(times, "bare INSERT, slim bench table")


def _hot_cycles(store: Any, rid: bool, cycles: int, batch: int) -> Callable[[], object]:
    """One block: ``cycles`` x (claim ``batch`` with or without a request id, finish them
    done), the way a ``-c 10`` worker talks to its store, plus one empty heartbeat."""
    def block() -> None:
        for _ in range(cycles):
            jobs = store.claim("w1", ["default"], batch, 30.0,
                               request_id=new_request_id() if rid else None)
            if len(jobs) != batch:
                raise RuntimeError("the hot benchmark ran out of pending jobs")
            store.finish([Outcome(j.lease, "done", result="null") for j in jobs])
        store.heartbeat("w1", [], 30.0)
    return block


def hot(kind: str, rounds: int, cycles: int, batch: int = 10) -> None:
    """Per-job cost of claim + finish at ``-c 10`` batch sizes, with and without what replay
    safety writes per claim: SQLite's request row (a claim without request id writes none),
    Redis's reply record (a claim script with the record write removed), PostgreSQL's
    ``jobs_nonce_idx`` (a schema without it). Variants interleaved, as everywhere here."""
    import tempfile

    from tether.stores import open_store
    from tether.stores._redis import calls as redis_calls

    need = 2 * (rounds + 1) * cycles * batch + 100  # SQLite: both variants share one file
    made: list[tuple[Any, str]] = []

    def fresh(tweak: str = "") -> Any:
        tag = uuid.uuid4().hex[:10]
        if kind == "sqlite":
            url = f"sqlite:///{tempfile.mkdtemp(prefix='storeops-')}/hot.db"
        elif kind == "postgres":
            url = f"{PG_DSN}?schema=bench_hot_{tag}"
        else:
            url = f"{REDIS_URL}?prefix=benchhot{tag}"
        if tweak == "no-record":  # the claim script without its request record
            redis_calls.script_text.cache_clear()
            original = redis_calls.queries.read
            redis_calls.queries.read = lambda pkg, name: original(pkg, name).replace(  # type: ignore[assignment]
                "if #ids > 0 then req_put", "if false then req_put")
            try:
                store = open_store(url)
            finally:
                redis_calls.queries.read = original  # type: ignore[assignment]
                redis_calls.script_text.cache_clear()
        else:
            store = open_store(url)
        store.migrate()
        if tweak == "no-nonce-index":
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP INDEX "bench_hot_{tag}".jobs_nonce_idx')
        for _ in range(0, need, 1000):
            store.enqueue([NewJob(NOOP, payload="[[], {}]") for _ in range(1000)])
        made.append((store, tag))
        return store

    if kind == "sqlite":
        a = fresh()
        variants = {"claim with request id (request row)": _hot_cycles(a, True, cycles, batch),
                    "claim without request id (no row)": _hot_cycles(a, False, cycles, batch)}
    elif kind == "redis":
        variants = {"claim script as shipped": _hot_cycles(fresh(), True, cycles, batch),
                    "claim script without the record": _hot_cycles(fresh("no-record"), True,
                                                                   cycles, batch)}
    else:
        variants = {"schema as shipped": _hot_cycles(fresh(), True, cycles, batch),
                    "without jobs_nonce_idx": _hot_cycles(fresh("no-nonce-index"), True,
                                                          cycles, batch)}
    pids: list[int] = []

    def backends() -> list[int]:
        if kind == "postgres" and not pids:
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                pids.extend(app_backends(conn, *(s.application_name for s, _ in made)))
        return pids

    try:
        times = interleave(variants, rounds, 1, backends, warm=1)
    finally:
        for store, tag in made:
            store.close()
            if kind == "postgres":
                with psycopg.connect(PG_DSN, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA "bench_hot_{tag}" CASCADE')
            elif kind == "redis":
                import redis

                client = redis.Redis.from_url(REDIS_URL)
                keys = list(client.scan_iter(f"benchhot{tag}:*", count=1000))
                for i in range(0, len(keys), 500):
                    client.delete(*keys[i:i + 500])
                client.close()
    jobs = cycles * batch
    per_job = {name: {k: [v / jobs for v in vals] for k, vals in t.items()}
               for name, t in times.items()}
    print(f"{kind}: load {os.getloadavg()[0]:.2f}; {rounds} rounds of {cycles} x (claim "
          f"{batch} + finish {batch}); medians per JOB; client/server CPU")
    show(per_job, next(iter(per_job)))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.storeops")
    parser.add_argument("what", choices=["enqueue", "hot"])
    parser.add_argument("--store", choices=["sqlite", "postgres", "redis"], default="postgres")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block", type=int, default=200,
                        help="enqueue: ops per block; hot: claim+finish cycles per block")
    args = parser.parse_args()
    if args.what == "enqueue":
        enqueue(args.rounds, args.block)
    else:
        hot(args.store, args.rounds, args.block)


if __name__ == "__main__":
    main()

__all__ = ["backend_cpu", "interleave", "show"]
