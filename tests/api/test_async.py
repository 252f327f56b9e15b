"""The async producer API never blocks the caller's event loop, and retries like the sync path.

The loop runs in debug mode with a small ``slow_callback_duration``: asyncio then logs every
callback (a step of a coroutine) that held the loop longer, which is what a blocking store
call inside a coroutine looks like. The test fails on any such log line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import pytest

import tether
from tests.worker.helpers import running
from tether._errors import StoreUnavailable

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
#: A step of a coroutine that holds the loop longer than this is reported. A blocking wait (up
#: to 1 s a slice), connect or migration takes longer; our own steps (encoding a job) take far
#: less. Not smaller: on a busy CI machine a descheduled process looks like a slow step too.
SLOW = 0.3


def run_watched(main: Callable[[], Coroutine[Any, Any, Any]],
                caplog: pytest.LogCaptureFixture) -> Any:
    """Run ``main`` on a debug loop and fail if asyncio reported a slow callback."""
    loop = asyncio.new_event_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW
    caplog.set_level(logging.WARNING, logger="asyncio")
    try:
        result = loop.run_until_complete(main())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    slow = [r.getMessage() for r in caplog.records
            if r.name == "asyncio" and "took" in r.getMessage()]
    assert slow == [], "the loop was blocked:\n" + "\n".join(slow)
    return result


def test_the_slow_callback_detector_catches_a_blocking_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import time

    async def blocking() -> None:
        time.sleep(SLOW * 2)  # what a sync store call inside a coroutine does

    with pytest.raises(AssertionError, match="the loop was blocked"):
        run_watched(blocking, caplog)


def test_the_async_api_does_not_block_the_loop(
    make_app: MakeApp, caplog: pytest.LogCaptureFixture,
) -> None:
    app = make_app()  # not opened yet: the first async call opens (and migrates) the store

    @app.task(max_attempts=1)
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def when(at: datetime) -> datetime:
        return at

    at = datetime(2026, 11, 23, tzinfo=UTC)

    async def produce() -> dict[str, Any]:
        one = await add.aenqueue(1, 2)
        many = await add.aenqueue_many([((i, i), {}) for i in range(5)], priority=1)
        typed = await when.options(delay=3600).aenqueue(at)
        raw = await app.aenqueue_jobs([add.new_job((10, 20), {})])
        view = await app.aget_job(typed)
        cancelled = await app.acancel(typed)
        return {"one": one, "many": many, "typed": typed, "raw": raw, "view": view,
                "cancelled": cancelled, "after": await app.aget_job(typed)}

    got = run_watched(produce, caplog)
    assert isinstance(got["one"], tether.JobId) and len(got["many"]) == 5
    view = got["view"]
    assert isinstance(view, tether.Job) and view.args == [at] and view.status == "pending"
    assert (view.run_at - view.created_at).total_seconds() == pytest.approx(3600, abs=5)
    assert got["cancelled"] == "cancelled" and got["after"].status == "cancelled"
    assert all(app.get_job(i).priority == 1 for i in got["many"])

    async def results() -> list[int]:
        ids = [got["one"], *got["many"], got["raw"][0]]
        return list(await asyncio.gather(*(app.await_result(i, timeout=30) for i in ids)))

    with running(app, concurrency=2):
        assert run_watched(results, caplog) == [3, 0, 2, 4, 6, 8, 30]

    async def close() -> None:
        await app.aclose()

    run_watched(close, caplog)


def test_aenqueue_retries_a_transient_failure_with_one_request_id(make_app: MakeApp) -> None:
    """Same rule as ``App.enqueue_jobs``: a lost reply is retried with the same request id,
    so the store answers from its record and the job is inserted once."""
    app = make_app()

    @app.task
    def ping(n: int) -> int:
        return n

    async def main() -> list[int]:
        producer = await app.runtime.async_producer()
        real = producer.enqueue
        seen: list[str | None] = []

        async def lossy(jobs: Any, *, request_id: str | None = None, conn: Any = None) -> Any:
            seen.append(request_id)
            result = await real(jobs, request_id=request_id)
            if len(seen) <= 2:
                raise StoreUnavailable("the reply was lost")  # the insert happened
            return result

        producer.enqueue = lossy  # type: ignore[method-assign]
        try:
            first = await ping.aenqueue(1)
            assert len(seen) == 3 and seen[0] is not None and len(set(seen)) == 1, seen
            await ping.aenqueue(2)
            assert seen[-1] != seen[0], "each call has its own request id"
            return [first]
        finally:
            producer.enqueue = real  # type: ignore[method-assign]

    [first] = asyncio.run(main())
    jobs = app.store.list_jobs()
    assert [j.id for j in jobs] == [first, first + 1] or len(jobs) == 2
    assert sorted(app.get_job(j.id).args[0] for j in jobs) == [1, 2]


def test_aclose_on_one_loop_closes_the_connections_of_the_others(tmp_path: Any) -> None:
    """An app used from two event loops (a server's loop and a background thread's): its
    ``aclose`` on one loop must not leave the other loop's Redis connections open (as the
    PostgreSQL producer drops the other loops' pools)."""
    import threading

    from tests.servers import isolated_url
    from tests.worker.helpers import wait_until

    with isolated_url("redis", tmp_path) as url:
        app = tether.App(url)
        job_id = app.enqueue("elsewhere.task")
        other = asyncio.new_event_loop()
        thread = threading.Thread(target=other.run_forever, daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(app.aget_job(job_id), other).result(30)
            producer = app.store.async_producer()
            pool = producer._clients[other].client.connection_pool  # type: ignore[attr-defined]

            def connected() -> int:
                return sum(1 for c in pool._available_connections if c.is_connected)

            assert connected() == 1

            async def main() -> None:
                await app.aget_job(job_id)
                await app.aclose()

            asyncio.run(main())
            wait_until(lambda: connected() == 0, 10, "the other loop's connection to close")
        finally:
            other.call_soon_threadsafe(other.stop)
            thread.join(10)
            other.close()
            app.close()
