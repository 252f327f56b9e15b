"""Pick-up and ``wait()`` latency behind PgBouncer (issue 18, A; figures in docs/deploying.md).

    python -m bench.pgbouncer [--jobs 20] [--gap 0.3]

For each set-up (no pooler; PgBouncer ``pool_mode = session``; ``pool_mode = transaction``
with ``pooler=transaction&direct=``; the same without ``direct=``, i.e. polling) one idle
``tether worker -c 1`` (default settings: ``poll_interval`` 1 s) and a producer that enqueues
one ``bench.record`` job every ``gap`` seconds and waits for it with ``wait_for_finish``:

* pick-up = the handler's ``time.time()`` at entry minus the producer's just before enqueue;
* wait = the producer's ``time.time()`` when ``wait_for_finish`` returned minus the handler's
  entry (the handler returns at once, so this is finish plus the wake-up of the waiter).

Prints the median and max of each, in milliseconds. Starts a throwaway PgBouncer on a free
loopback port in front of the shared test server (tests/throwaway/pgbouncer.py), needs root
or the postgres user, and uses its own schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.apps import RECORD, make_app
from bench.common import drop_pg_schema, new_tag
from bench.procs import RecordFile, WorkerProc, wait_registered
from tests.servers import PG_DSN
from tests.throwaway.pgbouncer import pgbouncer


@contextmanager
def _setup(name: str, schema: str) -> Iterator[str]:
    base = f"{PG_DSN}?schema={schema}"
    if name == "none":
        yield base
        return
    mode = "session" if name == "session" else "transaction"
    # Session pooling pins one server connection per client connection for its life: every
    # connection of the producer and the worker (pools and listeners) needs its own.
    with pgbouncer(mode, pool_size=40 if mode == "session" else 4) as bouncer:
        url = bouncer.url(base)
        if name == "transaction+direct":
            url += "&pooler=transaction&direct=127.0.0.1:5432"
        elif name == "transaction":
            url += "&pooler=transaction"
        yield url


def measure(name: str, jobs: int, gap: float, workdir: str) -> tuple[list[float], list[float]]:
    schema = new_tag()
    try:
        with _setup(name, schema) as url:
            record = os.path.join(workdir, f"pgb-{time.time_ns()}.rec")
            records = RecordFile(record)
            app = make_app(url)
            worker: WorkerProc | None = None
            try:
                app.store.migrate()
                worker = WorkerProc(url, 1, log_dir=workdir, record=record)
                wait_registered(app.store, [worker])
                task = app.runtime.registry.tasks[RECORD]
                app.store.wait_for_finish([int(task.enqueue(0.0))], 30.0)  # warm up
                records.wait_for(lambda r: True, 30.0)
                records.records.clear()
                waits: list[float] = []
                returned: list[float] = []
                for _ in range(jobs):
                    time.sleep(gap)  # the worker is idle again, in its wait
                    job_id = int(task.enqueue(time.time()))
                    finished = app.store.wait_for_finish([job_id], 30.0)
                    assert finished, (app.store.get_job(job_id), worker.log_tail())
                    returned.append(time.time())
                records.wait_for(lambda r: len(records.records) >= jobs, 30.0)
                picks = [r.started - r.sent for r in records.records]
                waits = [done - r.started for done, r in zip(returned, records.records,
                                                             strict=True)]
                return picks, waits
            finally:
                if worker is not None:
                    worker.stop()
                app.close()
                if os.path.exists(record):
                    os.unlink(record)
    finally:
        drop_pg_schema(schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.3)
    parser.add_argument("--setups", default="none,session,transaction+direct,transaction")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tbench-pgb-") as workdir:
        print(f"{'set-up':22} {'pick-up p50':>12} {'max':>8} {'wait p50':>10} {'max':>8}  (ms)")
        for name in args.setups.split(","):
            picks, waits = measure(name, args.jobs, args.gap, workdir)
            print(f"{name:22} {1000 * statistics.median(picks):12.1f} "
                  f"{1000 * max(picks):8.1f} {1000 * statistics.median(waits):10.1f} "
                  f"{1000 * max(waits):8.1f}", flush=True)


if __name__ == "__main__":
    main()
