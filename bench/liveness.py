"""What death detection (issue #22) costs: the drain rate beside idle workers, today's tree
against this one, interleaved; and the store load of one death check.

``python -m bench.liveness --base /path/to/base/worktree``

* **drain**: N queued no-op jobs drained by one ``tether worker -c 10`` while K idle workers
  (``-q idle -c 1``: they claim nothing, but each runs its maintainer, so with this tree each
  asks the store every 0.25 s which workers died) run beside it; steady rate = N / (drained -
  drain worker registered). Each (store, K) pair is measured on the base tree and on this
  tree in turn, the order alternating from run to run, on a fresh isolated store each time
  (each tree migrates its own). The drive runs in a subprocess whose ``PYTHONPATH`` is the
  tree's, so base runs use base code end to end.
  PostgreSQL runs on a throwaway server started for the run (``max_connections = 500``): 21
  workers with their pools, listeners and tokens would take the shared server's last
  connections from everyone else.
* **check**: with 20 tokens held and each owner holding a running job, the time of one
  ``dead_owners`` call (three elections asked, as a worker's maintainer does), from this
  process; on Redis also the server's own time for it (INFO commandstats), on PostgreSQL the
  statement's execution time (EXPLAIN ANALYZE). A worker makes 1 / death_check_interval = 4
  checks a second, so the load it adds is 4 x that.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import REDIS_URL, ROOT, delete_redis_prefix, new_tag

#: The PostgreSQL server of this run (set by ``throwaway_pg``).
PG = {"dsn": ""}

#: Run in a subprocess with a tree's PYTHONPATH: load N jobs, start K idle workers and one
#: draining worker, print the steady drain rate as JSON. Uses only what both trees have.
DRIVE = r'''
import json, sys, tempfile
from bench.apps import make_app, NOOP
from bench.procs import WorkerProc, wait_drained, wait_registered

url, n, idle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
app = make_app(url)
app.store.migrate()
task = app.runtime.registry.tasks[NOOP]
last = 0
for start in range(0, n, 10_000):
    last = task.enqueue_many([((), {})] * min(10_000, n - start))[-1]
logs = tempfile.mkdtemp(prefix="tbench-live-")
idlers = [WorkerProc(url, 1, log_dir=logs, extra_args=["-q", "idle"]) for _ in range(idle)]
try:
    wait_registered(app.store, idlers, timeout=180)
    drain = WorkerProc(url, 10, log_dir=logs)
    registered = wait_registered(app.store, [drain], timeout=60)
    done = wait_drained(app.store, last, timeout=300, worker=drain)
    print(json.dumps({"rate": n / max(done - registered, 1e-9)}))
    drain.stop()
finally:
    for w in idlers:
        w.stop()
    app.close()
'''


@contextmanager
def isolated(kind: str) -> Iterator[str]:
    tag = new_tag()
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tbench-live-") as d:
            yield f"sqlite:///{Path(d) / (tag + '.db')}"
    elif kind == "postgres":
        try:
            yield f"{PG['dsn']}?schema={tag}"
        finally:
            import psycopg

            with psycopg.connect(PG["dsn"], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{tag}" CASCADE')
    else:
        try:
            yield f"{REDIS_URL}?prefix={tag}"
        finally:
            delete_redis_prefix(tag)


def drive(tree: Path, kind: str, n: int, idle: int) -> float:
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{tree}")
    with isolated(kind) as url:
        done = subprocess.run([sys.executable, "-c", DRIVE, url, str(n), str(idle)], cwd=tree,
                              env=env, capture_output=True, text=True, timeout=900,
                              check=False)
    if done.returncode != 0:
        raise RuntimeError(f"drive failed on {tree} {kind} idle={idle}:\n{done.stderr[-3000:]}")
    rate: float = json.loads(done.stdout.strip().splitlines()[-1])["rate"]
    return rate


def check_cost(kind: str, calls: int = 200) -> dict[str, float]:
    """Median seconds of one dead_owners call with 20 live tokens, each holding a job."""
    from tether.stores import NewJob, open_store

    elections = ["maintenance", "maintenance:prune", "maintenance:schedule"]
    with isolated(kind) as url:
        store = open_store(url)
        store.migrate()
        workers = [f"bench:{i}:{uuid.uuid4().hex[:12]}" for i in range(20)]
        try:
            for w in workers:
                assert store.take_liveness(w)
                store.enqueue([NewJob("bench.noop", queue="q")])
                store.claim(w, ["q"], 1, 3600)
            store.leader_acquire("maintenance", workers[0], 3600)
            for _ in range(20):  # warm: connections, prepared statements
                assert store.dead_owners(elections).workers == ()
            server = _server_time(store, kind, calls, elections)
            samples = []
            for _ in range(calls):
                t0 = time.perf_counter()
                store.dead_owners(elections)
                samples.append(time.perf_counter() - t0)
        finally:
            for w in workers:
                store.release_liveness(w)
            store.close()
    return {"client": statistics.median(samples), "server": server}


def _server_time(store: Any, kind: str, calls: int, elections: list[str]) -> float:
    """The server's own time for one check (0 on SQLite: there is no server)."""
    if kind == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)

        def usec() -> float:
            stats = client.info("commandstats")
            return sum(float(v["usec"]) for v in stats.values())

        # Everything the server does in the window (this process is its only busy client).
        before = usec()
        for _ in range(calls):
            store.dead_owners(elections)
        spent = (usec() - before) / 1e6 / calls
        client.close()
        return spent
    if kind == "postgres":
        import psycopg

        text = store.queries["dead_owners"]
        with psycopg.connect(PG["dsn"], autocommit=True) as conn:
            times = []
            for _ in range(50):
                rows = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text,
                                    {"elections": elections}).fetchone()
                assert rows is not None
                times.append(float(rows[0][0]["Execution Time"]) / 1e3)
        return statistics.median(times)
    return 0.0


