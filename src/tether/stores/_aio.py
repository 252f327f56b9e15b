"""The async producer of a store that has no native async driver: its sync methods in threads.

Invariant: no call made through a :class:`ThreadedProducer` blocks the caller's event loop.
Every store method runs in the producer's own small thread pool, never in the loop's default
executor (a user's ``to_thread`` work must not starve tether's calls, nor tether's theirs),
and the loop only awaits the future. The semantics, limits and errors are exactly those of the
sync store's methods of the same names, because those methods are what runs.

Waiting for results ties a thread for as long as it waits. So ``wait_for_finish`` waits in
slices of at most :data:`WAIT_SLICE` seconds in a separate pool: a cancelled waiter frees its
thread within one slice, and waiters never hold up ``enqueue`` (whose pool stays free).

Closing: :meth:`ThreadedProducer.aclose` (or the sync :meth:`close`, which ``Store.close``
calls) shuts the pools down without waiting; calls made after it raise ``StoreUnavailable``.
Neither needs the event loop, so closing after the loop is gone is fine. A store hands out a
new producer once its current one is closed (``closed``), so closing one is never fatal.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tether import _clock as clock
from tether._errors import StoreUnavailable
from tether.stores._contract import CancelResult, JobRecord, NewJob, Store

R = TypeVar("R")

#: Longest single blocking wait a waiter's thread makes before it comes back to the loop.
WAIT_SLICE = 1.0
#: Threads for calls (enqueue, get_job, cancel) and for waiters.
CALL_THREADS = 4
WAIT_THREADS = 32


#: How often :func:`until_ready` looks at its flag.
READY_POLL = 0.05


async def until_ready(ready: Callable[[], bool], timeout: float) -> bool:
    """Await a listener's readiness flag (True once set, False after ``timeout``) on the
    loop, looking every :data:`READY_POLL` s. Not ``to_thread(event.wait)``: every waiter
    would hold a thread of the loop's default executor (6 on 2 cores) for its whole wait,
    and many waiters on a degraded listener would starve the application's own
    ``to_thread`` calls. Only degraded waits come here, so the look costs nothing otherwise."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout)
    while not ready():
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.sleep(min(READY_POLL, left))
    return True


class ThreadedProducer:
    """:class:`tether.stores._contract.AsyncProducer` over any sync :class:`Store` (SQLite's, and
    any store without a native async driver)."""

    def __init__(self, store: Store, *, threads: int = CALL_THREADS) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._closed = False
        self._calls = ThreadPoolExecutor(threads, thread_name_prefix=f"tether-aio-{store.kind}")
        self._waits = ThreadPoolExecutor(WAIT_THREADS,
                                         thread_name_prefix=f"tether-wait-{store.kind}")

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[..., R], *args: Any,
                   **kwargs: Any) -> R:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the store's async producer is closed")
            try:
                future = pool.submit(functools.partial(fn, *args, **kwargs))
            except RuntimeError as exc:  # the pool was shut down meanwhile
                raise StoreUnavailable("the store's async producer is closed") from exc
        return await asyncio.wrap_future(future)

    async def enqueue(
        self, jobs: Sequence[NewJob], *, request_id: str | None = None, conn: Any = None
    ) -> list[int]:
        if conn is not None:
            raise TypeError(f"conn= is not supported by the {self._store.kind} store's async "
                            "producer (only PostgreSQL enqueues inside a caller's transaction)")
        # A copy taken on the loop: the caller may reuse its list while the thread works.
        return await self._run(self._calls, self._store.enqueue, list(jobs),
                               request_id=request_id)

    async def get_job(self, job_id: int) -> JobRecord | None:
        return await self._run(self._calls, self._store.get_job, job_id)

    async def cancel(self, job_id: int) -> CancelResult:
        return await self._run(self._calls, self._store.cancel, job_id)

    async def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        ids = list(job_ids)
        deadline = clock.monotonic() + max(0.0, timeout)
        while True:
            remaining = deadline - clock.monotonic()
            slice_ = max(0.0, min(remaining, WAIT_SLICE))
            if await self._run(self._waits, self._store.wait_for_finish, ids, slice_):
                return True
            if remaining <= WAIT_SLICE:
                return False

    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Shut the pools down without waiting for running calls (they finish on their own
        and their results are dropped). Idempotent; needs no event loop."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._calls.shutdown(wait=False, cancel_futures=True)
        self._waits.shutdown(wait=False, cancel_futures=True)


__all__ = ["WAIT_SLICE", "ThreadedProducer", "until_ready"]
