"""Running a real worker until no job is due: ``tether worker --burst`` and
:func:`tether.testing.drain`.

Invariant: the worker is the ordinary one (claim, heartbeat, finish through the store
contract); only *when to stop* is added. The fetcher claims while the idle check reads, so the
check (:func:`is_idle`) reads in an order that no claim or enqueue can slip through:

1. the worker's claim counter, then its registry is empty (no handler runs, no outcome is
   waiting to be written: a handler's enqueues are in the store before its entry leaves);
2. no pending job of its unpaused queues is due;
3. the store shows no job running under the worker's id;
4. the claim counter has not moved and the registry is still empty.

A claim written before (2) shows in (3) as running under the worker's id, or, if that job
already ran to its end, in (4) as a moved counter; a claim written after (2) took a job that was
not due at (2) (only time made it due). A job a handler enqueued after (1) needs a claim after
(1), covered the same way. (Reading (3) before (2) lost a claim made between them: see
tests/testing/test_idle.py.) Then the worker is asked to stop as on SIGTERM; it drains what it
holds, which is nothing. A burst runs no periodic scheduler (its worker is built with
``schedules=False``): a tick it enqueued itself could keep it from ever being idle.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tether import _clock as clock
from tether import _limits as limits
from tether._errors import AuthError
from tether._events import Event, Events
from tether._loop import Loop

if TYPE_CHECKING:
    from tether._worker.worker import Worker
    from tether.stores._contract import Admin

#: How often the watcher looks again while the worker is busy or between two jobs.
POLL = 0.01
_PAGE = 500
log = logging.getLogger("tether.worker")


@dataclass
class BurstResult:
    """What a burst did. ``ran``: ids of the jobs the worker claimed, in first-claim order."""

    ran: list[int] = field(default_factory=list)
    timed_out: bool = False
    exit_code: int = 0


class _Claims:
    """One permanent ``claimed`` subscription per Events object (Events has no unsubscribe),
    forwarding to the bursts that are listening now."""

    def __init__(self, events: Events) -> None:
        # Replaced (under the lock), never mutated: a claim (one per job) reads it without
        # a lock or a copy.
        self.listeners: tuple[Callable[[Event], None], ...] = ()
        self.lock = threading.Lock()
        events.on("claimed", self._dispatch)

    def add(self, listener: Callable[[Event], None]) -> None:
        with self.lock:
            self.listeners = (*self.listeners, listener)

    def remove(self, listener: Callable[[Event], None]) -> None:
        with self.lock:
            listeners = list(self.listeners)
            listeners.remove(listener)
            self.listeners = tuple(listeners)

    def _dispatch(self, event: Event) -> None:
        for listener in self.listeners:
            listener(event)


_CLAIMS: weakref.WeakKeyDictionary[Events, _Claims] = weakref.WeakKeyDictionary()
_CLAIMS_LOCK = threading.Lock()


def _claims(events: Events) -> _Claims:
    with _CLAIMS_LOCK:
        found = _CLAIMS.get(events)
        if found is None:
            found = _CLAIMS[events] = _Claims(events)
        return found


def _due(worker: Worker) -> bool:
    """A pending job of the worker's unpaused queues is due."""
    store = worker.store
    paused = set(store.paused_queues())
    now = store.now()
    for queue in worker.queues:
        if queue in paused:
            continue
        after: int | None = None
        while True:
            page = store.list_jobs(status="pending", queue=queue, after_id=after, limit=_PAGE)
            if any(job.run_at <= now for job in page):
                return True
            if len(page) < _PAGE:
                break
            after = page[-1].id
    return False


def _held(worker: Worker) -> bool:
    """The store shows a job running under the worker's id."""
    after: int | None = None
    while True:
        running = worker.store.list_jobs(status="running", after_id=after, limit=_PAGE)
        if any(job.locked_by == worker.id for job in running):
            return True
        if len(running) < _PAGE:
            return False
        after = running[-1].id


def is_idle(worker: Worker) -> bool:
    """True when ``worker`` has nothing to do and nothing in hand (see the module's
    docstring for why the reads go in this order)."""
    claims = worker.claimed
    if len(worker.registry) != 0 or _due(worker) or _held(worker):
        return False
    return worker.claimed == claims and len(worker.registry) == 0


