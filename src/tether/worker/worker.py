"""A worker process: claims jobs, runs them, and keeps their leases alive.

Threads and what each may touch:

* fetcher: claims batches (one ``claim`` write per batch) into free slots;
* handlers: a daemon thread pool and one asyncio loop (``executor``), or child processes
  (``procpool``, ``pool="process"``) driven by one supervisor and one reader thread per child;
* heartbeater: its own store connection; renews every in-flight lease in one statement;
* completer: writes outcomes in fenced batches;
* deadlines: per-task timeouts; maintainer: reaper and pruner under leadership.

If any side loop dies unexpectedly the worker stops (handing its leases back), because a worker
whose heartbeater or completer is gone would silently break the lease protocol.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tether import clock
from tether.context import JobContext
from tether.errors import LeaseInterrupted, ShuttingDown, StoreError
from tether.maintenance.maintainer import Maintainer
from tether.stores import open_store
from tether.stores.base import Job, Outcome, Store, WorkerInfo
from tether.worker.completer import Completer, Pending
from tether.worker.deadlines import Deadlines
from tether.worker.executor import Executor
from tether.worker.heartbeater import Heartbeater
from tether.worker.poolconfig import make_pool_config
from tether.worker.procpool import ProcessPool
from tether.worker.registry import Registry, Running
from tether.worker.shutdown import Phase, Shutdown

if TYPE_CHECKING:
    from tether.app import App

log = logging.getLogger("tether.worker")


def new_worker_id() -> str:
    """Fresh per process start (so a restarted worker never inherits old leases)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Worker:
    def __init__(
        self,
        app: App,
        *,
        concurrency: int = 10,
        queues: Sequence[str] | None = None,
        maintenance: bool = True,
        pool: str = "thread",
        app_spec: str | None = None,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: float | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        self.pool = make_pool_config(app, pool, app_spec=app_spec,
                                     max_tasks_per_child=max_tasks_per_child,
                                     max_memory_per_child=max_memory_per_child)
        self.app = app
        self.settings = app.settings
        self.concurrency = concurrency
        self.queues = list(queues) if queues else app.queues()
        self.id = new_worker_id()
        self.shutdown = Shutdown()
        self.registry = Registry(concurrency)
        self.store: Store = app.store
        self._hb_store = open_store(app.url)
        self._maint_store = open_store(app.url) if maintenance and (
            self.settings.reaper_interval > 0 or self.settings.prune_interval > 0) else None
        fatal: Callable[[BaseException], None] = self._fatal
        self.heartbeater = Heartbeater(
            self._hb_store, self.id, self.registry, app.events,
            lease_ttl=self.settings.lease_ttl, interval=self.settings.heartbeat_every,
            on_fatal=fatal)
        self.completer = Completer(self.store, self.id, self.registry, app.events, on_fatal=fatal)
        self.executor: Executor | ProcessPool
        if self.pool.kind == "process":
            self.executor = ProcessPool(self.registry, self._settle, self.store, app.events,
                                        self.pool, concurrency=concurrency, owner=self.id,
                                        on_fatal=fatal)
        else:
            self.executor = Executor(self.registry, self._settle, concurrency)
        self.deadlines = Deadlines(fatal)
        self.maintainer = Maintainer(
            self._maint_store, self.id, self.settings, app.events, on_fatal=fatal,
            reap=self.settings.reaper_interval > 0) if self._maint_store is not None else None
        self._fetcher = threading.Thread(target=self._fetch_loop, name="tether-fetcher",
                                         daemon=True)
        self.claimed = 0

    # -- running -----------------------------------------------------------------------------
    def run(self, *, install_signals: bool = True) -> int:
        """Run until stopped; returns the process exit code (0 on a clean stop)."""
        restore = self.shutdown.install() if install_signals else (lambda: None)
        try:
            self.executor.start()  # a process pool's children have imported the app before a claim
            self.store.register_worker(WorkerInfo(
                self.id, socket.gethostname(), os.getpid(), tuple(self.queues), self.concurrency))
            log.info("worker %s started: queues=%s concurrency=%d pool=%s lease_ttl=%ss",
                     self.id, ",".join(self.queues), self.concurrency, self.pool.kind,
                     self.settings.lease_ttl)
            for part in (self.heartbeater, self.completer, self.maintainer):
                if part is not None:
                    part.start()
            self._fetcher.start()
            self._supervise()
        finally:
            restore()
            self._close()
        if self.shutdown.fatal is not None:
            return 1
        return 0

    def stop(self, force: bool = False) -> None:
        """Ask the worker to stop (thread-safe); ``force`` skips the drain."""
        if force:
            self.shutdown.force("stop(force=True)")
        else:
            self.shutdown.request("stop() called")

    def _supervise(self) -> None:
        sd = self.shutdown
        while sd.phase == Phase.RUNNING:
            sd.changed.wait()
            sd.changed.clear()
        deadline = clock.monotonic() + self.settings.shutdown_timeout
        while sd.phase == Phase.DRAINING:
            if self.registry.wait_empty(min(0.1, max(0.0, deadline - clock.monotonic()))):
                break
            if clock.monotonic() >= deadline:
                sd.force("shutdown_timeout reached")
        self._fetcher.join(5.0)
        if sd.phase == Phase.FORCED:
            self._hand_back()
        self.registry.wait_empty(5.0)

    def _hand_back(self) -> None:
        """Interrupt every handler and release every lease we still hold, in one write."""
        batch = []
        for entry in self.registry.entries():
            entry.interrupt(ShuttingDown)
            if not entry.lost and self.registry.settle_once(entry):
                batch.append(Pending(entry, Outcome(entry.lease, "released"), "released"))
        if batch:
            self.completer.write(batch)
            self._notify()
            log.warning("handed back %d lease(s)", len(batch))

    def _close(self) -> None:
        if self.shutdown.phase == Phase.RUNNING:
            self.shutdown.request("closing")
        for part in (self.maintainer, self.heartbeater):
            if part is not None:
                part.stop()
        self.completer.stop()
        self.deadlines.stop()
        self.executor.stop()
        try:
            self.store.unregister_worker(self.id)
        except StoreError as exc:
            log.warning("could not unregister worker: %s", exc)
        for s in (self._hb_store, self._maint_store):
            if s is not None:
                s.close()
        log.info("worker %s stopped", self.id)

    def _fatal(self, exc: BaseException) -> None:
        self.shutdown.force(f"a worker thread died ({type(exc).__name__}: {exc})", fatal=exc)

    def _notify(self) -> None:
        try:
            self.store.notify(self.queues)
        except StoreError as exc:
            log.warning("could not wake other workers: %s", exc)

    # -- fetching ----------------------------------------------------------------------------
    def _fetch_loop(self) -> None:
        try:
            backoff = 0.1
            while not self.shutdown.stopping:
                free = self.registry.wait_free(0.5, lambda: self.shutdown.stopping)
                if free <= 0 or self.shutdown.stopping:
                    continue
                sent = clock.monotonic()
                try:
                    jobs = self.store.claim(self.id, self.queues,
                                            min(free, self.settings.claim_batch),
                                            self.settings.lease_ttl)
                    backoff = 0.1
                except StoreError as exc:
                    log.warning("claim failed (%s); retrying in %.1fs", exc, backoff)
                    self.shutdown.changed.wait(backoff)
                    backoff = min(backoff * 2, 5.0)
                    continue
                for job in jobs:
                    self._start(job, sent + self.settings.lease_ttl)
                if not jobs:
                    self.store.wait_for_jobs(self.queues, self.settings.poll_interval)
        except BaseException as exc:
            log.critical("fetcher died", exc_info=True)
            self._fatal(exc)

    def _start(self, job: Job, trusted_until: float) -> None:
        self.claimed += 1
        entry = Running(JobContext(job, self.store), trusted_until)
        self.registry.add(entry)
        self.app.events.emit("claimed", job_id=job.id, attempt=job.attempt, worker=self.id)
        task = self.app.tasks.get(job.task)
        if task is None:
            log.error("job %s: unknown task %r; dead-lettering it", job.id, job.task)
            self.registry.settle_once(entry)
            self._settle(entry, Outcome(entry.lease, "dead", reason="unknown_task",
                                        error=f"no task named {job.task!r} in this worker"))
            self.registry.mark(entry, returned=True)
            return
        if self.shutdown.phase == Phase.FORCED:
            entry.interrupt(ShuttingDown)
        timeout = task.options.timeout
        if timeout is not None:
            entry.extra["deadline"] = self.deadlines.add(timeout, lambda: self._timed_out(entry))
        self.executor.submit(entry, task)

    def _timed_out(self, entry: Running) -> None:
        if not self.registry.settle_once(entry):
            return
        task = self.app.tasks[entry.ctx.task]
        log.warning("job %s attempt %s timed out after %ss", entry.ctx.id, entry.ctx.attempt,
                    task.options.timeout)
        entry.extra["timed_out"] = True
        entry.interrupt(LeaseInterrupted)
        self._settle(entry, Outcome(
            entry.lease, "error", error=f"timed out after {task.options.timeout}s",
            reason="timeout", retry_delay=task.options.retry.delay(entry.ctx.job.failures + 1)))

    def _settle(self, entry: Running, outcome: Outcome | None) -> None:
        handle = entry.extra.get("deadline")
        if isinstance(handle, int):
            self.deadlines.cancel(handle)
        if outcome is None:
            self.registry.mark(entry, settled=True)
        else:
            self.completer.put(entry, outcome)
