"""The producer side of the SQLite store (the :class:`~tether.stores._contract.Producer`
role): enqueue, cancel, read a job, wait for results, and the async producer.

SQLite has no notifications between processes, so a waiter re-reads its jobs' status every
:data:`POLL` seconds (a primary-key probe with no transaction open; no write lock is ever
taken). Inside one process, ``finish``, ``cancel`` and ``reap_expired`` of this store object
wake waiters at once through a condition variable (:meth:`SQLiteProducer._announce_finished`),
so a job finished by a worker thread of the same store is seen without waiting for the poll.

The async producer is the shared :class:`tether.stores._aio.ThreadedProducer`: SQLite's driver
is synchronous, so its calls run in threads. An ``enqueue`` with a ``request_id`` records it in
the ``requests`` table in its own transaction, and a repeat within 24 h is answered from it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether import _clock as clock
from tether._errors import JobNotFound
from tether._limits import check_job_id, check_jobs
from tether.stores import _queries as queries
from tether.stores._aio import ThreadedProducer
from tether.stores._batches import only_payloads_differ
from tether.stores._contract import AsyncProducer, CancelResult, JobRecord, NewJob, Store
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.links import BatchParents, resolve
from tether.stores._sqlite.rows import Q, checked_request_id, job_from_row, store_now

AIO = queries.load("tether.stores._sqlite", "aio.sql")
#: Seconds between two reads of a waiter's jobs (what other processes' finishes cost).
POLL = 0.05


def _shared(jobs: Sequence[NewJob]) -> tuple[object, ...] | None:
    """enqueue_insert_shared's parameters but ``now`` when only the payloads of the batch
    differ (``only_payloads_differ``), else None (then enqueue_insert_many, a row of
    parameters per job); the statement binds the first job's other values."""
    if not only_payloads_differ(jobs):
        return None
    first = jobs[0]
    payloads = _PAYLOADS.encode([job.payload for job in jobs])
    return (first.task, first.queue, payloads, first.priority, first.run_at, first.delay,
            first.max_attempts, first.max_stalls, first.limit_key)


#: The payloads of a shared batch as one JSON array of strings (json_each reads it back);
#: non-ASCII text as it is (the payloads were checked to be valid UTF-8).
_PAYLOADS = json.JSONEncoder(ensure_ascii=False)


