"""The signal watch: brings the heartbeat forward when the store says it is worth it (#22).

A cancel of a running job, or a queue pause, used to reach the worker at its next heartbeat
or paused-set read: up to ``heartbeat_every`` (10 s at the defaults) later. The store now
signals the job's holder (or every worker, for a pause) on its notification path (NOTIFY,
pub/sub, SQLite's data version, a condition), and this loop long-polls for those signals.

Invariants:

* A signal carries no decision. It only wakes the heartbeater (and re-reads the paused set
  at the next claim); the heartbeat, fenced as always, is what says ``cancel_requested``. A
  lost signal costs latency (the heartbeat's interval), never correctness; a spurious one
  costs one heartbeat.
* It waits on the worker's main store, whose listening connection (or subscription) the
  fetcher's ``wait_for_jobs`` already uses: no extra connection per worker.
* No store failure ends it: a failed wait is retried after a short pause, while the
  heartbeat goes on at its interval; so is a wait that says "nothing" long before its
  timeout (a closed store), so the loop never spins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tether import _clock as clock
from tether._loop import Loop
from tether.stores._contract import Leases

log = logging.getLogger("tether.heartbeat")

#: How long one wait_for_signal call blocks (a stop is seen within it; the thread is daemon).
SIGNAL_WAIT = 1.0
#: After a failed wait, how long before the next.
_RETRY = 0.5


class SignalWatch(Loop):
    """Calls ``on_signal`` each time the store signals worker ``owner``."""

    def __init__(self, store: Leases, owner: str, on_signal: Callable[[], None], *,
                 on_fatal: Callable[[BaseException], None]) -> None:
        super().__init__("tether-signals", log=log, on_fatal=on_fatal, stop_wait=0.0,
                         died="signal watch died; stopping the worker")
        self.store = store
        self.owner = owner
        self.on_signal = on_signal
        self.signals = 0  # signals received, for tests and benchmarks

    def round(self) -> float:
        began = clock.monotonic()
        if self.store.wait_for_signal(self.owner, SIGNAL_WAIT):
            if not self.stopping:
                self.signals += 1
                self.on_signal()
            return 0.0
        # "Nothing" long before the timeout: a closed store answers at once; do not spin.
        return _RETRY if clock.monotonic() - began < SIGNAL_WAIT / 2 else 0.0

    def failed(self, exc: Exception) -> float:
        """A store hiccup (or a store closed under us at shutdown): the heartbeat covers it."""
        log.debug("waiting for signals failed (%s); retrying", exc)
        return _RETRY


__all__ = ["SIGNAL_WAIT", "SignalWatch"]
