"""The heartbeater: one batched, fenced lease renewal per worker per interval.

Invariants:

* It runs on its own thread with its own store connection, so a handler that blocks its thread
  or its event loop, or a fetcher stuck on a busy pool, cannot starve the renewal.
* One ``Store.heartbeat`` call renews *every* in-flight lease of the worker: the cost is one
  statement per interval, whatever the number of jobs in flight.
* A lease the store does not renew is lost for good: the handler is interrupted
  (``LeaseInterrupted``; async handlers are cancelled) and ``lease_lost`` is emitted. The
  handler's later writes are then rejected by the store's fence anyway; interrupting only stops
  wasted work.
* When the store cannot be reached, a lease whose local trust window (see registry) has run out
  is treated as lost in exactly the same way, so a partitioned worker stops by itself no later
  than the reaper can hand its job to someone else. A separate watch thread enforces the window,
  so it holds even while a heartbeat call hangs on a dead connection.
* A lease whose outcome is being written (or was written) when the reply comes back is not
  reported lost: the heartbeat took its snapshot of the leases before the completer's
  ``finish`` landed, so "not held" there means "finished by us", not "taken from us". If the
  outcome was in fact stale, the completer's fenced write says so.
* :meth:`Heartbeater.nudge` (the store's signal, ``signals.py``) sends the next heartbeat now
  instead of at the interval: the same fenced call, only sooner. A nudge that lands while a
  heartbeat is in flight sends one more right after it (that one may have been read before
  the change the signal is about).
* No exception from one heartbeat call stops the loop (see ``health.py``); ``StoreGone``
  stops the worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tether import _clock as clock
from tether._errors import JobCancelled, LeaseInterrupted
from tether._events import Events
from tether._loop import Loop
from tether._worker.health import StoreHealth, classify, one_line, worth_logging
from tether._worker.registry import Registry, Running, Settlement
from tether.stores._contract import Leases

log = logging.getLogger("tether.heartbeat")


class Heartbeater(Loop):
    """The renewal loop; its lease watch (:class:`LeaseWatch`) starts and stops with it."""

    def __init__(
        self,
        store: Leases,
        owner: str,
        registry: Registry,
        events: Events,
        *,
        lease_ttl: float,
        interval: float,
        on_fatal: Callable[[BaseException], None],
        health: StoreHealth | None = None,
    ) -> None:
        super().__init__("tether-heartbeat", log=log, on_fatal=on_fatal,
                         died="heartbeater died; stopping the worker")
        self.store = store
        self.health = health or StoreHealth(float("inf"))
        self.owner = owner
        self.registry = registry
        self.events = events
        self.lease_ttl = lease_ttl
        self.interval = interval
        self._on_fatal = on_fatal
        self.watch = LeaseWatch(self, on_fatal)
        self.beats = 0  # statements sent, for tests and benchmarks
        self.failures = 0
        self._streak = 0  # heartbeats failed in a row (only the first is logged at WARNING)
        self._in_flight_since: float | None = None  # when the pending heartbeat was sent
        self._nudged = threading.Event()  # beat now (a signal), or stop

    def start(self) -> None:
        super().start()
        self.watch.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop both loops; wait for them up to ``timeout`` seconds in all."""
        deadline = clock.monotonic() + (self.stop_wait if timeout is None else timeout)
        self.watch.stop(0.0)
        super().stop(timeout)
        self.watch.join(max(0.0, deadline - clock.monotonic()))

    def nudge(self) -> None:
        """Send the next heartbeat now (thread-safe)."""
        self._nudged.set()

    def wake(self) -> None:
        self._nudged.set()

    def round(self) -> float:
        self._nudged.clear()  # a nudge from here on may concern what this beat reads
        wait = self.run_once()
        if not self.stopping:
            self._nudged.wait(wait)
        return 0.0

    def run_once(self) -> float:
        """Send one heartbeat; returns how long to wait before the next one."""
        entries = self.registry.to_renew()
        by_lease = {e.lease: e for e in entries}
        sent_at = clock.monotonic()
        self._in_flight_since = sent_at
        try:
            result = self.store.heartbeat(self.owner, list(by_lease), self.lease_ttl)
        except Exception as exc:
            self._in_flight_since = None
            if classify(exc) == "gone":
                self._on_fatal(exc)
                return self.interval
            self.failures += 1
            self._streak += 1
            self.health.failed(exc, sent_at)
            (log.warning if worth_logging(self._streak) else log.debug)(
                "heartbeat failed (%s); %d lease(s) at risk", one_line(exc), len(entries))
            self._expire_untrusted(entries, clock.monotonic())
            return min(self.interval, 1.0)
        self._in_flight_since = None
        self.health.ok()
        self._streak = 0
        self.beats += 1
        self.events.emit("heartbeat", worker=self.owner,
                         detail={"rtt": clock.monotonic() - sent_at, "leases": len(by_lease)})
        for lease, entry in by_lease.items():
            if lease in result.lost:
                if entry.settlement is not Settlement.OPEN:
                    continue  # our own outcome landed first (or is landing): not a loss
                self._lost(entry, "the store no longer holds this lease for us")
            else:
                entry.trusted_until = sent_at + self.lease_ttl
                if lease in result.cancel_requested:
                    entry.interrupt(JobCancelled)
        return self.interval

    def _expire_untrusted(self, entries: list[Running], now: float) -> None:
        for entry in entries:
            if entry.trusted_until <= now:
                self._lost(entry, "not renewed within lease_ttl (store unreachable or slow)")

    def _lost(self, entry: Running, why: str) -> None:
        if entry.lost:
            return
        entry.lost = True
        log.debug("lease lost: job %s attempt %s: %s; interrupting the handler",
                  entry.ctx.id, entry.ctx.attempt, why)
        entry.interrupt(LeaseInterrupted)
        self.events.emit("lease_lost", job_id=entry.ctx.id, attempt=entry.ctx.attempt,
                         worker=self.owner, detail={"why": why, "task": entry.ctx.job.task,
                                                    "queue": entry.ctx.job.queue})


class LeaseWatch(Loop):
    """Expires leases whose trust window ended, whatever the heartbeat call is doing (it may
    hang on a dead connection): every ``min(interval, 0.25)`` seconds, on its own thread."""

    def __init__(self, beat: Heartbeater, on_fatal: Callable[[BaseException], None]) -> None:
        every = min(beat.interval, 0.25)
        super().__init__("tether-lease-watch", log=log, on_fatal=on_fatal, first_wait=every,
                         died="lease watch died; stopping the worker")
        self.beat = beat
        self.every = every

    def round(self) -> float:
        beat = self.beat
        beat.health.waiting(beat._in_flight_since)
        beat._expire_untrusted(beat.registry.to_renew(), clock.monotonic())
        return self.every

    def failed(self, exc: Exception) -> float:
        """An event callback's bug must not end the watch."""
        log.exception("lease watch: could not expire untrusted leases")
        return self.every
