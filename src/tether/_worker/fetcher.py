"""The fetcher: claims jobs for a worker's free slots and hands each claim to its pool.

Invariants:

* One ``claim`` write per batch, at most ``claim_batch`` jobs and no more than the registry
  lets it hold (``Registry.wait_free``: the free slots, plus what a thread pool expects to
  start soon), so the registry and the pool, not the fetcher, bound what a worker holds.
* A claim that failed transiently may have happened with its reply lost: the next claim
  reuses its request id and its send time (while that is less than ``lease_ttl`` old), so the
  store hands those jobs back to us and their trust window counts from the first send.
* Only ``StoreGone`` stops it (the worker with it). Any other failure is logged once per streak
  (and every 100th) and retried with a backoff capped at :data:`FETCH_BACKOFF_MAX`, which
  bounds how long after the store's return an idle worker resumes. A bug of its own ends the
  loop and stops the worker (``tether._loop``).
* Paused queues are not claimed from (``paused.py``); when all are paused it only waits.
* Fleet-wide limits (``flow``: the app's task and queue limits) go with every claim; the
  store enforces them. With none declared the claim is exactly the plain one.
* Per-queue slots (``-q images=2``): each queue with a count is its own *lane*, claimed for
  no more than its count less what it holds (running or claimed ahead); the queues without a
  count share one lane of the slots left. So a queue's long jobs never take every slot. A
  lane that was full wakes the fetcher when one of its handlers returns (``store.notify``
  of its queue: the fetcher may be waiting on the store, which no local slot would wake).
* A store that refuses writes because it is full (:class:`~tether._errors.StoreFull`: Redis
  at its maxmemory) gets no claims: a job claimed then could be neither renewed nor finished
  and would only wedge the queue. The store refuses the claim itself until it has room (the
  fetcher only backs off and tries again); the heartbeater and the completer go on renewing
  and finishing what the worker holds as far as the store allows. Said once at WARNING when
  it starts and once at INFO when a claim goes through again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from tether import _clock as clock
from tether._config import Settings
from tether._errors import AuthError, StoreFull
from tether._loop import Loop
from tether._worker.health import StoreHealth, classify, one_line, worth_logging
from tether._worker.paused import PausedQueues
from tether._worker.pool import Pool
from tether._worker.registry import Registry
from tether._worker.shutdown import Shutdown
from tether.stores._contract import FlowLimit, JobRecord, Store
from tether.stores._replay import new_request_id

log = logging.getLogger("tether.worker")

#: Longest pause between claims while the store fails: it bounds how long after the store's
#: return an idle worker resumes.
FETCH_BACKOFF_MAX = 0.5


class Fetcher(Loop):
    def __init__(
        self,
        store: Store,
        owner: str,
        queues: Sequence[str],
        settings: Settings,
        registry: Registry,
        pool: Pool,
        shutdown: Shutdown,
        pauses: PausedQueues,
        health: StoreHealth,
        *,
        start: Callable[[list[JobRecord], float], None],
        on_fatal: Callable[[BaseException], None],
        flow: Sequence[FlowLimit] = (),
        caps: Mapping[str, int] | None = None,
        concurrency: int = 0,
    ) -> None:
        """``start(jobs, trusted_until)``: hand one claim's jobs to the pool (the worker's: it
        knows the tasks), one call per claim; the fetcher dispatches the claim after."""
        super().__init__("tether-fetcher", log=log, on_fatal=on_fatal, died="fetcher died")
        self.store = store
        self.owner = owner
        self.queues = queues
        self.settings = settings
        self.registry = registry
        self.pool = pool
        self.shutdown = shutdown
        self.pauses = pauses
        self.health = health
        self._start = start
        self._on_fatal = on_fatal
        self._gone = False  # StoreGone: the worker stops, and so does this loop at once
        self._backoff, self._streak = 0.05, 0
        #: (request id, send time) of a claim that failed transiently, by lane (``()``
        #: without per-queue slots): reused by the lane's next claim.
        self._replays: dict[tuple[str, ...], tuple[str, float]] = {}
        self._full = False  # the store refused our claims for lack of room (StoreFull)
        self.flow = tuple(flow)
        #: Per-queue slot counts; the queues without one share ``shared`` slots.
        self.caps = dict(caps or {})
        self.shared = concurrency - sum(self.caps.values())
        if self.caps:
            registry.on_lane_free = self._lane_freed

    @property
    def stopping(self) -> bool:
        return self._gone or self.shutdown.stopping

    def round(self) -> float:
        """Wait for free slots, claim, hand the jobs to the pool; waits happen inside."""
        settings, pool, shutdown = self.settings, self.pool, self.shutdown
        pool.before_claim()
        free = self.registry.wait_free(pool.wait_at_most(0.5), lambda: shutdown.stopping)
        if free <= 0 or shutdown.stopping:
            return 0.0
        active = self.pauses.active()
        if not active:  # every queue of ours is paused
            shutdown.changed.wait(self.pauses.every)
            return 0.0
        if self.caps:
            return self._round_lanes(active, free)
        got = self._claim((), active, min(free, settings.claim_batch))
        if got is None:
            return 0.0
        jobs, sent = got
        if not jobs:
            try:
                self.store.wait_for_jobs(self.queues, pool.wait_at_most(settings.poll_interval))
            except Exception as exc:
                self._failure(exc, clock.monotonic())
            return 0.0
        self._start(jobs, sent + settings.lease_ttl)
        pool.dispatch()
        return 0.0

    def _claim(self, key: tuple[str, ...], queues: Sequence[str], limit: int) \
            -> tuple[list[JobRecord], float] | None:
        """One claim, with the request id and send time of the last failed claim of the same
        lane (``key``; ``()`` without lanes) while that is less than ``lease_ttl`` old: the
        jobs and the send time, or None when it failed (logged and backed off here)."""
        settings = self.settings
        now = clock.monotonic()
        replay = self._replays.pop(key, None)
        if replay is not None and now - replay[1] >= settings.lease_ttl:
            replay = None  # whatever it claimed has expired by now
        request_id, sent = replay or (new_request_id(), now)
        try:
            jobs = self.store.claim(self.owner, queues, limit, settings.lease_ttl,
                                    request_id=request_id, flow=self.flow)
        except Exception as exc:
            if classify(exc) == "transient" and not isinstance(exc, StoreFull):
                # The claim may have happened. (A StoreFull claim was refused whole: replaying
                # its id and send time after a long refusal would hand the next jobs a trust
                # window that is nearly over.)
                self._replays[key] = (request_id, sent)
            self._failure(exc, now)
            return None
        self._backoff, self._streak = 0.05, 0
        self.health.ok()
        if self._full:
            self._full = False
            log.info("the store has room again: claiming again")
        return jobs, sent

    def _failure(self, exc: BaseException, now: float) -> None:
        """A failed store call of this loop: stop the worker on StoreGone, else count, log
        and back off."""
        if classify(exc) == "gone":
            self._gone = True
            self._on_fatal(exc)
            return
        self._streak += 1
        if isinstance(exc, StoreFull):
            self._refused(exc, now)
        else:
            self._failed(exc, now, self._streak)
        self.shutdown.changed.wait(self._backoff)
        self._backoff = min(self._backoff * 2, FETCH_BACKOFF_MAX)

    # -- per-queue lanes ------------------------------------------------------------------------
    def lanes(self, active: Sequence[str], free: int) -> tuple[list[tuple[list[str], int]],
                                                               set[str]]:
        """The claims to make now: (queues, how many) per lane with room, and the queues of
        the lanes that are full."""
        held = self.registry.held_by_queue()
        batch = min(free, self.settings.claim_batch)
        out: list[tuple[list[str], int]] = []
        full: set[str] = set()
        shared = [q for q in active if q not in self.caps]
        for queue in active:
            cap = self.caps.get(queue)
            if cap is None:
                continue
            room = min(cap - held.get(queue, 0), batch)
            if room > 0:
                out.append(([queue], room))
            else:
                full.add(queue)
        if shared:
            room = min(self.shared - sum(held.get(q, 0) for q in shared), batch)
            if room > 0:
                out.append((shared, room))
            else:
                full.update(shared)
        return out, full

    def _round_lanes(self, active: Sequence[str], free: int) -> float:
        """:meth:`round` with per-queue slots: one claim per lane with room."""
        settings, pool = self.settings, self.pool
        lanes, full = self.lanes(active, free)
        self.registry.watch_lanes(full)
        claimed = False
        for queues, room in lanes:
            got = self._claim(tuple(queues), queues, room)
            if got is None:
                return 0.0
            jobs, sent = got
            if jobs:
                self._start(jobs, sent + settings.lease_ttl)
            claimed |= bool(jobs)
        if claimed:
            pool.dispatch()
            return 0.0
        # Every queue, full lanes too: a returning handler of a full lane wakes us by notifying
        # its queue (_lane_freed); an enqueue to a full lane costs one claim of the others.
        self.store.wait_for_jobs(self.queues, pool.wait_at_most(settings.poll_interval))
        return 0.0

    def _lane_freed(self, queues: list[str]) -> None:
        """A full lane has room again: wake this worker's fetcher if it waits on the store.
        Never raises (a handler thread calls it)."""
        try:
            self.store.notify(queues)
        except Exception as exc:  # the next poll finds the room anyway
            log.debug("could not wake the fetcher for %s: %s", queues, one_line(exc))

    def _refused(self, exc: StoreFull, sent: float) -> None:
        self.health.failed(exc, sent)
        if not self._full:
            self._full = True
            log.warning("the store is full (%s): not claiming new jobs until it has room; the "
                        "jobs this worker holds are renewed and finished as far as it allows",
                        one_line(exc))

    def _failed(self, exc: BaseException, sent: float, streak: int) -> None:
        self.health.failed(exc, sent)
        transient = classify(exc) == "transient"
        level = logging.WARNING if transient else logging.ERROR
        if not worth_logging(streak):
            level = logging.DEBUG
        # A refused token (tether://, revoked by a reload) is the server's one clear line: a
        # traceback of the client's call stack would only bury it.
        trace = not transient and streak == 1 and not isinstance(exc, AuthError)
        log.log(level, "fetching failed %d time(s) in a row (%s); retrying every %.1fs at most",
                streak, one_line(exc), FETCH_BACKOFF_MAX, exc_info=trace)
