"""A small pool of psycopg ``AsyncConnection``\\ s for one event loop (the async producer's).

Shaped like :mod:`pool` (connect on demand in the caller's task, refuse at once while the
server is down, drop a dead idle connection without a round trip) for the same reasons. A
psycopg async connection belongs to the loop it was made on, so the producer keeps one pool
per loop.

Closing: :meth:`AsyncPool.aclose` closes idle connections politely on their loop.
:meth:`AsyncPool.drop` needs no loop at all: it ends every connection's libpq handle
(``PQfinish``: the socket closes and the server ends the backend), which is what
``Store.close()`` does, since it may run after the loop is gone or on the loop's own thread.
A connection dropped under a running call makes that call fail with StoreUnavailable.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from tether import clock
from tether.errors import StoreUnavailable
from tether.stores.postgres.pool import alive

AConn = psycopg.AsyncConnection[Any]


class AsyncPool:
    """At most ``max_size`` connections; ``getconn`` waits up to ``timeout`` for a free one."""

    def __init__(self, connect: Callable[[], Awaitable[AConn]], *, max_size: int,
                 timeout: float) -> None:
        self._connect = connect
        self.max_size = max_size
        self.timeout = timeout
        self._idle: deque[AConn] = deque()
        self._all: set[AConn] = set()
        self._size = 0
        self._cond = asyncio.Condition()
        self._closed = False

    async def getconn(self) -> AConn:
        deadline = clock.monotonic() + self.timeout
        async with self._cond:
            while True:
                if self._closed:
                    raise StoreUnavailable("the store's async producer is closed")
                while self._idle:
                    conn = self._idle.pop()
                    if alive(conn):
                        return conn
                    self._discard(conn)
                if self._size < self.max_size:
                    self._size += 1
                    break
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    raise psycopg.OperationalError(
                        f"no free PostgreSQL connection after {self.timeout:.1f}s "
                        f"(all {self.max_size} in use)")
                try:
                    await asyncio.wait_for(self._cond.wait(), remaining)
                except TimeoutError:
                    continue
        try:
            conn = await self._connect()
        except BaseException:
            async with self._cond:
                self._size -= 1
                self._cond.notify()
            raise
        self._all.add(conn)
        return conn

    async def putconn(self, conn: AConn) -> None:
        status = conn.info.transaction_status if not conn.closed else TransactionStatus.UNKNOWN
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                await conn.rollback()
                status = conn.info.transaction_status
            except psycopg.Error:
                status = TransactionStatus.UNKNOWN
        async with self._cond:
            if self._closed or conn.broken or status != TransactionStatus.IDLE:
                self._discard(conn)
            else:
                self._idle.append(conn)
            self._cond.notify()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = list(self._idle), deque()
        for conn in idle:
            self._all.discard(conn)
            self._size -= 1
            try:
                await conn.close()
            except psycopg.Error:
                pass
        self.drop()

    def drop(self) -> None:
        """End every connection now, from any thread, with or without the loop."""
        self._closed = True
        conns, self._all = list(self._all), set()
        self._idle.clear()
        for conn in conns:
            try:
                conn.pgconn.finish()
            except (psycopg.Error, OSError):  # pragma: no cover - closing is best effort
                pass

    def _discard(self, conn: AConn) -> None:
        self._size -= 1
        self._all.discard(conn)
        conn.pgconn.finish()


__all__ = ["AConn", "AsyncPool"]
