"""``python -m bench.remote``: what serving workers through ``tether server`` costs (issue #21).

    python -m bench.remote [--stores sqlite,postgres,redis] [--runs 3] [--jobs 10000]
                           [--latency-jobs 200] [--latency-gap 0.05]
                           [--scenarios drain,latency] [--out FILE]

Two measurements per store, each in two modes side by side in one run, interleaved (the order
of the two modes alternates from run to run, so the machine's load drifts over both alike):

* ``direct``: one real ``tether worker bench.apps:app -c 10`` whose ``TETHER_URL`` is the store;
* ``remote``: the same worker whose ``TETHER_URL`` is ``tether://TOKEN@127.0.0.1:PORT``, a real
  ``tether server --url STORE --listen 127.0.0.1:PORT --token-file FILE`` subprocess (its
  defaults: maintenance on) in front of the same kind of store.

**drain**: N no-op jobs loaded directly with ``enqueue_many``, then the worker started; rate
from its registration in the store to all done (the drain scenario's protocol,
bench/scenarios/drain.py), and the CPU time (user + system, the kernel's process clock) per
job of the worker over the same span and of the server from just before the worker's spawn
(it serves nobody before). Target: remote >= 50 % of direct, per run.

**latency**: an idle worker (``-c 10``); one job every ``--latency-gap`` seconds, enqueued by a
producer in the same mode (through the server in ``remote``); latency = the handler's
``time.time()`` at entry - the producer's ``time.time()`` just before ``enqueue`` (the
latency scenario's protocol, bench/scenarios/latency.py). Target: remote p99 < 50 ms.

Figures are medians over the runs, with min and max. Only loopback servers and isolated stores
(bench.common); the servers and workers are this script's subprocesses, stopped by pid.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.apps import RECORD, make_app
from bench.common import ROOT, STORES, Config, fmt, isolated, percentile
from bench.procs import (
    RecordFile,
    WorkerProc,
    process_cpu_seconds,
    wait_drained,
    wait_registered,
    wait_until,
)
from bench.scenarios.drain import load

MODES = ("direct", "remote")
SCENARIOS = ("drain", "latency")
DRAIN_TARGET = 50.0  # remote as % of direct, issue #21
LATENCY_TARGET = 50.0  # ms, p99 of an idle remote worker


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServerProc:
    """``tether server`` in front of ``store_url`` on a free loopback port, one worker token."""

    def __init__(self, store_url: str, workdir: str) -> None:
        self.token = secrets.token_hex(16)
        tokens = Path(workdir) / f"tokens-{time.time_ns()}"
        tokens.write_text(f"{self.token} worker\n")
        tokens.chmod(0o600)
        self.port = _free_port()
        self.url = f"tether://{self.token}@127.0.0.1:{self.port}"
        env = dict(os.environ)
        env.pop("TETHER_URL", None)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        self.log_path = Path(workdir) / f"server-{time.time_ns()}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tether._cli.main", "--log-level", "WARNING", "server",
                 "--url", store_url, "--listen", f"127.0.0.1:{self.port}",
                 "--token-file", str(tokens)],
                cwd=str(ROOT), env=env, stdout=log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until a call through ``tether://`` succeeds."""
        from tether.stores import open_store

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tether server exited:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                return False
            probe = open_store(self.url)
            try:
                probe.now()
                return True
            except Exception:  # not serving yet (any error): keep waiting
                return False
            finally:
                probe.close()

        wait_until(ready, timeout, every=0.05, what="the tether server to serve")

    def stop(self) -> None:
        """SIGTERM (graceful), then SIGKILL after 15 s; by pid."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait()

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@contextmanager
def target(kind: str, mode: str, workdir: str) -> Iterator[tuple[str, str, ServerProc | None]]:
    """(store URL, URL the worker and producer use, the server or None) on a fresh store."""
    with isolated(kind, Config(workdir=workdir)) as url:
        setup = make_app(url)
        try:
            setup.store.migrate()
        finally:
            setup.close()
        if mode == "direct":
            yield url, url, None
            return
        server = ServerProc(url, workdir)
        try:
            server.wait_ready()
            yield url, server.url, server
        finally:
            server.stop()


def drain_once(kind: str, mode: str, n: int, workdir: str) -> dict[str, float]:
    """One drain: rate (jobs/s from registration), worker and server CPU per job (us)."""
    with target(kind, mode, workdir) as (url, worker_url, server):
        last = load(url, n)
        app = make_app(url)  # the harness reads the store directly, in both modes
        worker: WorkerProc | None = None
        try:
            # The server's CPU is read before the worker exists (it serves nobody until then):
            # read after the worker's registration was seen, as the worker's is, a short drain
            # could be all but over already and the server's share of it read as 0.
            cpu_s = process_cpu_seconds(server.pid) if server else 0.0
            worker = WorkerProc(worker_url, 10, log_dir=workdir)
            registered = wait_registered(app.store, [worker], timeout=60.0)
            cpu_w = worker.cpu_seconds()
            done = wait_drained(app.store, last, timeout=max(180.0, n / 50), worker=worker)
            cpu_w = worker.cpu_seconds() - cpu_w
            cpu_s = (process_cpu_seconds(server.pid) - cpu_s) if server else 0.0
        finally:
            if worker is not None:
                worker.stop()
            app.close()
        return {"rate": n / max(done - registered, 1e-9), "worker_us": 1e6 * cpu_w / n,
                "server_us": 1e6 * cpu_s / n}


def latency_once(kind: str, mode: str, jobs: int, gap: float, workdir: str) -> list[float]:
    """Pick-up latencies (seconds) of one run: an idle worker, one job per ``gap``."""
    with target(kind, mode, workdir) as (url, worker_url, _server):
        record = os.path.join(workdir, f"latency-{time.time_ns()}.rec")
        records = RecordFile(record)
        direct = make_app(url)
        producer = make_app(worker_url)
        worker: WorkerProc | None = None
        try:
            worker = WorkerProc(worker_url, 10, log_dir=workdir, record=record)
            wait_registered(direct.store, [worker], timeout=60.0)
            time.sleep(0.5)  # let it settle into its idle wait (as bench/scenarios/latency.py)
            task = producer.runtime.registry.tasks[RECORD]
            task.enqueue(0.0)  # warm the producer's connection or channel; not measured
            records.wait_for(lambda r: True, 30.0)
            records.records.clear()
            t0 = time.time()
            for i in range(jobs):
                pause = t0 + i * gap - time.time()
                if pause > 0:
                    time.sleep(pause)
                task.enqueue(time.time())
            deadline = time.monotonic() + 60.0
            while len(records.records) < jobs and time.monotonic() < deadline:
                time.sleep(0.01)
                records.poll()
            if len(records.records) < jobs:
                raise RuntimeError(f"only {len(records.records)} of {jobs} started")
            return [r.started - r.sent for r in records.records]
        finally:
            if worker is not None:
                worker.stop()
            producer.close()
            direct.close()
            os.unlink(record)


def _child(args: argparse.Namespace, scenario: str, kind: str, mode: str) -> dict[str, object]:
    """One measurement in its own process: no state (imports, channels) carries over."""
    argv = [sys.executable, "-m", "bench.remote", "--once", f"{scenario}:{kind}:{mode}",
            "--jobs", str(args.jobs), "--latency-jobs", str(args.latency_jobs),
            "--latency-gap", str(args.latency_gap)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    out = subprocess.run(argv, cwd=str(ROOT), env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    got: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def _once(spec: str, args: argparse.Namespace) -> dict[str, object]:
    scenario, kind, mode = spec.split(":")
    with tempfile.TemporaryDirectory(prefix="tremote-") as workdir:
        if scenario == "drain":
            return dict(drain_once(kind, mode, args.jobs, workdir))
        lat = latency_once(kind, mode, args.latency_jobs, args.latency_gap, workdir)
        return {"p50": 1000 * percentile(lat, 50), "p99": 1000 * percentile(lat, 99),
                "max": 1000 * max(lat)}


def _span(values: list[float], unit: str = "") -> str:
    if not values:
        return "n/a"
    return (f"{fmt(statistics.median(values))}{unit} ({fmt(min(values))}-"
            f"{fmt(max(values))})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.remote",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--stores", default=",".join(STORES))
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--latency-jobs", type=int, default=200)
    p.add_argument("--latency-gap", type=float, default=0.05)
    p.add_argument("--out", default="", help="also write every sample as JSON here")
    p.add_argument("--once", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.once:
        print(json.dumps(_once(args.once, args)))
        return 0
    stores = [s for s in args.stores.split(",") if s]
    scenarios = [s for s in args.scenarios.split(",") if s in SCENARIOS]
    # results[scenario][store][mode] = one dict per run
    results: dict[str, dict[str, dict[str, list[dict[str, float]]]]] = {
        sc: {k: {m: [] for m in MODES} for k in stores} for sc in scenarios}
    errors: list[str] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()[0]
    for run in range(args.runs):
        order = MODES if run % 2 == 0 else tuple(reversed(MODES))
        for scenario in scenarios:
            for kind in stores:
                for mode in order:
                    got = _child(args, scenario, kind, mode)
                    print(f"run {run + 1} {scenario} {kind} {mode}: {got}", file=sys.stderr,
                          flush=True)
                    if "error" in got:
                        errors.append(f"{scenario} {kind} {mode}: {got['error']}")
                    else:
                        results[scenario][kind][mode].append(
                            {k: float(v) for k, v in got.items()})  # type: ignore[arg-type]
    load_end = os.getloadavg()[0]
    print(f"remote workers, {args.runs} interleaved runs, started {started}, load "
          f"{load_start:.1f} at start, {load_end:.1f} at the end; {os.cpu_count()} cores")
    if "drain" in results:
        print(f"\ndrain: {args.jobs:,} no-op jobs, one worker -c 10 (defaults); median "
              "(min-max) over the runs")
        print("| store | direct jobs/s | remote jobs/s | remote / direct (per run) | target "
              "| worker CPU/job direct | worker CPU/job remote | server CPU/job |")
        print("|---|---:|---:|---:|---|---:|---:|---:|")
        for kind in stores:
            d, r = results["drain"][kind]["direct"], results["drain"][kind]["remote"]
            ratios = [100 * b["rate"] / a["rate"] for a, b in zip(d, r, strict=False)]
            verdict = ("met" if ratios and statistics.median(ratios) >= DRAIN_TARGET
                       else "MISSED" if ratios else "n/a")
            print(f"| {kind} | {_span([x['rate'] for x in d])} | "
                  f"{_span([x['rate'] for x in r])} | {_span(ratios, ' %')} | "
                  f">= {DRAIN_TARGET:.0f} % {verdict} | "
                  f"{_span([x['worker_us'] for x in d], ' us')} | "
                  f"{_span([x['worker_us'] for x in r], ' us')} | "
                  f"{_span([x['server_us'] for x in r], ' us')} |")
    if "latency" in results:
        print(f"\npick-up latency: idle worker -c 10, {args.latency_jobs} jobs one per "
              f"{1000 * args.latency_gap:.0f} ms, enqueue to handler start (ms); median "
              "(min-max) over the runs")
        print("| store | direct p50 | direct p99 | remote p50 | remote p99 | remote max "
              "| target p99 < 50 ms |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for kind in stores:
            d, r = results["latency"][kind]["direct"], results["latency"][kind]["remote"]
            p99 = [x["p99"] for x in r]
            verdict = ("met" if p99 and statistics.median(p99) < LATENCY_TARGET
                       else "MISSED" if p99 else "n/a")
            print(f"| {kind} | {_span([x['p50'] for x in d])} | {_span([x['p99'] for x in d])} "
                  f"| {_span([x['p50'] for x in r])} | {_span(p99)} | "
                  f"{_span([x['max'] for x in r])} | {verdict} |")
    for error in errors:
        print(f"\nerror: {error}")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"started": started, "load": [load_start, load_end], "results": results,
             "errors": errors, "args": vars(args)}, indent=1))
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
