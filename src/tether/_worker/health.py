"""How a worker's side loops treat a failing store call, and whether the store is busy.

Invariants:

* One store call failing never stops a side loop. :func:`classify` sorts any exception a store
  call raised into *gone* (:class:`~tether._errors.StoreGone`: the data is gone, the worker must
  stop), *transient* (:class:`~tether._errors.StoreUnavailable`: wait and retry) or *other*
  (anything else, even a driver's raw exception or a bug in a store: log, back off, retry;
  the lease protocol, not this process, keeps the jobs safe meanwhile).
* :class:`StoreHealth` notices when the store has been failing continuously for longer than
  ``lease_ttl / 3`` and says so once, at WARNING, with the store's own message (SQLite says
  another process holds its write lock, perhaps a paused worker that freezes every process on
  the file); and once at INFO when it answers again. A call that *hangs* that long (SQLite
  waits out its busy timeout, 30 s by default; a frozen server holds a networked store's call)
  is reported while it hangs, with what to suspect on *that* store (:data:`SUSPECTS`).
  Per-call failures are logged by the loops once per streak (and every 100th), so an outage
  of an hour is a handful of lines, not thousands.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

from tether import _clock as clock
from tether._errors import StoreGone, StoreUnavailable

log = logging.getLogger("tether.worker")

Kind = Literal["gone", "transient", "other"]

#: What keeps a store call hanging, by store kind: the waiting WARNING names the right store
#: (it once said "SQLite: another process holds the write lock" on a frozen PostgreSQL).
SUSPECTS = {
    "sqlite": "SQLite: another process holds the write lock, perhaps a paused worker",
    "postgres": "PostgreSQL: the server or the network to it is down or frozen, or another "
                "session holds a lock this call needs",
    "redis": "Redis: the server or the network to it is down or frozen, or a long command or "
             "script blocks the server",
    "memory": "memory store: another thread holds its lock",
    "tether": "the tether server: the server or the network to it is down or frozen, or the "
              "store behind it is slow",
}


def classify(exc: BaseException) -> Kind:
    if isinstance(exc, StoreGone):
        return "gone"
    if isinstance(exc, StoreUnavailable):
        return "transient"
    return "other"


def worth_logging(streak: int) -> bool:
    """Log the first failure of a streak, then every 100th: a reminder, not a flood."""
    return streak == 1 or streak % 100 == 0


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a driver's message may span several)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class StoreHealth:
    """Shared by every loop of one worker; thread-safe and cheap on the success path."""

    def __init__(self, threshold: float, kind: str = "") -> None:
        self.threshold = threshold
        self._suspect = SUSPECTS.get(kind, f"{kind or 'the'} store")
        self._lock = threading.Lock()
        self._failing_since: float | None = None
        self._warned: Literal["", "waiting", "failed"] = ""
        self.warnings = 0

    @property
    def failing(self) -> bool:
        """True while the last store call of any loop failed transiently."""
        return self._failing_since is not None

    def ok(self) -> None:
        """A store call succeeded."""
        if self._failing_since is None:
            return
        with self._lock:
            since, warned = self._failing_since, self._warned
            self._failing_since, self._warned = None, ""
        if since is not None and warned:
            log.info("the store answers again after %.1fs of failures", clock.monotonic() - since)

    def failed(self, exc: BaseException, sent_at: float) -> None:
        """A store call sent at ``sent_at`` (monotonic) failed with ``exc``."""
        if not isinstance(exc, StoreUnavailable):
            return
        now = clock.monotonic()
        with self._lock:
            if self._failing_since is None or sent_at < self._failing_since:
                self._failing_since = sent_at
            failing_for = now - self._failing_since
            if self._warned == "waiting":  # warned while the call hung: now we know why
                self._warned = "failed"
                log.warning("the store says: %s", exc)
                return
            if self._warned or failing_for <= self.threshold:
                return
            self._warned = "failed"
            self.warnings += 1
        log.warning("store calls have been failing for %.1fs, longer than lease_ttl / 3 "
                    "(%.1fs): %s; leases are at risk and will be given up when they are not "
                    "renewed within lease_ttl", failing_for, self.threshold, exc)

    def waiting(self, since: float | None) -> None:
        """A store call sent at ``since`` has not returned yet (the lease watch asks): one
        that hangs longer than the threshold (SQLite waiting for a write lock held by a
        paused process, a dead connection) is reported before it fails, if it ever does."""
        if since is None or self._warned:
            return
        waited = clock.monotonic() - since
        if waited <= self.threshold:
            return
        with self._lock:
            if self._warned:
                return
            self._warned = "waiting"
            self.warnings += 1
            if self._failing_since is None or since < self._failing_since:
                self._failing_since = since
        log.warning("a store call has been waiting for %.1fs, longer than lease_ttl / 3 "
                    "(%.1fs): the store is busy or unreachable (%s); leases are at risk and "
                    "will be given up when they are not renewed within lease_ttl", waited,
                    self.threshold, self._suspect)
