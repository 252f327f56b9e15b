"""The async producer through network faults, on the real servers behind the fault proxy
(``faulty``): an outage is StoreUnavailable (never a raw driver error, never a hang), the
producer works again once the server is back, and a call whose reply was lost, retried with
the same request id, has the effect of one call.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from tests.contract.aioloop import run_unblocked
from tests.contract.helpers import Faulty
from tests.faults import FaultProxy
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Store

T = TypeVar("T")
pytestmark = pytest.mark.timeout(90)
Proxied = tuple[Store, Store, FaultProxy]  # (through the proxy, direct, proxy)


@pytest.fixture
def proxied(faulty: Faulty, store: Store) -> Proxied:
    return faulty.store, store, faulty.proxy


async def _retrying(call: Callable[[], Awaitable[T]], within: float = 15.0) -> T:
    """Call until it stops raising StoreUnavailable (as a producer with backoff would)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await call()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def test_an_outage_is_store_unavailable_and_the_producer_recovers(proxied: Proxied) -> None:
    store, direct, proxy = proxied
    task = "outage-" + uuid.uuid4().hex[:8]

    async def main() -> list[int]:
        producer = store.async_producer()
        try:
            first = await producer.enqueue([NewJob(task)])
            proxy.refuse(60.0)  # until restore(): both calls below fall in it, however slow
            with pytest.raises(StoreUnavailable):
                await producer.enqueue([NewJob(task)])
            with pytest.raises(StoreUnavailable):
                await producer.get_job(first[0])
            # Both failed while the outage (until restore()) was still on: neither waited it
            # out. (A call that hung would see the refusal end after 60 s and succeed.)
            assert proxy.refusing, "an outage must not hang the caller"
            proxy.restore()
            second = await _retrying(lambda: producer.enqueue([NewJob(task)]))
            job = await _retrying(lambda: producer.get_job(second[0]))
            assert job is not None and job.task == task
            return first + second
        finally:
            await producer.aclose()

    ids = run_unblocked(main)
    assert sorted(j.id for j in direct.list_jobs(limit=100) if j.task == task) == sorted(ids)


def test_a_lost_reply_retried_with_its_request_id_makes_one_job(proxied: Proxied) -> None:
    store, direct, proxy = proxied
    task = "lost-" + uuid.uuid4().hex[:8]
    rid = uuid.uuid4().hex

    async def main() -> list[int]:
        producer = store.async_producer()
        try:
            await producer.enqueue([NewJob("warm-up")])  # connection open, scripts loaded
            proxy.drop_next_reply(task.encode())
            try:
                ids = await producer.enqueue([NewJob(task)], request_id=rid)
            except StoreUnavailable:
                ids = await _retrying(lambda: producer.enqueue([NewJob(task)], request_id=rid))
            assert not proxy.drop_pending and proxy.dropped == 1, "no reply was dropped"
            again = await _retrying(lambda: producer.enqueue([NewJob(task)], request_id=rid))
            assert again == ids
            return ids
        finally:
            await producer.aclose()

    ids = run_unblocked(main)
    assert [j.id for j in direct.list_jobs(limit=100) if j.task == task] == ids


@pytest.mark.slow
def test_a_waiter_through_an_outage_is_woken_or_times_out(proxied: Proxied) -> None:
    """A waiter whose notifications are cut gets a (spurious) wake-up once the listener is
    back, or its timeout: never an exception, never a hang past its timeout."""
    store, direct, proxy = proxied
    job_id = direct.enqueue([NewJob("t")])[0]

    async def main() -> float:
        producer = store.async_producer()
        try:
            waiting = asyncio.create_task(producer.wait_for_finish([job_id], 8.0))
            await asyncio.sleep(0.5)
            proxy.refuse(1.0)
            started = time.monotonic()
            await asyncio.wait_for(waiting, 20.0)
            return time.monotonic() - started
        finally:
            await producer.aclose()

    assert run_unblocked(main) < 15.0


@pytest.mark.slow
@pytest.mark.parametrize("how", ["wait", "await_result"])
def test_a_wait_rides_out_an_outage_at_its_start_and_in_its_middle(
    how: str, store: Store, faulty: Faulty,
) -> None:
    """``app.wait`` / ``await app.await_result`` through a store outage: one that is already
    on when the wait starts (the app has not even opened its store yet) and one that cuts
    the waiter's connections while it waits, during which the job finishes (its
    notification is lost with them). Neither fails the wait: it reads again until its
    timeout and returns the result."""
    import threading

    import tether
    from tests.worker.helpers import wait_until
    from tether.stores import Outcome

    direct, proxy = store, faulty.proxy
    queue = "outage-" + uuid.uuid4().hex[:8]
    first, second = direct.enqueue([NewJob("t", queue=queue), NewJob("t", queue=queue)])

    def finish(job_id: int, result: str) -> None:
        [job] = direct.claim("w1", [queue], 1, 60, now=direct.now())
        assert job.id == job_id
        direct.finish([Outcome(job.lease, "done", result=result)], now=direct.now())

    finish(first, '"one"')
    app = tether.App(faulty.url)
    got: list[object] = []

    def waits() -> None:
        if how == "wait":
            got.append(app.wait(first, timeout=60))
            got.append(app.wait(second, timeout=60))
            return

        async def main() -> None:
            got.append(await app.await_result(first, timeout=60))
            got.append(await app.await_result(second, timeout=60))
            await app.aclose()

        asyncio.run(main())

    proxy.refuse(2.0)  # on before the app opens its store; over by itself after 2 s
    waiter = threading.Thread(target=lambda: got.append(_capture(waits)), daemon=True)
    waiter.start()
    try:
        wait_until(lambda: len(got) >= 1, 45, "the first wait to end")
        assert got[0] == "one", got
        proxy.refuse(2.0)  # the second wait is on: cut its connections, finish meanwhile
        finish(second, '"two"')
        waiter.join(60)
        assert not waiter.is_alive(), "the wait hung"
        assert got == ["one", "two", None], got
    finally:
        proxy.restore()
        app.close()


def _capture(fn: Callable[[], object]) -> object:
    """Run ``fn``; its exception (if any) is returned, so the test thread can report it."""
    try:
        fn()
    except BaseException as exc:  # reported by the test's assertion
        return exc
    return None


def test_aenqueue_whose_reply_is_lost_makes_one_job(store: Store, faulty: Faulty) -> None:
    """The user-facing ``task.aenqueue``: the insert reaches the server, its reply is lost
    and the connection cut; the app's own retry (same request id) answers with the same id
    and the store holds one job."""
    import tether

    direct, proxy = store, faulty.proxy
    app = tether.App(faulty.url)
    marker = "lost-" + uuid.uuid4().hex[:8]

    @app.task(name="faults.mark")
    def mark(tag: str) -> None:
        return None

    async def main() -> int:
        await mark.aenqueue("warm-up")  # connections open, scripts loaded
        proxy.drop_next_reply(marker.encode())
        job_id = await mark.aenqueue(marker)
        assert not proxy.drop_pending and proxy.dropped == 1, "no reply was dropped"
        await app.aclose()
        return int(job_id)

    try:
        job_id = run_unblocked(main)
        found = [j.id for j in direct.list_jobs(limit=100) if marker in j.payload]
        assert found == [job_id]
    finally:
        app.close()