class _Replay(Exception):
    """Raised inside the write transaction to roll back a replayed single enqueue's job."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.reply = reply


class SQLiteProducer:
    """The :class:`~tether.stores._contract.Producer` role of :class:`SQLiteStore`."""

    _db: Connections

    if TYPE_CHECKING:
        def notify(self, queues: Sequence[str]) -> None: ...  # SQLiteLeases'

        def signal_local(self) -> None: ...  # SQLiteLeases'

    @guarded
    def enqueue(
        self,
        jobs: Sequence[NewJob],
        *,
        now: float | None = None,
        request_id: str | None = None,
    ) -> list[int]:
        """Insert the batch in one transaction. With ``request_id``, a repeat of the call
        within 24 h inserts nothing and returns the first call's ids. Jobs with ``after`` are
        inserted with their links (links.py) once every parent id was found."""
        check_jobs(jobs)
        request_id = checked_request_id(request_id)
        if not jobs:
            return []
        if len(jobs) == 1 and jobs[0].unique_key is None and not jobs[0].after:
            return self._enqueue_one(jobs[0], now, request_id)
        parents = BatchParents.of(jobs)
        if parents is None and len(jobs) > 1 and all(job.unique_key is None for job in jobs):
            return self._enqueue_plain(jobs, now, request_id)
        rows = [
            {
                "task": job.task,
                "queue": job.queue,
                "payload": job.payload,
                "priority": job.priority,
                "run_at": job.run_at,
                "delay": job.delay,
                "max_attempts": job.max_attempts,
                "max_stalls": job.max_stalls,
                "unique_key": job.unique_key,
                "limit_key": job.limit_key,
                "now": now,
            }
            for job in jobs
        ]
        if parents is not None:
            parents.annotate(rows)
        request = {"kind": "enqueue", "request_id": request_id, "reply": "", "now": now}
        ids: list[int] = []
        find, insert = Q["enqueue_find_unique"], Q["enqueue_insert"]
        with self._db.write() as conn:
            t = request["now"] = store_now(conn, now)
            cur = conn.cursor()
            replay = None
            if request_id is not None:
                replay = cur.execute(Q["request_find"], request).fetchone()
            if replay is None:
                if parents is not None:
                    parents.check(cur)
                for row in rows:
                    row["now"] = t
                    if row["unique_key"] is not None:
                        found = cur.execute(find, row).fetchone()
                        if found is not None:
                            ids.append(found[0])
                            continue
                    if parents is not None and row["after"] is not None:
                        ids.append(parents.insert(cur, row))
                        continue
                    cur.execute(insert, row)
                    ids.append(int(cur.lastrowid or 0))
                if parents is not None:
                    parents.link(cur)
                if request_id is not None:
                    request["reply"] = json.dumps(ids)
                    cur.execute(Q["request_insert"], request)
        if replay is not None:
            return [int(i) for i in json.loads(replay[0])]
        self.notify(tuple({job.queue for job in jobs}))
        return ids

    def _enqueue_one(self, job: NewJob, now: float | None, request_id: str | None) -> list[int]:
        """One job without unique_key or parents: two statements in the transaction
        (enqueue_one, request_put_one), the clock read inside them. A replay is found by the
        request record's upsert changing no row, after the job was inserted: the job is rolled
        back with the transaction and the recorded reply returned (replays are rare, the
        first call is not)."""
        params = (job.task, job.queue, job.payload, job.priority, job.run_at, job.delay,
                  job.max_attempts, job.max_stalls, job.limit_key, now)
        try:
            with self._db.write() as conn:
                job_id = int(conn.execute(Q["enqueue_one"], params).lastrowid or 0)
                if request_id is not None and conn.execute(
                        Q["request_put_one"], (request_id, f"[{job_id}]", now)).rowcount == 0:
                    raise _Replay(conn.execute(Q["request_reply"], (request_id,)).fetchone()[0])
        except _Replay as replay:
            return [int(i) for i in json.loads(replay.reply)]
        self.notify((job.queue,))
        return [job_id]

    def _enqueue_plain(
        self, jobs: Sequence[NewJob], now: float | None, request_id: str | None
    ) -> list[int]:
        """A batch without unique keys or parents: one executemany (enqueue_insert_many), the
        ids read back as the consecutive run that ends at the last one inserted."""
        shared = _shared(jobs)
        params = [] if shared is not None else [
            (job.task, job.queue, job.payload, job.priority, job.run_at, job.delay,
             job.max_attempts, job.max_stalls, job.limit_key)
            for job in jobs
        ]
        request = {"kind": "enqueue", "request_id": request_id, "reply": "", "now": now}
        replay = None
        with self._db.write() as conn:
            t = request["now"] = store_now(conn, now)
            cur = conn.cursor()
            if request_id is not None:
                replay = cur.execute(Q["request_find"], request).fetchone()
            if replay is None:
                tail = (t,)
                if shared is not None:
                    cur.execute(Q["enqueue_insert_shared"], shared + tail)
                else:
                    cur.executemany(Q["enqueue_insert_many"], [p + tail for p in params])
                last = int(cur.execute(Q["last_insert_id"]).fetchone()[0])
                ids = list(range(last - len(jobs) + 1, last + 1))
                if request_id is not None:
                    request["reply"] = json.dumps(ids)
                    cur.execute(Q["request_insert"], request)
        if replay is not None:
            return [int(i) for i in json.loads(replay[0])]
        self.notify(tuple({job.queue for job in jobs}))
        return ids

    @guarded
    def cancel(self, job_id: int, *, now: float | None = None) -> CancelResult:
        job_id = check_job_id(job_id)
        released = False
        with self._db.write() as conn:
            t = store_now(conn, now)
            row = conn.execute(Q["cancel"], {"id": job_id, "now": t}).fetchone()
            exists = row is not None or conn.execute(Q["job_exists"], {"id": job_id}).fetchone()
            if row is not None and row[0] == "cancelled" and row[1]:
                released, _ = resolve(conn, [[job_id, "cancelled"]], t)
        if not exists:
            raise JobNotFound(job_id)
        if row is None:
            return "finished"
        if row[0] == "cancelled":
            if released:
                self.notify(())
            self._announce_finished()
            return "cancelled"
        self.signal_local()  # its holder heartbeats now, if it waits in this process
        return "requested"

    @guarded
    def get_job(self, job_id: int) -> JobRecord | None:
        row = self._db.get().execute(Q["get_job"], {"id": check_job_id(job_id)}).fetchone()
        return None if row is None else job_from_row(row)

    def _aio_init(self) -> None:
        self._finished = threading.Condition()
        self._finished_gen = 0
        self._producer: ThreadedProducer | None = None
        self._producer_lock = threading.Lock()

    def _announce_finished(self) -> None:
        """Wake this store's waiters: a job of theirs may have become terminal."""
        with self._finished:
            self._finished_gen += 1
            self._finished.notify_all()

    @guarded
    def _finished_any(self, ids: str) -> bool:
        row = self._db.get().execute(AIO["finished_any"], {"ids": ids}).fetchone()
        return bool(row[0])

    def wait_for_finish(self, job_ids: Sequence[int], timeout: float) -> bool:
        """True as soon as one of ``job_ids`` is terminal (or gone); False after ``timeout``.
        Woken at once by this store object's own finishes, otherwise by a poll every 50 ms."""
        ids = json.dumps([check_job_id(i) for i in job_ids])
        deadline = clock.monotonic() + max(0.0, timeout)
        while True:
            with self._finished:
                generation = self._finished_gen
            if self._finished_any(ids):
                return True
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                return False
            with self._finished:
                if self._finished_gen == generation:
                    self._finished.wait(min(POLL, remaining))

    def async_producer(self) -> AsyncProducer:
        with self._producer_lock:
            if self._producer is None or self._producer.closed:
                store: Store = self  # type: ignore[assignment]
                self._producer = ThreadedProducer(store)
            return self._producer

    def _close_aio(self) -> None:
        with self._producer_lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close()
        self._announce_finished()