def run_burst(
    worker: Worker,
    *,
    install_signals: bool = True,
    max_jobs: int | None = None,
    timeout: float | None = None,
    fast_forward: Callable[[], bool] | None = None,
) -> BurstResult:
    """Run ``worker`` in this thread until no job is due for it, ``max_jobs`` jobs were
    claimed, or ``timeout`` seconds passed (counted from here: a store that is not up yet is
    waited for inside it, as ``Worker.run`` does) (then it is stopped as on a second SIGTERM and
    ``timed_out`` is set). ``fast_forward`` is called whenever the worker is idle; returning
    True (it made a job due, e.g. by moving a memory store's clock) keeps the burst going."""
    if max_jobs is not None:
        limits.check_int(max_jobs, "max_jobs", low=1, high=limits.MAX_JOB_ID)
    if max_jobs is not None and worker.claims_ahead:
        # max_jobs counts claims: a claim ahead of free slots would take (and then run, as a
        # drain does) jobs past the count.
        raise ValueError("max_jobs needs a worker built with claim_ahead=False")
    if worker.runs_schedules:
        raise ValueError("a burst needs a worker built with schedules=False: a periodic tick "
                         "it enqueued itself could keep it from ever being idle")
    result = BurstResult()
    stop = Stopper(worker)
    seen: set[int] = set()
    lock = threading.Lock()

    def on_claim(event: Event) -> None:
        if event.worker != worker.id or event.job_id is None:
            return
        with lock:
            if event.job_id not in seen:
                seen.add(event.job_id)
                result.ran.append(event.job_id)
            reached = max_jobs is not None and len(result.ran) >= max_jobs
        if reached:
            stop(f"burst: {max_jobs} job(s) claimed (max_jobs)")  # before the next claim

    claims = _claims(worker.runtime.events)
    claims.add(on_claim)
    watcher = IdleWatch(worker, stop, result, timeout, fast_forward)
    watcher.start()
    try:
        result.exit_code = worker.run(install_signals=install_signals)
    finally:
        watcher.stop(5.0)
        claims.remove(on_claim)
    return result


class Stopper:
    """Ends a burst once: as the first SIGTERM does (drain what is held), however many of its
    triggers fire (the idle watcher, ``max_jobs``). A second ``request`` would be the second
    SIGTERM, which hands the leases of running jobs back."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._lock = threading.Lock()
        self._done = False

    def __call__(self, why: str) -> None:
        with self._lock:
            if self._done or self.worker.shutdown.stopping:
                return
            self._done = True
        self.worker.shutdown.request(why, signalled=False)
        try:  # wake the fetcher from its wait for jobs (else the stop waits out a poll)
            self.worker.store.notify(self.worker.queues)
        except Exception:  # a wake-up only saves time
            pass


class IdleWatch(Loop):
    """Every :data:`POLL` seconds: stop the burst's worker once it is idle (:func:`is_idle`),
    or, past ``timeout``, force it to stop; ends with the worker's run."""

    def __init__(self, worker: Worker, stop: Stopper, result: BurstResult,
                 timeout: float | None, fast_forward: Callable[[], bool] | None) -> None:
        super().__init__("tether-burst", log=log, died="burst watcher died")
        self.worker = worker
        self._stop_burst = stop
        self.result = result
        self.deadline = None if timeout is None else clock.monotonic() + timeout
        self.fast_forward = fast_forward

    @property
    def stopping(self) -> bool:
        return super().stopping or self.worker.shutdown.stopping

    def round(self) -> float:
        if self.deadline is not None and clock.monotonic() >= self.deadline:
            self.result.timed_out = True
            self.worker.stop(force=True)
            self.stop(0.0)  # done: no more rounds
            return 0.0
        if not self.worker.opened:  # still waiting for the store (Worker.wait_for_store)
            return POLL
        if is_idle(self.worker):
            if self.fast_forward is not None and self.fast_forward():
                return 0.0
            self._stop_burst("burst: no job is due")
            self.stop(0.0)  # done: no more rounds
            return 0.0
        return POLL

    def failed(self, exc: Exception) -> float:
        """The store is away: the worker copes; look again shortly. A refused token is not
        an outage (through ``tether://`` the idle check lists jobs, which a worker token may
        not): looking again would never end the burst, so it ends now, as failed."""
        if isinstance(exc, AuthError):
            self.worker.shutdown.force(f"burst: cannot tell when it is idle: {exc}", fatal=exc)
            self.stop(0.0)
            return 0.0
        return POLL


#: Jobs read per round trip by :func:`tally` (at most ``limits.MAX_PAGE``).
TALLY_PAGE = 1000


def tally(store: Admin, ran: list[int], queues: Sequence[str]) -> dict[str, int]:
    """How the jobs a burst ran ended, by status, and (``"left"``) how many pending jobs are
    left in ``queues`` (retries in back-off, delayed jobs, paused queues)."""
    counts: dict[str, int] = {}
    # A page of jobs per round trip, not one job: through tether:// a round trip per job
    # made the tally of a long burst take as long as the burst.
    for start in range(0, len(ran), TALLY_PAGE):
        page = ran[start:start + TALLY_PAGE]
        found = {job.id: job.status for job in store.get_jobs(page)}
        for job_id in page:
            status = found.get(job_id, "deleted")
            counts[status] = counts.get(status, 0) + 1
    counts["left"] = sum(c.count for c in store.counts()
                         if c.status == "pending" and c.queue in queues)
    return counts
