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
from tether.stores import NewJob, Outcome, Store, open_store

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


@pytest.mark.slow
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


@pytest.fixture(params=["postgres", "redis"])
def kind(request: pytest.FixtureRequest) -> str:
    found: str = request.param
    return found


@pytest.mark.slow
def test_the_check_catches_a_blocking_store_call(slow: tuple[Store, Store]) -> None:
    store, _ = slow

    async def blocks() -> None:
        store.enqueue([NewJob("t")])  # the sync store, on the loop: wrong on purpose

    with pytest.raises(AssertionError, match="blocking call"):
        run_unblocked(blocks)


@pytest.mark.slow
def test_every_app_async_method_leaves_the_loop_free(
    tmp_path: Path, fault_proxy: Callable[[str], FaultProxy], kind: str,
) -> None:
    """The user-facing async API (``Task.aenqueue``/``aenqueue_many``, ``App.aget_job``/
    ``acancel``/``await_result``/``aclose``) behind the slow network, from the very first
    call (the store is opened, migrated and connected by it) to its errors: unknown id,
    timeout, cancelled job, an outage (StoreUnavailable after the retries), and a waiter
    cancelled by its caller."""
    import tether
    from tether._errors import StoreUnavailable

    with isolated_url(kind, tmp_path) as url:
        direct = open_store(url)
        direct.migrate()  # the app's own auto-migrate then only checks, off the loop
        proxy = fault_proxy(kind)
        proxy.delay(LATENCY)
        app = tether.App(proxy.url(url))

        @app.task(name="slow.add", queue="slow-app")
        def add(a: int, b: int) -> int:
            return a + b


        async def main() -> None:
            first = await add.aenqueue(1, 2)  # opens the store: nothing of it on the loop
            many = await add.aenqueue_many([((i, i), {}) for i in range(3)])
            view = await app.aget_job(first)
            assert view.args == [1, 2] and view.status == "pending"
            assert await app.acancel(many[0]) == "cancelled"
            with pytest.raises(tether.JobWasCancelled):
                await app.await_result(many[0], timeout=30)
            with pytest.raises(tether.JobNotFound):
                await app.aget_job(first + 10_000)
            with pytest.raises(tether.JobNotFound):
                await app.await_result(first + 10_000, timeout=30)
            with pytest.raises(TimeoutError):
                await app.await_result(many[1], timeout=2 * LATENCY)
            # A waiter its caller gives up on: cancelled cleanly, the API still works after.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(app.await_result(many[1], timeout=30), 3 * LATENCY)
            # A call cancelled mid round trip gives its connection back (or closes it).
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(app.aget_job(first), LATENCY / 2)
            assert _checked_out(app, kind) == 0, "a cancelled call kept its connection"
            # The result, finished by another process while this one waits.
            waiting = asyncio.create_task(app.await_result(first, timeout=60))
            now = await asyncio.to_thread(direct.now)
            [job] = await asyncio.to_thread(direct.claim, "w1", ["slow-app"], 1, 60, now=now)
            assert job.id == first
            await asyncio.to_thread(direct.finish, [Outcome(job.lease, "done", result="3")])
            assert await asyncio.wait_for(waiting, 60) == 3
            proxy.refuse(30.0)
            with pytest.raises(StoreUnavailable):
                await add.aenqueue(5, 5)
            with pytest.raises(StoreUnavailable):
                await app.acancel(first)
            proxy.restore()
            await app.aclose()

        try:
            run_unblocked(main)
        finally:
            app.close()
            direct.close()


