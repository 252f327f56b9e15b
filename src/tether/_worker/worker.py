"""A worker process: claims jobs, runs them, and keeps their leases alive.

Threads and what each may touch:

* fetcher: claims batches (one ``claim`` write per batch) into free slots and, with the thread
  pool, ahead of them (``threads/claimahead.py``: bounded by what it can start soon; what
  waits too long is handed back);
* handlers: the pool (``pool.py``, the one interface the worker sees): a daemon thread pool
  and one asyncio loop (``threads/``), or child processes (``processes/``, ``pool="process"``)
  driven by one supervisor and one reader thread per child;
* heartbeater: its own store connection; renews every in-flight lease in one statement;
* signals: long-polls the main store for a cancel of a job it holds or a pause, and then
  brings the heartbeat forward (``signals.py``; the heartbeat still decides);
* completer: writes outcomes in fenced batches;
* deadlines: per-task timeouts; maintainer: reaper and pruner under leadership.

No exception from one store call stops a side loop: it logs, backs off and goes on (see
``health.py``), because the lease protocol keeps the jobs safe while the store is away. The
worker stops on ``StoreGone`` (its data vanished: one clear line, exit 1) and when a side loop
dies of its own bug (handing its leases back), because a worker whose heartbeater or completer
is gone would silently break the lease protocol.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tether import _clock as clock
from tether._context import JobContext
from tether._errors import ShuttingDown, StoreGone
from tether._flow import parse_queues, slots_for
from tether._maintenance.deathwatch import take_token
from tether._maintenance.maintainer import Maintainer
from tether._worker.completer import Completer
from tether._worker.connections import open_stores
from tether._worker.deadlines import Deadlines, Timeouts
from tether._worker.fetcher import Fetcher
from tether._worker.handback import hand_back
from tether._worker.health import StoreHealth, one_line
from tether._worker.heartbeater import Heartbeater
from tether._worker.paused import PausedQueues
from tether._worker.pool import Pool, make_pool
from tether._worker.poolconfig import make_pool_config
from tether._worker.registry import Held, Registry, Running
from tether._worker.shutdown import Phase, Shutdown
from tether._worker.signals import SignalWatch
from tether._worker.startup import open_when_up
from tether._worker.unknown import unknown_task_outcome
from tether.stores._contract import JobRecord, Outcome, Store, WorkerInfo
from tether.stores._urls import redact

if TYPE_CHECKING:
    from tether._runtime import Runtime

log = logging.getLogger("tether.worker")

#: How long a forced stop (second signal) waits for the store, in all: to hand leases back,
#: flush outcomes and unregister. A store that does not answer by then is not waited for.
FORCED_EXIT_WAIT = 2.0
#: How often the main thread wakes to run the handlers of signals caught by other threads.
SIGNAL_CHECK_EVERY = 0.2
#: The parts ``Worker._open`` builds, once the store answers.
_STORE_PARTS = frozenset({"store", "_hb_store", "_maint_store", "health", "heartbeater",
                          "completer", "pool", "maintainer", "pauses", "fetcher", "signals"})


def new_worker_id() -> str:
    """Fresh per process start (so a restarted worker never inherits old leases)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Worker:
    # Built by _open() (the constructor never waits for the store): see __getattr__.
    store: Store
    _hb_store: Store
    _maint_store: Store | None
    health: StoreHealth
    heartbeater: Heartbeater
    completer: Completer
    pool: Pool
    maintainer: Maintainer | None
    pauses: PausedQueues
    fetcher: Fetcher
    signals: SignalWatch

    def __init__(
        self,
        runtime: Runtime,
        *,
        concurrency: int | None = None,
        queues: Sequence[str] | Mapping[str, int | None] | None = None,
        maintenance: bool = True,
        pool: str = "thread",
        app_spec: str | None = None,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: float | None = None,
        claim_ahead: bool = True,
        schedules: bool = True,
    ) -> None:
        """``claim_ahead=False``: claim no more than the free slots (thread pool), for a
        caller that counts claims (a burst with ``max_jobs``: jobs claimed ahead would be
        taken, and run by its closing drain, past the count). ``schedules=False``: enqueue
        no periodic ticks (a burst: a tick it enqueued itself could keep it from ever being
        idle); the maintainer still reaps and prunes.

        ``queues``: names, or ``"name=N"`` / ``{"name": N}`` to give a queue at most N of
        this worker's slots (the others share the rest); ``concurrency`` defaults to the sum
        of the counts when every queue has one, else to 10."""
        names, caps = parse_queues(queues)
        concurrency = slots_for(concurrency, names, caps)
        config = make_pool_config(runtime, pool, app_spec=app_spec,
                                  max_tasks_per_child=max_tasks_per_child,
                                  max_memory_per_child=max_memory_per_child)
        self.runtime = runtime
        self.settings = runtime.settings
        self.concurrency = concurrency
        runtime.registry.import_includes()  # App(include=...): their tasks' queues are ours too
        self.queues = names if names else runtime.registry.queues()
        #: Per-queue slot counts of this worker (``-q images=2``); {} when none.
        self.queue_slots = caps
        self.id = new_worker_id()
        self.shutdown = Shutdown(grace=self.settings.shutdown_timeout)
        self.registry = Registry(concurrency)
        # periodic jobs: a duty of the maintenance leader
        self._periodic = runtime.registry.schedules() if schedules else []
        self._side = 2 if maintenance and (self.settings.reaper_interval > 0
                                          or self.settings.prune_interval > 0
                                          or self._periodic) else 1
        self._config = config
        self._claim_ahead = self.settings.claim_batch if claim_ahead else 0
        self.claimed = 0
        self._unknown_warned: set[str] = set()  # task names warned about (once per name)
        self._exit_by = float("inf")  # forced stop: the monotonic time to be gone by
        self._opened = False
        self._token = False  # holds a liveness token (issue #22)
        self._open_lock = threading.Lock()
        self.deadlines = Deadlines(self._fatal)
        self.timeouts = Timeouts(self.deadlines, self.registry, self._settle)

    @property
    def claims_ahead(self) -> bool:
        """The fetcher may claim more jobs than there are free slots (known before the store
        is opened: a burst checks it first)."""
        return self._config.kind == "thread" and self._claim_ahead > 0

    @property
    def runs_schedules(self) -> bool:
        """This worker's maintainer enqueues periodic ticks when it leads."""
        return self._side > 1 and bool(self._periodic)

    @property
    def opened(self) -> bool:
        """The store connections are open and the worker's parts built (see ``_open``)."""
        return self._opened

    def __getattr__(self, name: str) -> Any:
        """A part that needs the store (``store``, ``heartbeater``, ``pool``, ...), read
        before ``run()`` opened it: open it now, as the constructor used to (tests and tools
        reach into a worker they built; a store that is down raises StoreUnavailable here)."""
        if name in _STORE_PARTS and "_open_lock" in vars(self):
            self._open()
            return vars(self)[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _open(self) -> Worker:
        """Connect (the main store, migrated or checked; the heartbeat and maintenance
        connections) and build the parts that use them. Raises what opening raises:
        StoreUnavailable while the store is not up, anything else for a configuration error."""
        with self._open_lock:
            if self._opened:
                return self
            runtime = self.runtime
            store: Store = runtime.store
            side = open_stores(runtime.store_url, self._side)
            self.store = store
            self._hb_store = side[0]
            self._maint_store = side[1] if len(side) > 1 else None
            fatal: Callable[[BaseException], None] = self._fatal
            self.health = StoreHealth(self.settings.lease_ttl / 3, store.kind)
            self.heartbeater = Heartbeater(
                self._hb_store, self.id, self.registry, runtime.events,
                lease_ttl=self.settings.lease_ttl, interval=self.settings.heartbeat_every,
                on_fatal=fatal, health=self.health)
            self.completer = Completer(store, self.id, self.registry, runtime.events,
                                       on_fatal=fatal, health=self.health)
            self.pool = make_pool(
                self._config, self.registry, concurrency=self.concurrency, settle=self._settle,
                settle_many=self._settle_many,
                on_claimed=self._claimed, on_started=self.timeouts.arm, on_fatal=fatal,
                store=store, events=runtime.events, completer=self.completer,
                notify=self._notify, owner=self.id, claim_ahead=self._claim_ahead)
            self.maintainer = Maintainer(
                self._maint_store, self.id, self.settings, runtime.events, on_fatal=fatal,
                reap=self.settings.reaper_interval > 0,
                schedules=self._periodic) if self._maint_store is not None else None
            self.pauses = PausedQueues(store, self.queues)
            self.signals = SignalWatch(store, self.id, self._signalled, on_fatal=fatal)
            self.fetcher = Fetcher(store, self.id, self.queues, self.settings, self.registry,
                                   self.pool, self.shutdown, self.pauses, self.health,
                                   start=self._start, on_fatal=fatal,
                                   flow=runtime.registry.flow(), caps=self.queue_slots,
                                   concurrency=self.concurrency)
            self._opened = True
            return self

    def wait_for_store(self, *, install_signals: bool = True) -> bool:
        """Open the store, waiting while it is not up yet (logged, retried with backoff: see
        ``startup.py``); False when the worker was stopped first (a signal, ``stop()``), and
        then nothing was claimed. ``run()`` calls it; call it first to know the store is
        reached before ``run()`` (``tether worker`` does, for its banner)."""
        if self._opened:
            return True
        restore = self.shutdown.install() if install_signals else (lambda: None)
        try:
            return open_when_up(self._open, redact(self.runtime.store_url),
                                stop=self.shutdown) is not None
        finally:
            restore()

    # -- running -----------------------------------------------------------------------------
    def run(self, *, install_signals: bool = True) -> int:
        """Run until stopped; returns the process exit code (0 on a clean stop)."""
        restore = self.shutdown.install() if install_signals else (lambda: None)
        try:
            if not self.wait_for_store(install_signals=False):
                return 0  # stopped before the store was reached: nothing was claimed
            self.pool.start()  # a process pool's children have imported the app before a claim
            # The liveness token (issue #22) before the first claim and election: from now on
            # this process's death is seen within death_check_interval, not at lease expiry.
            self._token = take_token(self.store, self.id,
                                     check_every=self.settings.death_check_interval,
                                     lease_ttl=self.settings.lease_ttl)
            self.store.register_worker(WorkerInfo(
                self.id, socket.gethostname(), os.getpid(), tuple(self.queues), self.concurrency))
            log.debug("worker %s registered (pool=%s, lease_ttl=%ss)", self.id, self.pool.kind,
                      self.settings.lease_ttl)
            for part in (self.signals, self.heartbeater, self.completer, self.maintainer):
                if part is not None:
                    part.start()
            self.fetcher.start()
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
            # With a timeout: a signal the kernel hands to another thread only sets a flag, and
            # its Python handler runs once this (main) thread runs bytecode again.
            sd.changed.wait(SIGNAL_CHECK_EVERY)
            sd.changed.clear()
        deadline = clock.monotonic() + self.settings.shutdown_timeout
        while sd.phase == Phase.DRAINING:
            if self.registry.wait_empty(min(0.1, max(0.0, deadline - clock.monotonic()))):
                break
            self.pool.hand_back_stale()  # the fetcher has stopped: its hand-back goes on here
            if clock.monotonic() >= deadline:
                sd.force("shutdown_timeout reached")
        if sd.phase == Phase.FORCED:
            self._exit_by = clock.monotonic() + FORCED_EXIT_WAIT
            self.completer.give_up_at = self._exit_by
        self.fetcher.join(min(5.0, self._left()))
        if sd.phase == Phase.FORCED:
            self._hand_back()
        self.registry.wait_empty(5.0)

    def _left(self) -> float:
        """Seconds left before a forced stop stops waiting for the store (inf otherwise)."""
        return max(0.05, self._exit_by - clock.monotonic())

    def _hand_back(self) -> None:
        """Interrupt every handler and release every lease still held (handback.py)."""
        hand_back(self.registry, self.completer, self._exit_by, self._notify,
                  self.settings.recovery_bound)

    def _close(self) -> None:
        if not self._opened:
            self.deadlines.stop()
            return
        if self.shutdown.phase == Phase.RUNNING:
            self.shutdown.request("closing", signalled=False)
        self.signals.stop(0.0)
        for part in (self.maintainer, self.heartbeater):
            if part is not None:
                part.stop(min(5.0, self._left()))
        self.completer.stop(min(10.0, self._left()))
        self.deadlines.stop()
        self.pool.stop()
        self._bounded(lambda: self.store.unregister_worker(self.id), "unregister the worker")
        if self._token:  # last: its jobs are handed back; from now on it counts as dead
            self._bounded(lambda: self.store.release_liveness(self.id),
                          "release the liveness token")
        for s in (self._hb_store, self._maint_store):
            if s is not None:
                self._bounded(s.close, "close a store connection")
        log.info("worker %s stopped", self.id)

    def _bounded(self, call: Callable[[], object], what: str) -> None:
        """Run a store call; on a forced stop, give up waiting once its time is up."""
        def run() -> None:
            try:
                call()
            except Exception as exc:
                log.warning("could not %s: %s", what, one_line(exc))

        if self._exit_by == float("inf"):
            run()
            return
        thread = threading.Thread(target=run, name="tether-closing", daemon=True)
        thread.start()
        thread.join(self._left())
        if thread.is_alive():
            log.warning("could not %s: the store did not answer in time", what)

    def _fatal(self, exc: BaseException) -> None:
        if isinstance(exc, StoreGone):
            if self.shutdown.fatal is None:
                log.error("stopping: the store's data is gone: %s", exc)
            self.shutdown.force("the store is gone", fatal=exc)
            return
        self.shutdown.force(f"a worker thread died ({type(exc).__name__}: {exc})", fatal=exc)

    def _signalled(self) -> None:
        """The store signalled us (a cancel of a job we hold, or a pause): heartbeat now,
        and re-read the paused set before the next claim (``signals.py``)."""
        self.heartbeater.nudge()
        self.pauses.refresh()

    def _notify(self) -> None:
        try:
            self.store.notify(self.queues)
        except Exception as exc:
            log.warning("could not wake other workers: %s", one_line(exc))

    # -- claimed jobs ------------------------------------------------------------------------
    def _start(self, jobs: list[JobRecord], trusted_until: float) -> None:
        """Hand one claim's jobs to the pool (the fetcher dispatches the claim after); a job
        of a task this worker does not know is settled here. One call per claim, with what
        every job needs looked up once: this runs on the fetcher thread for every job."""
        self.claimed += len(jobs)
        store, runtime, shutdown, submit = self.store, self.runtime, self.shutdown, \
            self.pool.submit
        codec, tasks = runtime.codec, runtime.registry
        known, reading = tasks.tasks, tasks.reading_task
        for job in jobs:
            entry = Running(JobContext(job, store, codec, reading), trusted_until)
            task = known.get(job.task)
            if task is None:
                task = tasks.find_task(job.task)  # imports the include modules, once
                if task is None:
                    self._unknown(entry)
                    continue
            if shutdown.phase == Phase.FORCED:
                entry.interrupt(ShuttingDown)
            submit(entry, task)

    def _unknown(self, entry: Running) -> None:
        """A claimed job of a task this worker does not know: settled at once (unknown.py)."""
        job = entry.ctx.job
        self.registry.add(entry)
        self._claimed(entry)
        self.registry.settle_once(entry)
        first = job.task not in self._unknown_warned
        self._unknown_warned.add(job.task)
        self._settle(entry, unknown_task_outcome(
            job, entry.lease, self.id, self.settings.unknown_task_timeout, warn=first))
        self.registry.mark(entry, returned=True)

    def _claimed(self, entry: Running) -> None:
        """The attempt holds a slot (the pool says when: a thread pool when a handler thread
        takes it from the backlog, a process pool at once)."""
        job = entry.ctx.job
        self.runtime.events.emit_claimed(job.id, job.attempt, self.id, job.task, job.queue,
                                         job.started_at, job.run_at, entry.started_at)

    def _settle_many(self, items: list[Held]) -> None:
        """:meth:`_settle` of each (a thread pool's batch), the plain ones (an outcome to
        write, no timeout armed) handed to the completer in one go."""
        plain: list[tuple[Running, Outcome]] = []
        for entry, outcome in items:
            if outcome is None or entry.extra:
                self._settle(entry, outcome)
            else:
                plain.append((entry, outcome))
        if plain:
            self.completer.put_many(plain)

    def _settle(self, entry: Running, outcome: Outcome | None) -> None:
        if entry.extra:  # an armed timeout is kept there (most jobs have none: no call)
            self.timeouts.cancel(entry)
        if outcome is None:
            ctx = entry.ctx
            if ctx.completed_in_transaction:
                # The handler's own transaction wrote the fenced completion: nothing for the
                # completer to write, but logs and metrics must still see the job finish.
                self.runtime.events.emit("completed", job_id=ctx.id, attempt=ctx.attempt,
                                         worker=self.id, detail={
                                             "task": ctx.job.task, "queue": ctx.job.queue,
                                             "kind": "done", "reason": None, "delay": 0.0,
                                             "error": None, "transaction": True})
            self.registry.mark(entry, settled=True)
        else:
            self.completer.put(entry, outcome)
