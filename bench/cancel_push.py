"""``python -m bench.cancel_push``: how soon a running handler sees ``app.cancel`` (issue #22).

    python -m bench.cancel_push [--stores sqlite,postgres,redis,memory] [--trials 20]
                                [--heartbeat SECONDS] [--out FILE]

Per store, on a fresh isolated store (bench.common; loopback servers only): one worker (thread
pool, ``-c 1``, tether's default settings unless ``--heartbeat`` sets its interval) runs in
this process on its own App, hence its own store connections; the cancels come from a second
App (other connections: on SQLite another connection's commit, on PostgreSQL a NOTIFY, on
Redis a publish). Each trial enqueues a job whose handler checks ``check_cancelled()`` every
millisecond, waits until it runs, then times ``app.cancel(id)`` to the moment the handler
sees ``JobCancelled``. The figure is p50 / p99 / max of ``--trials`` trials (nearest rank:
with 20 trials p99 is the max). Without the push the wait is the time to the worker's next
heartbeat: uniform over the interval (10 s at the defaults, so a p50 near 5 s); ``--no-push``
measures that baseline (the worker ignores the signals).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tether
from bench.common import STORES, Config, fmt, isolated, new_tag, percentile
from tether._errors import JobCancelled

KINDS = (*STORES, "memory")


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "memory":
        yield f"memory://{new_tag()}"
    else:
        with isolated(kind, Config()) as url:
            yield url


def measure(kind: str, trials: int, heartbeat: float | None, push: bool = True) -> list[float]:
    """Seconds from calling ``cancel`` to the handler seeing it, one per trial."""
    settings: dict[str, Any] = {}
    if heartbeat is not None:
        settings = {"heartbeat_interval": heartbeat, "lease_ttl": max(30.0, 3 * heartbeat)}
    with store_url(kind) as url:
        app = tether.App(url, **settings)
        client = tether.App(url)
        started = threading.Event()
        seen: dict[int, float] = {}

        @app.task(name="bench.cancel_push.spin")
        def spin() -> None:
            job = tether.current_job()
            started.set()
            try:
                while True:
                    job.check_cancelled()
                    time.sleep(0.001)
            except JobCancelled:
                seen[job.id] = time.perf_counter()
                raise

        worker = app.worker(concurrency=1)
        if not push:  # the baseline: signals received and ignored, the heartbeat decides
            worker.wait_for_store(install_signals=False)
            worker.signals.on_signal = lambda: None
        runner = threading.Thread(target=lambda: worker.run(install_signals=False),
                                  daemon=True)
        runner.start()
        out: list[float] = []
        try:
            for _ in range(trials):
                started.clear()
                job_id = client.enqueue("bench.cancel_push.spin")
                if not started.wait(30):
                    raise RuntimeError("the job did not start")
                sent = time.perf_counter()
                client.cancel(job_id)
                deadline = time.monotonic() + 60
                while job_id not in seen:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cancel was never seen")
                    time.sleep(0.0005)
                out.append(seen[job_id] - sent)
                while client.get_job(job_id).status == "running":  # its slot frees
                    time.sleep(0.005)
        finally:
            worker.stop(force=True)
            runner.join(15)
            client.close()
            app.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cancel_push",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stores", default=",".join(KINDS))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--heartbeat", type=float, default=None,
                        help="heartbeat interval (default: tether's, lease_ttl / 3 = 10 s)")
    parser.add_argument("--no-push", action="store_true",
                        help="the baseline: ignore the store's signals (cancel at a heartbeat)")
    parser.add_argument("--out", type=Path, default=None, help="write the samples as JSON")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"trials": args.trials, "heartbeat": args.heartbeat or "default",
                               "push": not args.no_push, "stores": {}}
    for kind in [k.strip() for k in args.stores.split(",") if k.strip()]:
        if kind not in KINDS:
            raise SystemExit(f"unknown store {kind!r} (known: {', '.join(KINDS)})")
        samples = measure(kind, args.trials, args.heartbeat, push=not args.no_push)
        ms = [s * 1000 for s in samples]
        row = {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "max_ms": max(ms),
               "samples_ms": ms}
        results["stores"][kind] = row
        print(f"{kind:9} cancel seen: p50 {fmt(row['p50_ms'])} ms  p99 {fmt(row['p99_ms'])} ms"
              f"  max {fmt(row['max_ms'])} ms  ({len(ms)} trials)", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
