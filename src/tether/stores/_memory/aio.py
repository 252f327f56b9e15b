"""The async producer of the memory store (issue #12): the
:class:`~tether.stores._contract.AsyncProducer` that ``MemoryProducer.async_producer`` hands
out (``producer.py``).

Invariant: nothing here blocks an event loop. The producer's calls only touch memory under
the shared lock (held for in-memory work, never for I/O), and its ``wait_for_finish`` awaits
a future that the store's change hook resolves through ``call_soon_threadsafe``: no thread is
parked and no poll runs while it waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from tether._limits import check_job_id
from tether.stores._contract import CancelResult, JobRecord, NewJob
from tether.stores._memory.state import Shared


class MemoryAsyncProducer:
    """:class:`~tether.stores._contract.AsyncProducer` of a memory store."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def enqueue(
        self, jobs: Sequence[NewJob], *, request_id: str | None = None, conn: Any = None
    ) -> list[int]:
        if conn is not None:
            raise TypeError("conn= is not supported by the memory store's async producer (only "
                            "PostgreSQL enqueues inside a caller's transaction)")
        ids: list[int] = self._store.enqueue(jobs, request_id=request_id)
        return ids

    async def get_job(self, job_id: int) -> JobRecord | None:
        job: JobRecord | None = self._store.get_job(job_id)
        return job

    async def cancel(self, job_id: int) -> CancelResult:
        result: CancelResult = self._store.cancel(job_id)
        return result

    async def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        job_ids = [check_job_id(i) for i in job_ids]
        store = self._store
        db: Shared | None = store._shared
        if db is None:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            woken: asyncio.Future[None] = loop.create_future()

            def wake(fut: asyncio.Future[None] = woken) -> None:
                if not fut.done():
                    fut.set_result(None)

            def hook() -> None:
                try:
                    loop.call_soon_threadsafe(wake)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    pass

            unwatch = db.watch(hook)
            try:
                with db.lock:
                    if store._shared is None:
                        return False
                    if store.finished_ids(job_ids):
                        return True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                try:
                    await asyncio.wait_for(woken, remaining)
                except TimeoutError:
                    return False
            finally:
                unwatch()

    async def aclose(self) -> None:
        return None
