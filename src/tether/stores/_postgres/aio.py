"""The async producer of the PostgreSQL store (issue #12): the
:class:`~tether.stores._contract.AsyncProducer` that ``PostgresProducer.async_producer`` hands
out (``producer.py``).

It speaks psycopg's ``AsyncConnection`` (one small pool per event loop, see
:mod:`apool`), runs the same named statements as the sync store (same SQL, same request-id
replay record, same race retries) and maps driver errors through the same
:func:`driver_errors.mapped`. Waiting goes through the same listener: its thread hands the
wake-up to the loop with ``call_soon_threadsafe``, so no call ever blocks the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, cast

import psycopg

from tether import _clock as clock
from tether import _limits as limits
from tether._errors import JobNotFound, StoreError, StoreUnavailable
from tether.stores._aio import until_ready
from tether.stores._contract import CancelResult, JobRecord, NewJob
from tether.stores._per_loop import PerLoop, threadsafe_wake
from tether.stores._postgres.apool import AConn, AsyncPool
from tether.stores._postgres.connection import Connector
from tether.stores._postgres.driver_errors import mapped
from tether.stores._postgres.enqueue_call import enqueue_call, ids_of
from tether.stores._postgres.listen import Listener
from tether.stores._postgres.plumbing import RACE_RETRIES, Row, race
from tether.stores._postgres.watchdog import awatch

#: Connections per event loop, and how long a call waits for a free one.
ASYNC_POOL_SIZE = 4
#: Longest an async waiter waits for the listener's first connection attempt (its connect
#: timeout, plus margin; ``Listener.start`` waits as long).
_FIRST_ATTEMPT_WAIT = 4.0
ASYNC_POOL_TIMEOUT = 10.0


class PostgresAsyncProducer:
    """:class:`tether.stores._contract.AsyncProducer` on psycopg's async connections."""

    def __init__(self, connector: Connector, listener: Listener, queries: dict[str, str],
                 channel: str) -> None:
        self._connector = connector
        self._listener = listener
        self._queries = queries
        self._channel = channel
        self._pools: PerLoop[AsyncPool] = PerLoop()
        self._lock = threading.Lock()
        self._starter = False  # a thread was started to start the listener

    @property
    def closed(self) -> bool:
        return self._pools.closed

    def _pool(self) -> AsyncPool:
        return self._pools.get(lambda: AsyncPool(self._connector.aconnect,
                                                 max_size=ASYNC_POOL_SIZE,
                                                 timeout=ASYNC_POOL_TIMEOUT))

    async def _rows(self, name: str, params: dict[str, Any], conn: AConn | None = None,
                    *, retry_races: bool = False) -> list[Row]:
        """One named statement on a pooled connection (or the caller's, inside its
        transaction, never committing it), driver errors mapped; races run again on our own
        connections only, as in the sync store's ``_retrying``."""
        for attempt in range(RACE_RETRIES):
            try:
                with mapped():
                    if conn is not None:
                        cur = await conn.execute(self._queries[name], params)
                        return await cur.fetchall()
                    # The checkout and the statement end within the store's deadline, as
                    # in the sync store (``Connector.connection``).
                    deadline = self._connector.deadline
                    due = clock.monotonic() + deadline
                    pool = self._pool()
                    used = await pool.getconn(deadline)
                    try:
                        async with awatch(used, due - clock.monotonic(), deadline=deadline):
                            cur = await used.execute(self._queries[name], params)
                            return await cur.fetchall()
                    finally:
                        await pool.putconn(used)
            except StoreError as exc:
                cause = exc.__cause__
                if not retry_races or not isinstance(cause, psycopg.Error) or not race(cause):
                    raise
                if conn is not None or attempt == RACE_RETRIES - 1:
                    raise StoreUnavailable(f"{exc} (a concurrent write raced this one; "
                                           "retry)") from cause
        raise AssertionError("unreachable")

    async def enqueue(
        self, jobs: Sequence[NewJob], *, request_id: str | None = None, conn: Any = None
    ) -> list[int]:
        """``conn``: the caller's psycopg ``AsyncConnection``; the jobs are written inside its
        transaction and commit or roll back with it."""
        if conn is not None and not isinstance(conn, psycopg.AsyncConnection):
            raise TypeError("conn= takes a psycopg AsyncConnection")
        call = enqueue_call(jobs, now=None, channel=self._channel, request_id=request_id,
                            jobs_key=self._connector.jobs_key, gate=conn is None)
        if call is None:
            return []
        rows = await self._rows(call.name, call.params, conn, retry_races=True)
        return ids_of(call, rows)

    async def get_job(self, job_id: int) -> JobRecord | None:
        rows = await self._rows("get_job", {"id": limits.check_job_id(job_id)})
        return JobRecord(*rows[0]) if rows else None

    async def cancel(self, job_id: int) -> CancelResult:
        limits.check_job_id(job_id)
        rows = await self._rows("cancel", {"id": job_id, "now": None,
                                           "done": self._connector.done_channel,
                                           "channel": self._channel,
                                           "signal": self._connector.signal_channel})
        if not rows:
            raise JobNotFound(job_id)
        return cast(CancelResult, rows[0][0])

    async def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        ids = [limits.check_job_id(i) for i in job_ids]
        if not self._listener.ready():  # its first connection: a blocking wait, off the loop
            # On a thread of its own, not the loop's default executor (the application's,
            # possibly all busy): the wait only needs the listener's first attempt made.
            with self._lock:
                starter, self._starter = self._starter, True
            if not starter:  # one starting thread, however many waiters come meanwhile
                threading.Thread(target=self._listener.start, name="tether-listen-start",
                                 daemon=True).start()
            await until_ready(self._listener.ready, _FIRST_ATTEMPT_WAIT)
        woken, wake = threadsafe_wake()
        deadline = clock.monotonic() + max(0.0, timeout)
        waiter = self._listener.add_finish_waiter(ids, wake)
        try:
            ready_before = self._listener.done_ready()  # as in the sync wait_for_finish
            if await self._finished_any(ids):
                return True
            if not ready_before:
                if self._listener.listens and not self._listener.done_ready():
                    await self._rows("notify", {"channel": self._channel, "queues": [""]})
                while True:  # until ready, and one read after it is
                    step = min(self._listener.poll_every, deadline - clock.monotonic())
                    ready = await until_ready(self._listener.done_ready, max(0.0, step))
                    if waiter.hit or await self._finished_any(ids):
                        return True
                    if ready:
                        break
                    if step <= 0:
                        return False
            try:
                await asyncio.wait_for(woken, max(0.0, deadline - clock.monotonic()))
            except TimeoutError:
                return waiter.hit
            return True
        finally:
            self._listener.remove_finish_waiter(waiter)

    async def _finished_any(self, ids: list[int]) -> bool:
        rows = await self._rows("finished_any", {"ids": ids})
        return bool(rows and rows[0][0])

    async def aclose(self) -> None:
        """Close this loop's connections politely and drop every other loop's."""
        loop = asyncio.get_running_loop()
        for owner, pool in self._pools.close().items():
            if owner is loop:
                await pool.aclose()
            else:
                pool.drop()

    def close(self) -> None:
        """From ``Store.close()``: needs no loop (see :mod:`apool`)."""
        for pool in self._pools.close().values():
            pool.drop()


__all__ = ["PostgresAsyncProducer"]
