"""Remote worker drain: one ``tether worker -c 10`` direct vs through ``tether://``.

    python -m bench.remote [--jobs 10000] [--store postgres] [--concurrency 10]

``--latency N`` instead: an idle ``tether worker -c 10`` on ``tether://`` picks up N jobs
enqueued one at a time (50 ms apart, on the store directly); prints the pick-up p50/p99
(handler start minus enqueue time). Issue #21's bar: p99 under 50 ms.

Otherwise: enqueues ``--jobs`` no-op jobs, then times a real
``tether worker bench.apps:app --burst`` subprocess draining them: once on the store's
URL, once on ``tether://`` to a TetherServer (run in this process, in front of the same
store). Prints jobs/s of each and the ratio (issue #21's bar: the remote rate is at least
50 % of the direct one). A quick check, not one of bench/'s scenarios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.apps import NOOP, RECORD
from bench.common import ROOT, Config, isolated, percentile
from tether._server.serve import TetherServer
from tether.stores import NewJob, open_store


def _fill(url: str, jobs: int) -> None:
    store = open_store(url)
    try:
        for start in range(0, jobs, 1000):
            store.enqueue([NewJob(NOOP) for _ in range(min(1000, jobs - start))])
    finally:
        store.close()


def _drain(url: str, concurrency: int) -> float:
    env = {**os.environ, "TETHER_URL": url, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tether", "worker", "bench.apps:app", "--burst",
                    "-c", str(concurrency), "--no-maintenance", "--log-level", "WARNING"],
                   env=env, check=True, cwd=ROOT)
    return time.perf_counter() - started


def _latency(store_kind: str, jobs: int) -> None:
    with isolated(store_kind, Config()) as url, tempfile.TemporaryDirectory() as tmp:
        store = open_store(url)
        store.migrate()
        server = TetherServer(store)
        record = Path(tmp) / "starts"
        env = {**os.environ, "TETHER_URL": f"tether://127.0.0.1:{server.start()}",
               "PYTHONPATH": str(ROOT), "BENCH_RECORD": str(record)}
        worker = subprocess.Popen(
            [sys.executable, "-m", "tether", "worker", "bench.apps:app", "-c", "10",
             "--no-maintenance", "--log-level", "WARNING"], env=env, cwd=ROOT)
        try:
            store.enqueue([NewJob(RECORD, payload="[[0.0], {}]")])  # the worker is up
            while not record.exists():
                time.sleep(0.05)
            time.sleep(1.0)
            for _ in range(jobs):
                store.enqueue([NewJob(RECORD, payload=f"[[{time.time()!r}], {{}}]")])
                time.sleep(0.05)
            deadline = time.monotonic() + 30
            while len(record.read_text().splitlines()) < jobs + 1:
                assert time.monotonic() < deadline, "jobs were not picked up"
                time.sleep(0.05)
        finally:
            worker.terminate()
            worker.wait(30)
            server.stop()
            store.close()
        lags = [float(started) - float(sent) for _, _, _, sent, started in
                (line.split() for line in record.read_text().splitlines()[1:])]
        print(f"{store_kind} via tether://: pick-up of {jobs} jobs: "
              f"p50 {percentile(lags, 50) * 1000:.1f} ms, "
              f"p99 {percentile(lags, 99) * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--store", default="postgres")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--latency", type=int, default=0)
    args = parser.parse_args()
    if args.latency:
        _latency(args.store, args.latency)
        return
    cfg = Config()
    rates: dict[str, float] = {}
    for mode in ("direct", "remote"):
        with isolated(args.store, cfg) as url:
            store = open_store(url)
            store.migrate()
            _fill(url, args.jobs)
            server = None
            target = url
            if mode == "remote":
                server = TetherServer(store)
                target = f"tether://127.0.0.1:{server.start()}"
            try:
                seconds = _drain(target, args.concurrency)
            finally:
                if server is not None:
                    server.stop()
                left = [c for c in store.counts() if c.status in ("pending", "running")]
                store.close()
            assert not any(c.count for c in left), f"jobs left: {left}"
            rates[mode] = args.jobs / seconds
            print(f"{args.store} {mode}: {args.jobs} jobs in {seconds:.2f} s = "
                  f"{rates[mode]:.0f} jobs/s", flush=True)
    print(f"remote/direct: {rates['remote'] / rates['direct']:.0%}")


if __name__ == "__main__":
    main()
