"""Store.async_producer(): the producer side for asyncio callers, on every store.

Same semantics, limits and errors as the sync methods; never a blocking call on the caller's
loop (each test runs under :func:`run_unblocked`, which fails on a slow-callback warning).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from tests.contract.aioloop import run_unblocked
from tests.contract.helpers import fresh_queue, new_job, running_job
from tether._errors import JobNotFound
from tether.stores import AsyncProducer, Outcome, Store


@pytest.mark.slow
def test_the_detector_catches_a_blocking_call() -> None:
    """run_unblocked must be able to fail: a time.sleep on the loop is reported."""

    async def blocks() -> None:
        time.sleep(1.0)

    with pytest.raises(AssertionError, match="blocking call"):
        run_unblocked(blocks)


def test_it_is_an_async_producer_made_once(store: Store) -> None:
    producer = store.async_producer()
    assert isinstance(producer, AsyncProducer)
    assert store.async_producer() is producer


def test_enqueue_get_job_and_cancel(store: Store) -> None:
    queue = fresh_queue()

    async def main() -> None:
        producer = store.async_producer()
        ids = await producer.enqueue([new_job(queue=queue, payload='[[1], {}]'),
                                      new_job(queue=queue, priority=5)])
        assert len(ids) == 2 and ids[0] != ids[1]
        job = await producer.get_job(ids[0])
        assert job is not None and job.status == "pending" and job.queue == queue
        assert job.payload == '[[1], {}]'
        assert await producer.get_job(987_654_321) is None
        assert await producer.cancel(ids[1]) == "cancelled"
        assert await producer.cancel(ids[1]) == "finished"
        with pytest.raises(JobNotFound):
            await producer.cancel(987_654_321)
        assert await producer.enqueue([]) == []
        await producer.aclose()

    run_unblocked(main)
    job = store.get_job(store.list_jobs(queue=queue)[0].id)
    assert job is not None and job.status == "pending"  # visible to the sync side


def test_cancel_of_a_running_job_is_requested(store: Store) -> None:
    job = running_job(store, store.now())

    async def main() -> str:
        producer = store.async_producer()
        try:
            return await producer.cancel(job.id)
        finally:
            await producer.aclose()

    assert run_unblocked(main) == "requested"


def test_a_repeated_request_id_enqueues_once(store: Store) -> None:
    """The same replay record as the sync enqueue: a retry of the async call, or of the sync
    call, with the same request id returns the first call's ids and inserts nothing."""
    queue = fresh_queue()
    rid = uuid.uuid4().hex

    async def main() -> tuple[list[int], list[int]]:
        producer = store.async_producer()
        try:
            first = await producer.enqueue([new_job(queue=queue)] * 2, request_id=rid)
            again = await producer.enqueue([new_job(queue=queue)] * 2, request_id=rid)
            return first, again
        finally:
            await producer.aclose()

    first, again = run_unblocked(main)
    assert first == again
    assert store.enqueue([new_job(queue=queue)] * 2, request_id=rid) == first
    assert len(store.list_jobs(queue=queue)) == 2


def test_bad_input_raises_the_same_value_error(store: Store) -> None:
    bad = [new_job(queue=fresh_queue(), priority=10**12)]
    with pytest.raises(ValueError) as sync_error:
        store.enqueue(bad)

    async def main() -> None:
        producer = store.async_producer()
        try:
            with pytest.raises(ValueError) as async_error:
                await producer.enqueue(bad)
            assert str(async_error.value) == str(sync_error.value)
            with pytest.raises(ValueError):
                await producer.get_job(0)
            with pytest.raises(ValueError):
                await producer.cancel(-1)
        finally:
            await producer.aclose()

    run_unblocked(main)


def test_wait_for_finish(store: Store, open_another: Callable[[], Store]) -> None:
    """Woken by a finish on another connection; an already finished job returns at once; the
    timeout returns False. Other coroutines keep running meanwhile."""
    worker = open_another()
    job = running_job(store, store.now())
    pending = store.enqueue([new_job(queue=fresh_queue())])[0]

    async def main() -> None:
        producer = store.async_producer()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        try:
            waiting = asyncio.create_task(producer.wait_for_finish([job.id], 20.0))
            await asyncio.sleep(0.3)
            # The loop ran while the waiter waited: the ticker moved on and the waiter is still
            # waiting. (A count of ticks since the start, > 10, failed at 9 on a loaded
            # machine; a waiter holding the loop would be done, timed out, before the ticks.)
            before = ticks
            while ticks < before + 3:
                await asyncio.sleep(0.01)
            assert not waiting.done(), "the loop was held while waiting"
            started = time.monotonic()
            await asyncio.to_thread(worker.finish, [Outcome(job.lease, "done", result="1")])
            assert await asyncio.wait_for(waiting, 10.0) is True
            assert time.monotonic() - started < 5.0
            assert await producer.wait_for_finish([job.id], 20.0) is True
            started = time.monotonic()
            assert await producer.wait_for_finish([pending], 0.3) is False
            assert 0.2 <= time.monotonic() - started < 5.0
        finally:
            tick.cancel()
            await producer.aclose()

    run_unblocked(main)


def test_a_cancelled_waiter_leaves_the_producer_usable(store: Store) -> None:
    pending = store.enqueue([new_job(queue=fresh_queue())])[0]

    async def main() -> None:
        producer = store.async_producer()
        try:
            # Spurious wake-ups are allowed (a (re)subscription wakes every waiter), so a wait
            # may return early; what this test needs is one wait cancelled while it blocks.
            for _ in range(20):
                try:
                    await asyncio.wait_for(producer.wait_for_finish([pending], 20.0), 0.2)
                except TimeoutError:
                    break
            else:
                pytest.fail("wait_for_finish never blocked on a pending job")
            assert (await producer.get_job(pending)) is not None
        finally:
            await producer.aclose()

    run_unblocked(main)


def test_concurrent_enqueues(store: Store) -> None:
    queue = fresh_queue()

    async def main() -> list[list[int]]:
        producer = store.async_producer()
        try:
            return await asyncio.gather(*(producer.enqueue([new_job(queue=queue)])
                                          for _ in range(20)))
        finally:
            await producer.aclose()

    ids = [i for batch in run_unblocked(main) for i in batch]
    assert len(set(ids)) == 20
    assert len(store.list_jobs(queue=queue)) == 20


def test_the_producer_works_on_a_second_loop(store: Store) -> None:
    """asyncio.run twice (tests, scripts): the second loop gets working connections."""
    queue = fresh_queue()

    async def one() -> list[int]:
        return await store.async_producer().enqueue([new_job(queue=queue)])

    run_unblocked(one)
    run_unblocked(one)
    assert len(store.list_jobs(queue=queue)) == 2


def test_store_close_after_the_loop_is_gone(store: Store) -> None:
    """A producer used on a loop that has ended: Store.close() neither hangs nor raises."""
    queue = fresh_queue()

    async def one() -> list[int]:
        return await store.async_producer().enqueue([new_job(queue=queue)])

    run_unblocked(one)
    started = time.monotonic()
    store.close()
    assert time.monotonic() - started < 5.0


def test_calls_after_aclose_raise_store_unavailable_or_reconnect(store: Store) -> None:
    """After aclose the producer is done; the store hands out a usable one again."""
    queue = fresh_queue()

    async def main() -> None:
        producer = store.async_producer()
        await producer.enqueue([new_job(queue=queue)])
        await producer.aclose()
        again = store.async_producer()
        assert len(await again.enqueue([new_job(queue=queue)])) == 1
        await again.aclose()

    run_unblocked(main)
