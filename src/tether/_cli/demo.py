"""``tether demo``: three real workers, one SIGKILLed and one SIGSTOPped, no job lost.

It exits 0 only if every invariant held: every job done exactly once in the store; the killed
worker's jobs re-ran within the documented bound with their stall counted; the paused worker's
late completion was rejected and the store kept the live worker's result.

On a store given with ``--url`` that holds other jobs, the demo works in a queue of its own
(``demo-<random>``): its workers claim only from it, it reads and checks only its own jobs, and at
the end it deletes them and the worker rows its processes left (the SIGKILLed one never
unregisters), so the user's jobs are never touched and a later run finds no leftovers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

from tether import _clock as clock
from tether._config import make_settings
from tether._task import make_new_job
from tether.stores import open_store
from tether.stores._contract import JobFilter, JobRecord, Store
from tether.stores._urls import redact

WORKERS = 3


def _read_jsonl(folder: Path, prefix: str) -> list[dict[str, object]]:
    records = []
    for path in folder.glob(f"{prefix}-*.jsonl"):
        records += [json.loads(line) for line in path.read_text().splitlines() if line]
    return records


def _pid_of(owner: str | None) -> int:
    return int(owner.split(":")[1]) if owner else -1


class Demo:
    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.n = args.jobs
        self.ttl = args.lease_ttl
        self.bound = make_settings(lease_ttl=self.ttl).recovery_bound
        self.folder = folder
        self.url = args.url or f"sqlite:///{folder / 'demo.db'}"
        self.queue = f"demo-{uuid.uuid4().hex[:10]}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.failures: list[str] = []

    def say(self, text: str) -> None:
        print(text, flush=True)

    def check(self, ok: bool, text: str) -> None:
        self.say(f"  [{'ok' if ok else 'FAILED'}] {text}")
        if not ok:
            self.failures.append(text)

    def spawn(self) -> None:
        env = dict(os.environ, TETHER_URL=self.url, TETHER_DEMO_DIR=str(self.folder),
                   TETHER_DEMO_LEASE_TTL=str(self.ttl))
        log = open(self.folder / f"worker-{len(self.procs)}.log", "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "tether._cli.main", "worker", "tether._demo_tasks:app",
             "-c", "4", "-q", self.queue], env=env, stdout=log, stderr=subprocess.STDOUT))

    def holding(self, store: Store, pid: int) -> list[JobRecord]:
        return [j for j in store.search_jobs(JobFilter(status="running", queue=self.queue),
                                             limit=1000)
                if _pid_of(j.locked_by) == pid]

    def progress(self, store: Store, note: str = "") -> dict[str, int]:
        counts: Counter[str] = Counter()
        for c in store.counts():
            if c.queue == self.queue:
                counts[c.status] += c.count
        self.say(f"  t={clock.monotonic() - self.t0:5.1f}s  pending {counts['pending']:4d}  "
                 f"running {counts['running']:3d}  done {counts['done']:4d}  {note}")
        return dict(counts)

    def stop_holding(self, store: Store,
                     procs: list[subprocess.Popen[bytes]]) -> tuple[float, list[list[JobRecord]]]:
        """SIGSTOP ``procs`` at once while each holds jobs; (wall time of the stop, the jobs
        each holds).

        Together, so the one to be paused cannot pick up the other's re-runs (its attempt 2
        would then be re-run again, past the bound the demo checks). Read only once they are
        stopped: jobs last 60-180 ms, so a list read before the signal could name a job the
        worker finished in between (seen under load: the demo reported that job's own result
        as a failure). Writes already sent may still land, so read until two reads agree."""
        def held() -> list[list[int]]:
            return [[j.id for j in self.holding(store, p.pid)] for p in procs]

        deadline = clock.monotonic() + 30
        while clock.monotonic() < deadline:
            if not all(held()):
                clock.sleep(0.02)
                continue
            at = clock.wall()
            for p in procs:
                p.send_signal(signal.SIGSTOP)
            now, seen = held(), None
            while now != seen and clock.monotonic() < deadline:
                seen = now
                clock.sleep(0.2)
                now = held()
            if all(now):
                return at, [self.holding(store, p.pid) for p in procs]
            for p in procs:  # one finished all of its jobs meanwhile: again
                p.send_signal(signal.SIGCONT)
        raise RuntimeError(f"workers {[p.pid for p in procs]} never held jobs at once")

    def wait_registered(self, store: Store) -> None:
        deadline = clock.monotonic() + 60
        pids = {p.pid for p in self.procs}
        while {w.pid for w in store.list_workers() if self.queue in w.queues} != pids:
            if clock.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"the demo's workers did not all start; logs in {self.folder}")
            clock.sleep(0.05)

    def run(self) -> int:
        store = open_store(self.url)
        store.migrate()
        self.say(f"tether demo: {self.n} jobs, {WORKERS} workers, lease_ttl={self.ttl}s, "
                 f"recovery bound {self.bound:.1f}s, store {redact(self.url)}, queue {self.queue}")
        try:
            self.drive(store)
        finally:
            self.clean_up(store)
            store.close()
        return 1 if self.failures else 0

    def drive(self, store: Store) -> None:
        self.t0 = clock.monotonic()
        for _ in range(WORKERS):
            self.spawn()
        victim, sleeper, _survivor = self.procs
        try:
            # Jobs only once every worker claims: on a loaded machine one worker can start
            # seconds after the others, which then run all the jobs before it claims any.
            self.wait_registered(store)
            ids = store.enqueue([make_new_job("demo.work", [i, 60 + (i * 37) % 120], {},
                                              queue=self.queue) for i in range(self.n)])
            # The victim's death counts from its stop (its leases stopped being renewed then).
            kill_wall, (killed_jobs, zombie_jobs) = self.stop_holding(store, [victim, sleeper])
            stop_at = clock.monotonic()
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            self.progress(store, f"SIGKILL worker {victim.pid} holding jobs "
                          f"{[j.id for j in killed_jobs]}")
            self.progress(store, f"SIGSTOP worker {sleeper.pid} holding jobs "
                          f"{[j.id for j in zombie_jobs]}")
            while clock.monotonic() - stop_at < self.bound + 1.5:  # past the recovery bound
                clock.sleep(0.5)
                self.progress(store)
            sleeper.send_signal(signal.SIGCONT)
            self.progress(store, f"SIGCONT worker {sleeper.pid}: it resumes as a zombie")
            deadline = clock.monotonic() + 60
            while clock.monotonic() < deadline:
                counts = self.progress(store)
                if counts.get("done", 0) >= self.n:
                    break
                clock.sleep(0.5)
            clock.sleep(self.ttl / 3 + 0.5)  # let the zombie's heartbeat/late write land
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in self.procs:
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.verify(store, ids, killed_jobs, kill_wall, zombie_jobs, sleeper.pid)

    def clean_up(self, store: Store) -> None:
        """Delete the demo's jobs and the worker rows of its processes (only those)."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        pids = {p.pid for p in self.procs}
        host = socket.gethostname()
        for w in store.list_workers():
            if w.pid in pids and w.host == host and self.queue in w.queues:
                store.unregister_worker(w.id)
        store.purge(self.queue, ["pending", "done", "failed", "cancelled"])

    def verify(self, store: Store, ids: list[int], killed: list[JobRecord], kill_wall: float,
               zombie: list[JobRecord], zombie_pid: int) -> None:
        jobs = {i: store.get_job(i) for i in ids}
        self.say("\nresults")
        done = [j for j in jobs.values() if j is not None and j.status == "done"]
        self.check(len(done) == self.n, f"{len(done)}/{self.n} jobs done, none lost")
        kept_attempt = all(json.loads(j.result or "{}").get("attempt") == j.attempt for j in done)
        self.check(kept_attempt, "every stored result came from the job's final attempt")
        ledger = _read_jsonl(self.folder, "ledger")
        runs = Counter((r["job"], r["attempt"]) for r in ledger)
        self.check(all(c == 1 for c in runs.values()),
                   f"{len(runs)} attempts ran, each (job id, attempt) at most once")
        for k in killed:
            j = jobs[k.id]
            assert j is not None
            took = (j.started_at or 0) - kill_wall
            self.check(j.status == "done" and j.stall_count >= 1 and j.attempt >= 2
                       and took <= self.bound,
                       f"job {k.id} (SIGKILLed holder): re-ran as attempt {j.attempt}, "
                       f"stall_count {j.stall_count}, {took:.2f}s after the kill "
                       f"(bound {self.bound:.1f}s)")
        rejected = _read_jsonl(self.folder, "rejected")
        for z in zombie:
            j = jobs[z.id]
            assert j is not None
            result = json.loads(j.result or "{}")
            stale = [r for r in rejected if r["job"] == z.id and r["pid"] == zombie_pid]
            self.check(j.status == "done" and result.get("attempt", 0) > z.attempt,
                       f"job {z.id} (SIGSTOPped holder): result kept from worker "
                       f"{result.get('pid')} attempt {result.get('attempt')}, not the zombie's "
                       f"stale attempt {z.attempt}")
            self.check(bool(stale), f"job {z.id}: the zombie's stale write was rejected "
                       f"({', '.join(str(r.get('rejected', 'lease lost')) for r in stale)})")
        self.say("\n" + ("every invariant held" if not self.failures else
                         f"{len(self.failures)} invariant(s) FAILED; logs in {self.folder}"))


def cmd_demo(args: argparse.Namespace) -> int:
    if args.jobs < 20:
        print("tether demo: --jobs must be at least 20", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tether-demo-") as tmp:
        folder = Path(tmp)
        code = Demo(args, folder).run()
        if args.keep or code:
            kept = Path(tempfile.mkdtemp(prefix="tether-demo-kept-"))
            for f in folder.iterdir():
                (kept / f.name).write_bytes(f.read_bytes())
            print(f"files kept in {kept}")
        return code
