"""No blocking call on the caller's loop, made observable: on loopback a blocking round trip
takes a millisecond and no slow-callback detector could see it, so these tests put the
delaying fault proxy (0.4 s per forwarded chunk, both ways) between the async producer and
the real PostgreSQL / Redis server. Any round trip made on the loop then holds it for more
than 0.8 s, far past the detector's threshold (``SLOW``), while awaited ones do not.

The last test shows the check fails on exactly that: the sync store's enqueue called from a
coroutine, through the same proxy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.contract.aioloop import run_unblocked
from tests.faults import FaultProxy
from tests.servers import isolated_url
from tether.stores import open_store
from tether.stores.base import NewJob, Outcome, Store

pytestmark = pytest.mark.timeout(120)
LATENCY = 0.4


@pytest.fixture(params=["postgres", "redis"])
def slow(
    request: pytest.FixtureRequest, tmp_path: Path, fault_proxy: Callable[[str], FaultProxy]
) -> Iterator[tuple[Store, Store]]:
    """(a store behind a slow network, a direct one)"""
    kind: str = request.param
    with isolated_url(kind, tmp_path) as url:
        direct = open_store(url)
        direct.migrate()
        proxy = fault_proxy(kind)
        proxy.delay(LATENCY)
        store = open_store(proxy.url(url))
        try:
            yield store, direct
        finally:
            store.close()
            direct.close()


def test_every_async_producer_call_leaves_the_loop_free(slow: tuple[Store, Store]) -> None:
    store, direct = slow
    t0 = direct.now()
    running = direct.enqueue([NewJob("r", queue="slow-r")], now=t0)[0]
    [job] = direct.claim("w1", ["slow-r"], 1, 60, now=t0)

    async def main() -> None:
        producer = store.async_producer()
        try:
            [job_id] = await producer.enqueue([NewJob("t", queue="slow")], request_id="r-slow")
            assert await producer.enqueue([NewJob("t", queue="slow")],
                                          request_id="r-slow") == [job_id]
            fetched = await producer.get_job(job_id)
            assert fetched is not None and fetched.queue == "slow"
            assert await producer.cancel(job_id) == "cancelled"
            assert await producer.wait_for_finish([job_id], 10) is True
            waiting = asyncio.create_task(producer.wait_for_finish([running], 30))
            await asyncio.sleep(3 * LATENCY)
            await asyncio.to_thread(direct.finish, [Outcome(job.lease, "done", result="1")])
            assert await asyncio.wait_for(waiting, 30) is True
        finally:
            await producer.aclose()

    run_unblocked(main)


def test_the_check_catches_a_blocking_store_call(slow: tuple[Store, Store]) -> None:
    store, _ = slow

    async def blocks() -> None:
        store.enqueue([NewJob("t")])  # the sync store, on the loop: wrong on purpose

    with pytest.raises(AssertionError, match="blocking call"):
        run_unblocked(blocks)