def test_sqlite_store_calls_of_the_async_api_run_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite has no async driver: every call the async API makes into the store (opening,
    migrating, enqueue, get_job, cancel, wait_for_finish) must run on a thread. On a local
    file a blocking call is too quick for the slow-callback detector, so this records the
    thread of every public method of the store class instead."""
    import threading

    import tether
    from tether.stores._sqlite.store import SQLiteStore

    seen: dict[str, set[int]] = {}

    def watch(name: str, method: Callable[..., object]) -> Callable[..., object]:
        def watched(*args: object, **kwargs: object) -> object:
            seen.setdefault(name, set()).add(threading.get_ident())
            return method(*args, **kwargs)
        return watched

    for name in dir(SQLiteStore):
        method = getattr(SQLiteStore, name)
        if not name.startswith("_") and callable(method) and not isinstance(method, type) \
                and name != "async_producer":
            monkeypatch.setattr(SQLiteStore, name, watch(name, method))
    app = tether.App(f"sqlite:///{tmp_path / 'a.db'}")

    @app.task(name="sq.add")
    def add(a: int, b: int) -> int:
        return a + b

    async def main() -> int:
        first = await add.aenqueue(1, 2)
        many = await add.aenqueue_many([((1, 1), {})])
        assert (await app.aget_job(first)).args == [1, 2]
        assert await app.acancel(many[0]) == "cancelled"
        with pytest.raises(tether.JobWasCancelled):
            await app.await_result(many[0], timeout=10)
        with pytest.raises(TimeoutError):
            await app.await_result(first, timeout=0.2)
        await app.aclose()
        return threading.get_ident()

    loop_thread = run_unblocked(main)
    assert {"migrate", "enqueue", "get_job", "cancel", "wait_for_finish"} <= seen.keys(), seen
    on_loop = sorted(name for name, threads in seen.items() if loop_thread in threads)
    assert on_loop == [], f"called on the event loop: {on_loop}"


def _checked_out(app: object, kind: str) -> int:
    """Connections of this loop's async producer that are in use now (none while idle)."""
    loop = asyncio.get_running_loop()
    producer = app.store.async_producer()  # type: ignore[attr-defined]
    if kind == "postgres":
        pool = producer._pools[loop]
        return int(pool._size - len(pool._idle))
    return len(producer._clients[loop].client.connection_pool._in_use_connections)


@pytest.mark.slow
def test_waiters_on_a_listener_that_is_not_ready_leave_the_default_executor_free(
    tmp_path: Path,
) -> None:
    """While the PostgreSQL listener cannot trust its channel (here: another session holds
    the done key exclusively, so the listener cannot take its shared lock), async waiters
    read their jobs each second. They must not wait for readiness on the loop's default
    executor: many of them would fill it (6 threads on 2 cores) and starve every
    ``asyncio.to_thread`` of the application. The loop gets a 1-thread default executor:
    a user's call on it must still run at once."""
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    from tests.servers import PG_DSN

    with isolated_url("postgres", tmp_path) as url:
        store = open_store(url)
        store.migrate()
        job_id = store.enqueue([NewJob("t")])[0]
        key = store._connector.done_key  # type: ignore[attr-defined]
        try:
            with psycopg.connect(PG_DSN, autocommit=True) as holder:
                holder.execute("SELECT pg_advisory_lock(%s::bigint)", (key,))

                async def main() -> None:
                    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
                    producer = store.async_producer()
                    reads = 0
                    real_read = producer._finished_any  # type: ignore[attr-defined]

                    async def counted(ids: list[int]) -> bool:
                        nonlocal reads
                        reads += 1
                        found: bool = await real_read(ids)
                        return found

                    producer._finished_any = counted  # type: ignore[attr-defined]
                    waiters = [asyncio.create_task(producer.wait_for_finish([job_id], 60))
                               for _ in range(10)]
                    try:
                        # Each waiter past its first wait for readiness: a second read each.
                        deadline = asyncio.get_running_loop().time() + 50
                        while reads < 20:
                            assert asyncio.get_running_loop().time() < deadline, reads
                            await asyncio.sleep(0.05)
                        assert not store._listener.done_ready()  # type: ignore[attr-defined]
                        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 5) == 42
                    finally:
                        for waiter in waiters:
                            waiter.cancel()
                        await asyncio.gather(*waiters, return_exceptions=True)
                        await producer.aclose()

                run_unblocked(main)
        finally:
            store.close()


@pytest.mark.parametrize("which", ["postgres", "redis"])
def test_a_first_wait_needs_no_thread_of_the_default_executor(
    which: str, tmp_path: Path,
) -> None:
    """The first async wait of a process starts the store's listener (PostgreSQL LISTEN,
    Redis pub/sub). That start must not queue on the loop's default executor, which the
    application may have busy (here: its only thread is held): the wait still answers."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    with isolated_url(which, tmp_path) as url:
        store = open_store(url)
        store.migrate()
        job_id = store.enqueue([NewJob("t")])[0]
        assert store.cancel(job_id) == "cancelled"  # terminal: the wait answers at once
        release = threading.Event()

        async def main() -> None:
            loop = asyncio.get_running_loop()
            loop.set_default_executor(ThreadPoolExecutor(1))
            busy = loop.run_in_executor(None, release.wait, 60)  # the app's long call
            producer = store.async_producer()
            try:
                assert await asyncio.wait_for(producer.wait_for_finish([job_id], 5), 20)
            finally:
                release.set()
                await busy
                await producer.aclose()

        try:
            run_unblocked(main)
        finally:
            release.set()
            store.close()
