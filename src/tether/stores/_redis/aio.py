"""The async producer of the Redis store (issue #12): the
:class:`~tether.stores._contract.AsyncProducer` that ``RedisProducer.async_producer`` hands out
(``producer.py``).

It is ``redis.asyncio`` (one client per event loop: its connections belong to the loop)
running the very same Lua scripts with the same arguments, so the request-id replay record and
every check are the sync store's; redis-py errors go through the same :func:`connection.io`.
Its waits use the store's one subscription (:mod:`waker`): the listener's thread hands
wake-ups to the loop with ``call_soon_threadsafe``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff

from tether import _clock as clock
from tether import _limits as limits
from tether._errors import ConfigError, JobNotFound
from tether.stores._aio import until_ready
from tether.stores._contract import CancelResult, JobRecord, NewJob
from tether.stores._per_loop import PerLoop, threadsafe_wake
from tether.stores._redis import calls
from tether.stores._redis import rows as codec
from tether.stores._redis.calls import CANCEL, request, script_text
from tether.stores._redis.connection import io, one_line, timeouts
from tether.stores._redis.waker import Waker


def _raise_if_cancelled() -> None:
    """Raise the cancellation a redis-py call swallowed (its command returned normally, the
    request stayed on the task): without this a waiter cancelled by ``asyncio.wait_for(...,
    0.2)`` then slept its whole own timeout (seen under load, 1 call in 8; redis 8.1)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


#: How long a sync waiter waits for the subscription before reading (the server may be down).
SUBSCRIBE_WAIT = 3.0
_SCRIPTS = ("enqueue", "cancel")


def aconnect(url: str, options: dict[str, Any], deadline: float) -> redis.asyncio.Redis:
    """A ``redis.asyncio`` client with the sync client's settings (see ``connection.connect``):
    every wait within the store's deadline, one quick retry on a connection error, which may
    replay a script; every script is replay-safe."""
    settings: dict[str, Any] = {
        **timeouts(deadline),
        "health_check_interval": 15,
        # Connection errors only, as the sync client: its default also retried a timeout,
        # which waited out the deadline twice (10 s on a partition, at a 5 s deadline).
        "retry": AsyncRetry(ExponentialBackoff(cap=0.5, base=0.05), 1, (redis.ConnectionError,)),
        "retry_on_error": [redis.ConnectionError],
        "retry_on_timeout": False,
    }
    settings.update(options)
    settings["decode_responses"] = True
    try:
        return redis.asyncio.Redis.from_url(url, **settings)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"redis client options: {one_line(exc)}") from exc


class _LoopClient:
    """One loop's client and its registered scripts."""

    def __init__(self, url: str, options: dict[str, Any], deadline: float) -> None:
        self.client = aconnect(url, options, deadline)
        self.scripts = {n: self.client.register_script(script_text(n)) for n in _SCRIPTS}


