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

from tether.stores._postgres.slots import Slots, status_of

AConn = psycopg.AsyncConnection[Any]


class AsyncPool(Slots[AConn]):
    """At most ``max_size`` connections; ``getconn`` waits up to ``timeout`` for a free one
    (the policy is :class:`slots.Slots`', the same as the sync pool's)."""

    def __init__(self, connect: Callable[[], Awaitable[AConn]], *, max_size: int,
                 timeout: float) -> None:
        super().__init__(max_size=max_size, timeout=timeout,
                         closed_message="the store's async producer is closed")
        self._connect = connect
        self._all: set[AConn] = set()
        self._cond = asyncio.Condition()

    async def getconn(self, wait: float | None = None) -> AConn:
        """A connection; ``wait``: give up sooner than ``timeout`` (the call's deadline)."""
        deadline, waited = self._wait_until(wait)
        async with self._cond:
            while isinstance(got := self._checkout(deadline, waited), float):
                try:
                    await asyncio.wait_for(self._cond.wait(), got)
                except TimeoutError:
                    pass
        if got is not None:
            return got
        try:
            conn = await self._connect()
        except BaseException:
            async with self._cond:
                self._unreserve()
                self._cond.notify()
            raise
        self._all.add(conn)
        return conn

    async def putconn(self, conn: AConn) -> None:
        status = status_of(conn)
        if status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            try:
                await conn.rollback()
                status = conn.info.transaction_status
            except psycopg.Error:
                status = TransactionStatus.UNKNOWN
        async with self._cond:
            self._checkin(conn, status)
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
