"""Which of a worker's queues it may claim from now: its queues minus the paused ones.

Pausing is an operator's switch (``tether pause QUEUE``) whose state lives in the store, so
every worker on every machine sees it. The fetcher asks here before each claim; the paused set
is re-read at most every ``every`` seconds (one small read, off the claim statement), so a
pause takes effect within that time and the claim SQL stays exactly as it is. A pause also
signals every worker (``signals.py``), which re-reads the set before its next claim: then a
pause takes effect within the store's delivery time. When the set
cannot be read, the last known one stands: a store hiccup neither pauses nor resumes anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tether import _clock as clock
from tether.stores._contract import Leases

log = logging.getLogger("tether.worker")
PAUSE_CHECK_EVERY = 2.0


class PausedQueues:
    def __init__(self, store: Leases, queues: Sequence[str],
                 every: float = PAUSE_CHECK_EVERY) -> None:
        self.store = store
        self.queues = list(queues)
        self.every = every
        self.paused: frozenset[str] = frozenset()
        self._next = 0.0

    def refresh(self) -> None:
        """Re-read the paused set before the next claim (a pause signal; thread-safe)."""
        self._next = 0.0

    def active(self) -> list[str]:
        """The queues to claim from now (refreshing the paused set when it is due)."""
        now = clock.monotonic()
        if now >= self._next:
            self._next = now + self.every
            try:
                paused = frozenset(self.store.paused_queues()) & set(self.queues)
            except Exception as exc:  # any store failure: the claim that follows says more
                log.debug("could not read paused queues (%s); keeping the last known", exc)
            else:
                if paused != self.paused:
                    for q in sorted(paused - self.paused):
                        log.info("queue %s is paused: not claiming from it", q)
                    for q in sorted(self.paused - paused):
                        log.info("queue %s resumed", q)
                    self.paused = paused
        if not self.paused:
            return self.queues
        return [q for q in self.queues if q not in self.paused]