class RedisAsyncProducer:
    """:class:`tether.stores._contract.AsyncProducer` on ``redis.asyncio``."""

    def __init__(self, prefix: str, url: str, options: dict[str, Any], waker: Waker,
                 deadline: float) -> None:
        self._prefix = prefix
        self._url = url
        self._options = options
        self._deadline = deadline
        self._waker = waker
        self._clients: PerLoop[_LoopClient] = PerLoop()

    @property
    def closed(self) -> bool:
        return self._clients.closed

    def _loop_client(self) -> _LoopClient:
        return self._clients.get(lambda: _LoopClient(self._url, self._options, self._deadline))

    async def _run(self, name: str, *args: str) -> Any:
        scripts = self._loop_client().scripts
        with io():
            return await calls.arun(scripts[name], [self._prefix, *args])

    async def enqueue(
        self, jobs: Sequence[NewJob], *, request_id: str | None = None, conn: Any = None
    ) -> list[int]:
        if conn is not None:
            raise TypeError("conn= is not supported by the redis store's async producer "
                            "(only PostgreSQL enqueues inside a caller's transaction)")
        limits.check_jobs(jobs)  # the whole batch, before any write
        if not jobs:
            return []
        rid, ttl = request(request_id)
        reply = await self._run("enqueue", codec.now_arg(None), rid, ttl,
                                *codec.enqueue_args(jobs))
        return codec.enqueued_ids(reply)  # JobNotFound for an unknown parent, as the sync one

    async def get_job(self, job_id: int) -> JobRecord | None:
        job_id = limits.check_job_id(job_id)
        client = self._loop_client().client
        with io():
            row = await client.hgetall(f"{self._prefix}:job:{job_id}")
        return codec.job_from_dict(cast(dict[str, str], row)) if row else None

    async def cancel(self, job_id: int) -> CancelResult:
        job_id = limits.check_job_id(job_id)
        rid, ttl = request(None)
        code = int(await self._run("cancel", codec.now_arg(None), rid, ttl, str(job_id)))
        if code == 0:
            raise JobNotFound(job_id)
        return CANCEL[code]

    async def _finished_any(self, ids: Sequence[int]) -> bool:
        client = self._loop_client().client
        with io():
            async with client.pipeline(transaction=False) as pipe:
                for job_id in ids:
                    pipe.hget(f"{self._prefix}:job:{job_id}", "status")
                statuses = await pipe.execute()
        return any(s is None or s in ("done", "failed", "cancelled") for s in statuses)

    async def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        ids = [limits.check_job_id(i) for i in job_ids]
        if not self._waker.ready():  # the subscription's first connection: off the loop
            self._waker.subscribe_wait(0.0)  # starts its thread; waiting is ours, on the loop
            await until_ready(self._waker.ready, min(SUBSCRIBE_WAIT, max(0.0, timeout)))
        woken, wake = threadsafe_wake()
        deadline = clock.monotonic() + max(0.0, timeout)
        key = self._waker.add_finish_waiter(ids, wake)
        try:
            if await self._finished_any(ids):
                return True
            _raise_if_cancelled()
            if not self._waker.done_ready():
                client = self._loop_client().client
                with io():
                    await client.publish(f"{self._prefix}:wake", "")  # the poke
                _raise_if_cancelled()
                ready = min(SUBSCRIBE_WAIT, deadline - clock.monotonic())
                listening = await until_ready(self._waker.done_ready, ready)
                if listening and await self._finished_any(ids):
                    return True
            _raise_if_cancelled()
            try:
                await asyncio.wait_for(woken, max(0.0, deadline - clock.monotonic()))
            except TimeoutError:
                return False
            return True
        finally:
            self._waker.remove_finish_waiter(key)

    async def aclose(self) -> None:
        """Close this loop's client politely; another loop's client is closed on its own
        loop (scheduled there, not awaited: this loop must not wait on another's), or left to
        end with its loop when that one no longer runs."""
        loop = asyncio.get_running_loop()
        for owner, client in self._clients.close().items():
            if owner is loop:
                try:
                    await client.client.aclose()
                except (redis.RedisError, OSError):
                    pass
            elif owner.is_running() and not owner.is_closed():
                try:
                    asyncio.run_coroutine_threadsafe(client.client.aclose(), owner)
                except RuntimeError:  # that loop closed meanwhile: its sockets went with it
                    pass

    def close(self) -> None:
        """From ``Store.close()``: needs no loop. A client whose loop still runs in another
        thread is closed there (waiting up to 2 s); otherwise its connections are dropped with
        their loop: the sockets close when the loop or the process ends."""
        for loop, client in self._clients.close().items():
            if loop.is_running() and not loop.is_closed():
                try:
                    running = asyncio.get_running_loop()
                except RuntimeError:
                    running = None
                if running is loop:
                    loop.create_task(client.client.aclose())
                    continue
                future = asyncio.run_coroutine_threadsafe(client.client.aclose(), loop)
                try:
                    future.result(2.0)
                except Exception:  # best effort: the loop may be stopping
                    pass


__all__ = ["SUBSCRIBE_WAIT", "RedisAsyncProducer", "aconnect"]
