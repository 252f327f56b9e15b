"""The checkout policy both PostgreSQL pools share: :class:`pool.ConnectionPool` (threads) and
:class:`apool.AsyncPool` (one event loop).

The two differ only in how they wait, connect and close (a thread's condition or the loop's,
blocking calls or awaited ones), so those stay theirs; which connection a caller gets, when a
new one may be opened and when a returned one is kept live here, once, so the two cannot drift:
the most recently used idle connection first (warm, least likely dead), a dead idle one
dropped without a round trip (:func:`alive`), a new one only below ``max_size``, a wait that
ends in ``OperationalError`` (mapped to StoreUnavailable) after ``timeout``, and only a clean
idle connection kept.
"""

from __future__ import annotations

import select
from collections import deque
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from tether import _clock as clock
from tether._errors import StoreUnavailable

C = TypeVar("C", psycopg.Connection[Any], psycopg.AsyncConnection[Any])


class Slots(Generic[C]):
    """At most ``max_size`` connections, idle or handed out. Every method runs under the
    pool's own lock and never blocks."""

    def __init__(self, *, max_size: int, timeout: float, closed_message: str) -> None:
        self.max_size = max_size
        self.timeout = timeout
        self._idle: deque[C] = deque()
        self._size = 0  # open connections, idle or handed out
        self._closed = False
        self._closed_message = closed_message

    def _discard(self, conn: C) -> None:
        """Close ``conn`` and free its slot (each pool closes its own way)."""
        raise NotImplementedError

    def _wait_until(self, wait: float | None) -> tuple[float, float]:
        """(when a checkout gives up, how long that is): after ``timeout``, or sooner when
        the caller's deadline allows less (``wait``)."""
        waited = self.timeout if wait is None else max(0.0, min(wait, self.timeout))
        return clock.monotonic() + waited, waited

    def _checkout(self, deadline: float, waited: float) -> C | float | None:
        """A live idle connection; or None with a slot taken for a new one (the caller
        connects outside the lock and calls :meth:`_unreserve` if that fails); or how long
        to wait for a connection to come back before asking again (``waited``: the wait
        the caller was allowed, for the error)."""
        if self._closed:
            raise StoreUnavailable(self._closed_message)
        while self._idle:
            conn = self._idle.pop()  # most recently used: warm, least likely dead
            if alive(conn):
                return conn
            self._discard(conn)
        if self._size < self.max_size:
            self._size += 1
            return None
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            raise psycopg.OperationalError(
                f"no free PostgreSQL connection after {waited:.1f}s "
                f"(all {self.max_size} in use)")
        return remaining

    def _unreserve(self) -> None:
        """The connection a slot was taken for could not be opened."""
        self._size -= 1

    def _checkin(self, conn: C, status: TransactionStatus) -> None:
        """Keep ``conn`` for the next caller only if it is clean and idle (``status`` after
        any rollback); otherwise close it and free its slot."""
        if self._closed or conn.broken or status != TransactionStatus.IDLE:
            self._discard(conn)
        else:
            self._idle.append(conn)


def status_of(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> TransactionStatus:
    """Where a returned connection stands; one inside a transaction needs a rollback."""
    return conn.info.transaction_status if not conn.closed else TransactionStatus.UNKNOWN


def alive(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Liveness without a round trip: an idle connection has nothing to read, so a readable
    socket means the server said goodbye (terminated backend, restart) or closed it."""
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


__all__ = ["Slots", "alive", "status_of"]