@contextmanager
def throwaway_pg() -> Iterator[str]:
    """A PostgreSQL server of our own on a free port (tests/throwaway's, with room for many
    workers' connections); stopped, by its pid, at the end."""
    from tests.ports import free_port
    from tests.throwaway.postgres import BIN, USER, Cluster, _own, _run

    with tempfile.TemporaryDirectory(prefix="tbench-pg-") as d:
        root = Path(d)
        _own(root)
        data = root / "data"
        _run(str(BIN / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8")
        with open(data / "postgresql.conf", "a") as conf:
            conf.write("max_connections = 500\n")
        cluster = Cluster(data, free_port())
        cluster.start()
        try:
            yield cluster.url()
        finally:
            if cluster.proc is not None:
                cluster.proc.terminate()
                cluster.proc.wait(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.liveness", description=__doc__)
    parser.add_argument("--base", required=True, type=Path, help="a worktree of the base tree")
    parser.add_argument("--stores", default="sqlite,postgres,redis")
    parser.add_argument("--idle", default="1,20")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "liveness.json")
    args = parser.parse_args(argv)
    stores = args.stores.split(",")
    idles = [int(x) for x in args.idle.split(",")]
    trees = {"base": args.base.resolve(), "live": ROOT}
    with throwaway_pg() as pg:
        PG["dsn"] = pg
        return _measure(args, stores, idles, trees)


def _measure(args: argparse.Namespace, stores: list[str], idles: list[int],
             trees: dict[str, Path]) -> int:
    rates: dict[str, list[float]] = {}
    for run in range(args.runs):
        for kind in stores:
            for idle in idles:
                order = ["base", "live"] if run % 2 == 0 else ["live", "base"]
                for name in order:
                    rate = drive(trees[name], kind, args.jobs, idle)
                    rates.setdefault(f"{kind} idle={idle} {name}", []).append(rate)
                    print(f"run {run} {kind} idle={idle} {name}: {rate:,.0f} jobs/s", flush=True)
    checks = {kind: check_cost(kind) for kind in stores}
    report = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "load": os.getloadavg(), "jobs": args.jobs, "runs": args.runs,
              "rates": rates, "checks": checks}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print("\n| store | idle workers | base jobs/s (median) | live jobs/s (median) | live / base |")
    print("|---|---|---|---|---|")
    for kind in stores:
        for idle in idles:
            base = statistics.median(rates[f"{kind} idle={idle} base"])
            live = statistics.median(rates[f"{kind} idle={idle} live"])
            print(f"| {kind} | {idle} | {base:,.0f} | {live:,.0f} | {live / base:.2f} |")
    print("\n| store | one check, client (ms) | one check, server (ms) | per worker (4 checks/s) |")
    print("|---|---|---|---|")
    for kind, c in checks.items():
        own = c["server"] or c["client"]
        print(f"| {kind} | {c['client'] * 1e3:.3f} | {c['server'] * 1e3:.3f} | "
              f"{4 * own * 1e3:.2f} ms of store time per second |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
