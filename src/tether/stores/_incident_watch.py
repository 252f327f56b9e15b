"""What a store's watch for server incidents (a failover, a restart, data lost with it) is made
of, whatever the server: PostgreSQL's :class:`~tether.stores._postgres.watch.FailoverWatch` and
Redis's :class:`~tether.stores._redis.watch.ServerWatch` keep only what they look at and judge.

Invariant: a store looks at its server at most once per ``interval`` seconds on its hot calls,
and again at the next one after :meth:`IncidentWatch.soon` (a connection error or a new
connection: a failover or restart cuts every connection). Every store that lives through an
incident records it in ``noticed``; each process logs it once (keyed by where, what and which
incident), at ERROR when tether's data was lost, however many of its stores (a worker's
fetcher, heartbeater, maintainer) notice it. Counting it for ``tether stats`` is the server's
side (identity.sql, observe.lua): once per incident, whichever process sees it first.
"""

from __future__ import annotations

import logging
import threading
import time

#: Seconds between two looks at the server on the hot path.
CHECK_INTERVAL = 5.0

#: Incidents already logged by this process, as (where, what, which): several stores of one
#: process notice the same incident; one line per process is enough.
_reported: set[tuple[str, str, str]] = set()
_reported_lock = threading.Lock()


def first_report(where: str, what: str, which: str) -> bool:
    """True the first time this process meets (where, what, which), False ever after."""
    key = (where, what, which)
    with _reported_lock:
        if key in _reported:
            return False
        _reported.add(key)
        return True


class IncidentWatch:
    """When to look (:meth:`due`, :meth:`soon`), the server's epoch as last seen (a new one
    means tether's data was replaced) and what this store noticed; subclasses add what they
    compare and hold ``_lock`` while they change it."""

    def __init__(self, where: str, log: logging.Logger) -> None:
        self.where = where  # the server, redacted, and the store's namespace, for log lines
        self.log = log
        self.interval = CHECK_INTERVAL
        self.epoch = ""
        self._due = 0.0
        self._lock = threading.Lock()
        #: What this store noticed so far ("data_loss", or the store's own kinds), oldest first.
        self.noticed: list[str] = []

    def due(self) -> bool:
        """True (once) when it is time to look again; the caller then looks."""
        now = time.monotonic()
        with self._lock:
            if now < self._due:
                return False
            self._due = now + self.interval
            return True

    def soon(self) -> None:
        """Look at the next chance (after a connection error: the server may have failed over
        or restarted)."""
        with self._lock:
            self._due = 0.0

    def _take(self, epoch: str | None, kind: str | None) -> None:
        """With ``_lock`` held: the epoch the look found (if any) and what it noticed."""
        if epoch:
            self.epoch = epoch
        if kind is not None:
            self.noticed.append(kind)

    def _say_lost(self, epoch: str, text: str) -> None:
        """Log a data loss at ERROR, once per process and epoch; ``text`` has one ``%s``,
        for :attr:`where`."""
        if first_report(self.where, "lost", epoch):
            self.log.error(text, self.where)


class Watched:
    """A store with an incident watch (``_watch``): how often it looks, settable per store
    (tests look on every call)."""

    _watch: IncidentWatch

    @property
    def check_interval(self) -> float:
        """Seconds between looks for a server incident (a failover, a restart, data lost) on
        the store's hot calls (its watch module says which)."""
        return self._watch.interval

    @check_interval.setter
    def check_interval(self, seconds: float) -> None:
        self._watch.interval = seconds


__all__ = ["CHECK_INTERVAL", "IncidentWatch", "Watched", "first_report"]
