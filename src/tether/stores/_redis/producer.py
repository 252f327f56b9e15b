"""The producer side of the Redis store (the :class:`~tether.stores._contract.Producer` role):
enqueue, cancel, read a job, wait for results, and the async producer (``aio.py``).

``wait_for_finish`` rides the store's one pub/sub subscription (:mod:`waker`): finish.lua,
cancel.lua and reap.lua publish the ids they ended on ``P:done`` at the end of the script (one
message per script). The waiter registers first and reads its jobs' status second (pub/sub
keeps nothing for late subscribers), then sleeps until a message names one of its ids or the
subscription was lost and came back. Enqueue and cancel are answered from the record of their
request id when repeated.

Workflows (issue #20): enqueue.lua refuses a batch naming an unknown parent before writing
anything (JobNotFound here); ``get_jobs`` (a chord's parents) and ``job_links`` are reads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from tether import _clock as clock
from tether import _limits as limits
from tether._errors import JobNotFound
from tether.stores._contract import CancelResult, JobLinks, JobRecord, NewJob
from tether.stores._per_loop import ProducerCache
from tether.stores._redis import rows as codec
from tether.stores._redis.aio import SUBSCRIBE_WAIT, RedisAsyncProducer
from tether.stores._redis.calls import CANCEL as _CANCEL
from tether.stores._redis.calls import request as _request
from tether.stores._redis.connection import io
from tether.stores._redis.waker import Waker


class RedisProducer(ProducerCache):
    """The :class:`~tether.stores._contract.Producer` role of :class:`RedisStore`."""

    prefix: str
    _client: Any
    _client_url: str
    _options: dict[str, Any]
    deadline: float
    _waker: Waker

    if TYPE_CHECKING:  # RedisStore's: run a script (registered at start / on first use)
        def _run(self, name: str, *args: Any) -> Any: ...

        def _key(self, *parts: str) -> str: ...

    def enqueue(
        self, jobs: Sequence[NewJob], *, now: float | None = None, request_id: str | None = None
    ) -> list[int]:
        limits.check_jobs(jobs)  # the whole batch, before any write
        if not jobs:
            return []
        rid, ttl = _request(request_id)
        reply = self._run("enqueue", codec.now_arg(now), rid, ttl, *codec.enqueue_args(jobs))
        return codec.enqueued_ids(reply)

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        job_id = limits.check_job_id(job_id)
        rid, ttl = _request(None)
        code = int(self._run("cancel", codec.now_arg(now), rid, ttl, str(job_id)))
        if code == 0:
            raise JobNotFound(job_id)
        return _CANCEL[code]

    def get_job(self, job_id: int) -> JobRecord | None:
        job_id = limits.check_job_id(job_id)
        with io():
            row = self._client.hgetall(self._key("job", str(job_id)))
        return codec.job_from_dict(cast(dict[str, str], row)) if row else None

    def get_jobs(self, job_ids: Sequence[int]) -> list[JobRecord]:
        """One pipelined HGETALL per distinct id: one round trip (reads only, so no script is
        needed; a job that ends between two reads is read as it is then, as get_job would)."""
        ids = codec.distinct_ids(job_ids)
        if not ids:
            return []
        with io():
            pipe = self._client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hgetall(self._key("job", str(job_id)))
            rows = pipe.execute()
        return [codec.job_from_dict(cast(dict[str, str], row)) for row in rows if row]

    def job_links(self, job_id: int) -> JobLinks:
        """job_links.lua: the job's fields, parents list and children index in one snapshot."""
        job_id = limits.check_job_id(job_id)
        reply = self._run("job_links", str(job_id))
        if not reply:
            raise JobNotFound(job_id)
        return codec.links_from_reply(job_id, reply)

    def _finished_any(self, ids: Sequence[int]) -> bool:
        with io():
            pipe = self._client.pipeline(transaction=False)
            for job_id in ids:
                pipe.hget(f"{self.prefix}:job:{job_id}", "status")
            statuses = pipe.execute()
        return any(s is None or s in ("done", "failed", "cancelled") for s in statuses)

    def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        """True once one of ``job_ids`` is terminal or gone (at once if it already is),
        False after ``timeout``. Raises StoreUnavailable only from the status read."""
        ids = [limits.check_job_id(i) for i in job_ids]
        deadline = clock.monotonic() + max(0.0, timeout)
        self._waker.subscribe_wait(min(SUBSCRIBE_WAIT, max(0.0, timeout)))
        event = threading.Event()
        key = self._waker.add_finish_waiter(ids, event.set)
        try:
            if self._finished_any(ids):
                return True
            if not self._waker.done_ready():
                with io():
                    self._client.publish(f"{self.prefix}:wake", "")  # the poke
                ready = min(SUBSCRIBE_WAIT, deadline - clock.monotonic())
                if self._waker.wait_done_ready(ready) and self._finished_any(ids):
                    return True
            return event.wait(max(0.0, deadline - clock.monotonic()))
        finally:
            self._waker.remove_finish_waiter(key)

    def _new_producer(self) -> RedisAsyncProducer:
        return RedisAsyncProducer(self.prefix, self._client_url, self._options, self._waker,
                                  self.deadline)


__all__ = ["RedisProducer"]
