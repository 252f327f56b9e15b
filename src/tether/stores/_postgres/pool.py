"""A small connection pool that connects on demand, in the caller's thread.

Why not psycopg_pool: its reconnection runs in background workers with exponential backoff
(1 s, 2 s, 4 s, ...), and a caller waits up to the pool timeout for them. Through an outage
that meant every store call hung for the whole timeout, and after the server came back the
workers resumed only when the next scheduled attempt happened to fire: ~9 s after a 20 s
outage. Here a call that finds no idle connection opens one itself: refused at once while the
server is down (so callers fail fast with StoreUnavailable and keep their own backoff), and
connected at once by the first call after the server is back.

Idle connections are checked without a round trip before they are handed out (a readable idle
socket means the server hung up: restart, terminated backend, proxy cut), so a dead one is
dropped and replaced instead of failing the caller's statement.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from tether.stores._postgres.slots import Slots, alive, status_of

Conn = psycopg.Connection[Any]


class ConnectionPool(Slots[Conn]):
    """At most ``max_size`` connections; ``getconn`` waits up to ``timeout`` for a free one
    when all are in use (the policy is :class:`slots.Slots`'). Thread-safe."""

    def __init__(self, connect: Callable[[], Conn], *, max_size: int, timeout: float) -> None:
        super().__init__(max_size=max_size, timeout=timeout,
                         closed_message="the store is closed")
        self._connect = connect
        self._cond = threading.Condition()

    def add(self, conn: Conn) -> None:
        """Adopt an open connection (the preflight one, warm-up connections)."""
        with self._cond:
            self._size += 1
        self.putconn(conn)

    def getconn(self, wait: float | None = None) -> Conn:
        """A connection; ``wait``: give up sooner than ``timeout`` (the call's deadline)."""
        deadline, waited = self._wait_until(wait)
        with self._cond:
            while isinstance(got := self._checkout(deadline, waited), float):
                self._cond.wait(got)
        if got is not None:
            return got
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._unreserve()
                self._cond.notify()
            raise

    def putconn(self, conn: Conn) -> None:
        """Hand a connection back. One left inside a transaction is rolled back; a broken or
        busy one is closed and its slot freed."""
        status = status_of(conn)
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                conn.rollback()
                status = conn.info.transaction_status
            except psycopg.Error:
                status = TransactionStatus.UNKNOWN
        with self._cond:
            self._checkin(conn, status)
            self._cond.notify()

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {"pool_size": self._size, "pool_idle": len(self._idle),
                    "pool_max": self.max_size}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            for conn in idle:
                self._discard(conn)
            self._cond.notify_all()

    def _discard(self, conn: Conn) -> None:
        """Close ``conn`` and free its slot (caller holds the lock)."""
        self._size -= 1
        try:
            conn.close()
        except psycopg.Error:
            pass


__all__ = ["Conn", "ConnectionPool", "alive"]
