"""The reaper: takes back leases whose holder stopped renewing them.

Invariants:

* One ``Store.reap_expired`` call per sweep: a single set-based write moves every expired
  ``running`` job through the same retry / dead-letter rule as a reported failure. It never reads
  ids and then writes them, so it cannot race a heartbeat or a completion: a row renewed or
  finished before the write no longer matches it.
* Several reapers at once are safe (the first write moves a row out of ``running``), so running
  one per worker without election costs queries, never correctness.
* It sleeps until the earliest lease expiry it knows of (plus ``stall_grace``), and never longer
  than ``reap_every`` (capped to ``lease_ttl``), so a lease granted after its last look is still
  seen before it expires: recovery does not wait for a coarse tick.
"""

from __future__ import annotations

import logging

from tether._events import Events
from tether.stores._contract import Maintenance, Reaped

log = logging.getLogger("tether.reaper")


class Reaper:
    def __init__(
        self,
        store: Maintenance,
        events: Events,
        *,
        stall_grace: float,
        interval: float,
        batch: int = 1000,
    ) -> None:
        self.store = store
        self.events = events
        self.stall_grace = stall_grace
        self.interval = interval
        self.batch = batch
        self.total = 0

    def run_once(self, *, now: float | None = None) -> list[Reaped]:
        """One sweep (repeated while full batches come back). Returns what was taken back."""
        reaped: list[Reaped] = []
        while True:
            chunk = self.store.reap_expired(self.stall_grace, now=now, limit=self.batch)
            reaped.extend(chunk)
            if len(chunk) < self.batch:
                break
        if reaped:
            self.total += len(reaped)
            log.info("released stale running jobs count=%d", len(reaped))
            for r in reaped:
                self.events.emit("stalled", job_id=r.job_id, attempt=r.attempt, worker=r.owner,
                                 detail={"status": r.status, "stall_count": r.stall_count})
        return reaped

    def next_wait(self) -> float:
        """Seconds until the next sweep is worth doing (the store's clock decides expiry)."""
        expiry = self.store.next_lease_expiry()
        if expiry is None:
            return self.interval
        due_in = expiry + self.stall_grace - self.store.now()
        # A hair past expiry: the reap predicate is strict (lease_until < now - grace).
        return max(0.01, min(self.interval, due_in + 0.01))
