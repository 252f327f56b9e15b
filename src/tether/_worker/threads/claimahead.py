"""Claiming ahead of free slots (thread pool), bounded by what the worker can start soon.

Why: with ``-c 10`` a worker that claims only its free slots moves at most 10 jobs per claim
round trip and writes as few per finish batch, so a queue of short jobs drains at a fraction
of what the store can do. Claiming ahead fills each round trip instead.

Invariants (what keeps it safe):

* a job claimed ahead holds a fenced lease from its claim, is renewed by the batched
  heartbeat and counted in the recovery bound exactly like a running job (it is a registry
  entry from the claim on);
* the allowance is what the worker expects to *start* within :data:`HORIZON`: the slots that
  are cycling (not held by a handler already running longer than the horizon) times the
  horizon over the recent mean handler time (an EWMA), at most ``claim_batch``. No handler
  time measured yet, or every slot held by a long handler: no claim ahead at all;
* no head-of-line blocking: a claimed-ahead job that has not started within
  :data:`HAND_BACK_AFTER` is handed back (the ``released`` outcome with no delay keeps its
  ``run_at``, so it stays first in line for any worker with a free slot), also while the worker
  drains; a forced stop hands back every queued job at once. A drain runs the queued jobs that
  start in time, like the running ones: they were claimed before the signal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tether import _clock as clock
from tether._worker.completer import Completer, Pending
from tether._worker.registry import LAG, Registry, Running
from tether.stores._contract import Outcome

log = logging.getLogger("tether.worker")

#: A job is claimed ahead only if the worker expects to start it within this many seconds.
HORIZON = 0.05
#: A claimed-ahead job still waiting for a slot after this many seconds is handed back.
HAND_BACK_AFTER = 0.5
#: Weight of the newest handler time in the mean (about the last 20 jobs count).
ALPHA = 0.1
#: Floor of the mean handler time (a no-op's is a few microseconds; the allowance is capped
#: by ``claim_batch`` anyway).
MIN_RUN = 1e-5
#: Handlers measured shorter than this (mean) run in batches: a handler thread takes up to
#: BATCH_MOST queued jobs at once, about this many seconds of them (``Registry.take_batch``).
BATCH_UNDER = LAG / 10
BATCH_MOST = 32


class ClaimAhead:
    def __init__(self, registry: Registry, limit: int, completer: Completer,
                 notify: Callable[[], None]) -> None:
        self.registry = registry
        self.limit = limit
        self.mean: float | None = None  # EWMA of handler run time, seconds
        self.handed_back = 0
        self._completer = completer
        self._notify = notify

    def observe(self, seconds: float) -> None:
        """One handler's run time (called from handler threads; a lost update under a race
        only delays the mean by one sample)."""
        mean = self.mean
        self.mean = seconds if mean is None else mean + ALPHA * (seconds - mean)

    def batch(self) -> int:
        """How many queued jobs a handler thread takes at once: one, unless handlers are
        measured well under :data:`~tether._worker.registry.LAG` (then a batch runs for
        about :data:`BATCH_UNDER`)."""
        mean = self.mean
        if mean is None or mean >= BATCH_UNDER:
            return 1
        return min(BATCH_MOST, int(BATCH_UNDER / max(mean, MIN_RUN)))

    def update(self, now: float) -> None:
        """Set the registry's claim-ahead allowance for the next claim."""
        mean = self.mean
        reg = self.registry
        if mean is None:
            reg.ahead = 0
            return
        cycling = reg.capacity - reg.stuck(now - HORIZON)
        reg.ahead = max(0, min(self.limit, int(cycling * HORIZON / max(mean, MIN_RUN))))

    def wake(self, queued: int) -> int:
        """How many handler threads to wake for ``queued`` new jobs: enough for the jobs to
        start within :data:`HORIZON` at the mean handler time (one, for tiny handlers)."""
        mean = self.mean
        if mean is None:
            return queued
        return int(queued * mean / HORIZON) + 1

    def wait_at_most(self, seconds: float) -> float:
        """``seconds``, shortened so that the fetcher looks at the backlog on time."""
        return max(0.01, min(seconds, self.next_check(clock.monotonic())))

    def next_check(self, now: float) -> float:
        """Seconds until the oldest queued job needs a look: a nudge to wake another handler
        thread, or its hand-back (inf if none is queued)."""
        oldest = self.registry.oldest_queued()
        if oldest is None:
            return float("inf")
        return max(0.0, oldest + LAG - now)

    def hand_back_stale(self, now: float) -> int:
        """Wake a handler thread for a job kept waiting while a slot is free; hand back every
        queued job that waited longer than :data:`HAND_BACK_AFTER`."""
        oldest = self.registry.oldest_queued()
        if oldest is None:
            return 0
        if now - oldest >= LAG:
            self.registry.nudge(LAG)
        if now - oldest < HAND_BACK_AFTER:
            return 0
        stale = self.registry.unqueue(now - HAND_BACK_AFTER)
        self._hand_back(stale, f"not started within {HAND_BACK_AFTER}s of its claim")
        return len(stale)

    def _hand_back(self, entries: list[Running], why: str) -> None:
        if not entries:
            return
        self.handed_back += len(entries)
        log.debug("handing back %d job(s) claimed ahead: %s", len(entries), why)
        batch = []
        for entry in entries:
            entry.extra["why"] = why
            batch.append(Pending(entry, Outcome(entry.lease, "released"), "released"))
        # Written here, not queued to the completer: the other workers are woken only once
        # the jobs are pending again, or they would find nothing and sleep a poll interval.
        if self._completer.write(batch).applied:
            self._notify()
