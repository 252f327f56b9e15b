"""Bare loops of tether's worker protocol, one per store: the ceiling each drain is divided by.

Every loop does the same thing (issue #23): claim a batch of 100 with a lease and a per-claim
token, run no-op "handlers", write the whole batch's finish in one statement or script fenced by
id + attempt + token, while a heartbeat thread renews the leases it holds. Nothing else: no
events, no records, no replay, no hand-off to handler threads. Each reports its jobs/s and its
own CPU per job (``time.process_time`` of the process, all threads, heartbeat included), seeding
excluded. ``python -m bench.bare KIND URL N`` runs one in a fresh process and prints JSON, so
its CPU is not mixed with the harness's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from bench.common import ROOT

BATCH = 100
LEASE_TTL = 30.0
#: tether's default heartbeat interval: a third of the lease.
HEARTBEAT_EVERY = LEASE_TTL / 3


@dataclass(frozen=True)
class BareResult:
    """One bare drain: its rate and its CPU per job (process CPU over the timed window)."""

    jobs: int
    rate: float
    cpu_per_job: float  # seconds


def cpu_now() -> float:
    """User + system CPU of this process, every thread (the heartbeat's included), in ns
    precision (CLOCK_PROCESS_CPUTIME_ID)."""
    return time.process_time()


class Held:
    """The (id, token) pairs a loop holds, renewed by :class:`Heartbeat` (a lock per batch)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: dict[int, object] = {}

    def add(self, ids: list[int], token: object) -> None:
        with self.lock:
            for i in ids:
                self.items[i] = token

    def drop(self, ids: list[int]) -> None:
        with self.lock:
            for i in ids:
                self.items.pop(i, None)

    def snapshot(self) -> dict[int, object]:
        with self.lock:
            return dict(self.items)


class Heartbeat(threading.Thread):
    """Renews the held leases every ``every`` seconds through ``renew`` (on its own connection)."""

    def __init__(self, held: Held, renew: Callable[[dict[int, object]], None],
                 every: float = HEARTBEAT_EVERY) -> None:
        super().__init__(name="bare-heartbeat", daemon=True)
        self.held, self.renew, self.every = held, renew, every
        self.stopped = threading.Event()
        self.beats = 0

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            items = self.held.snapshot()
            if items:
                self.renew(items)
            self.beats += 1

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def timed(drain: Callable[[], int], n: int) -> BareResult:
    """Run ``drain`` (returns jobs finished), timing wall clock and process CPU."""
    c0, t0 = cpu_now(), time.perf_counter()
    done = drain()
    elapsed, cpu = time.perf_counter() - t0, cpu_now() - c0
    if done != n:
        raise RuntimeError(f"bare loop finished {done} of {n} jobs")
    return BareResult(n, n / max(elapsed, 1e-9), cpu / n)


def seed_with_tether(url: str, n: int) -> None:
    """``n`` no-op jobs enqueued by tether itself (its schema made on the way), for the loops
    that run over tether's own ``jobs`` table."""
    from bench.scenarios.drain import load  # the scenarios import this package

    load(url, n)


#: Which table a loop runs over: its own slim one, or tether's ``jobs`` (SQL stores only).
TABLES = ("bare", "jobs")


def run_here(kind: str, url: str, n: int, batch: int = BATCH,
             heartbeat_every: float = HEARTBEAT_EVERY, table: str = "bare") -> BareResult:
    """Seed ``n`` rows into the loop's own table / keys under ``url`` (or, with
    ``table="jobs"``, enqueue them with tether into its ``jobs`` table) and drain them here."""
    if kind == "postgres":
        from bench.bare import postgres as mod
    elif kind == "sqlite":
        from bench.bare import sqlite as mod  # type: ignore[no-redef]
    elif kind == "redis":
        from bench.bare import redis as mod  # type: ignore[no-redef]
    else:
        raise ValueError(f"unknown store {kind!r}")
    if table == "jobs":
        if kind == "redis":
            raise ValueError("the bare loop over tether's own layout is for the SQL stores")
        return mod.drain_jobs(url, n, batch, heartbeat_every)
    return mod.drain(url, n, batch, heartbeat_every)


def run(kind: str, url: str, n: int, batch: int = BATCH,
        heartbeat_every: float = HEARTBEAT_EVERY, table: str = "bare") -> BareResult:
    """:func:`run_here` in a fresh interpreter: its CPU is the loop's alone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    done = subprocess.run(
        [sys.executable, "-m", "bench.bare", kind, url, str(n), str(batch),
         repr(heartbeat_every), table], cwd=str(ROOT), env=env, capture_output=True,
        text=True, timeout=max(300.0, n / 500), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bare {kind} loop failed:\n{done.stderr[-3000:]}")
    return BareResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def to_json(result: BareResult) -> str:
    return json.dumps(asdict(result))
