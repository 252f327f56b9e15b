"""The producer side of the PostgreSQL store (the :class:`~tether.stores._contract.Producer`
role): enqueue, cancel, read a job, wait for results, and the async producer (``aio.py``).

``enqueue(conn=)`` writes the jobs inside a caller's transaction (the
:class:`~tether.stores._contract.Transactional` ability); no method waits on a producer's open
transaction (enqueue locks no job row).

``wait_for_finish`` rides the store's one listening connection (:mod:`listen`): finish, cancel
and reap NOTIFY ``<schema>_done`` with the ids they ended, in the same statement (delivered at
commit; finish only while some process's listener holds the done key, see queries.sql).
The waiter registers first and reads its jobs' status second (again once the listener is
ready, the first time), so no finish falls between the two; after that it sleeps until a
notification names one of its ids (or says "any", or the listening connection came back from
an outage), never polling the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from tether import _clock as clock
from tether import _limits as limits
from tether._errors import JobNotFound
from tether.stores._contract import CancelResult, JobRecord, NewJob
from tether.stores._per_loop import ProducerCache
from tether.stores._postgres.aio import PostgresAsyncProducer
from tether.stores._postgres.connection import Conn
from tether.stores._postgres.enqueue_call import enqueue_call, ids_of
from tether.stores._postgres.listen import Listener
from tether.stores._postgres.plumbing import Plumbing, race


class PostgresProducer(ProducerCache, Plumbing):
    """The :class:`~tether.stores._contract.Producer` role of :class:`PostgresStore`."""

    _listener: Listener

    def enqueue(
        self,
        jobs: Sequence[NewJob],
        *,
        now: float | None = None,
        request_id: str | None = None,
        conn: Conn | None = None,
    ) -> list[int]:
        call = enqueue_call(jobs, now=now, channel=self.channel, request_id=request_id,
                            jobs_key=self._connector.jobs_key, gate=conn is None)
        if call is None:
            return []
        ids = ids_of(call, self._retrying(call.name, call.params, conn, race))
        self._watch.saw_ids(ids)
        return ids

    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        limits.check_job_id(job_id)
        row = self._one("cancel", {"id": job_id, "now": now, "done": self.done_channel,
                                   "channel": self.channel, "signal": self.signal_channel})
        if row is None:
            raise JobNotFound(job_id)
        return cast(CancelResult, row[0])

    def get_job(self, job_id: int) -> JobRecord | None:
        row = self._one("get_job", {"id": limits.check_job_id(job_id)})
        return None if row is None else JobRecord(*row)

    def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        """True once one of ``job_ids`` is terminal or gone (at once if it already is),
        False after ``timeout``. Raises StoreUnavailable only from the status read."""
        ids = [limits.check_job_id(i) for i in job_ids]
        deadline = clock.monotonic() + max(0.0, timeout)
        self._listener.start()
        waiter = self._listener.add_finish_waiter(ids)
        try:
            # Read before the first status read: a finish committed between that read and the
            # moment the listener became ready skipped its NOTIFY, so then one more read,
            # after readiness, is what sees it (CI caught the wait missing exactly that).
            ready_before = self._listener.done_ready()
            if self._finished_any(ids):
                return True
            if ready_before:
                return self._listener.wait_finish(waiter, deadline - clock.monotonic())
            if self._listener.listens and not self._listener.done_ready():
                self._one("notify", {"channel": self.channel, "queues": [""]})  # the poke
            # Until the listener is ready a finish may skip its NOTIFY: read again each second
            # (degraded: a listener that cannot get the done key, or is reconnecting), or
            # every 0.1 s behind a transaction pooler without a direct connection (poll.py),
            # and once more when it is.
            while True:
                step = min(self._listener.poll_every, deadline - clock.monotonic())
                ready = self._listener.wait_done_ready(max(0.0, step))
                if waiter.hit or self._finished_any(ids):
                    return True
                if ready:
                    break
                if step <= 0:
                    return False
            return self._listener.wait_finish(waiter, deadline - clock.monotonic())
        finally:
            self._listener.remove_finish_waiter(waiter)

    def _finished_any(self, ids: list[int]) -> bool:
        row = self._one("finished_any", {"ids": ids})
        return row is not None and bool(row[0])

    def _new_producer(self) -> PostgresAsyncProducer:
        return PostgresAsyncProducer(self._connector, self._listener, self.queries,
                                     self.channel)


__all__ = ["PostgresProducer"]
