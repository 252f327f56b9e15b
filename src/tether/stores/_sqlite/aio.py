"""Waiting for results and the async producer of the SQLite store (issue #12), a mixin of
SQLiteStore.

SQLite has no notifications between processes, so a waiter re-reads its jobs' status every
:data:`POLL` seconds (a primary-key probe with no transaction open; no write lock is ever
taken). Inside one process, ``finish``, ``cancel`` and ``reap_expired`` of this store object
wake waiters at once through a condition variable (:meth:`AsyncMixin._announce_finished`), so
a job finished by a worker thread of the same store is seen without waiting for the poll.

The async producer is the shared :class:`tether.stores._aio.ThreadedProducer`: SQLite's driver
is synchronous, so its calls run in threads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from tether import _clock as clock
from tether._limits import check_job_id
from tether.stores import _queries as queries
from tether.stores._aio import ThreadedProducer
from tether.stores._contract import AsyncProducer, Store
from tether.stores._sqlite.connection import Connections, guarded

AIO = queries.load("tether.stores._sqlite", "aio.sql")
#: Seconds between two reads of a waiter's jobs (what other processes' finishes cost).
POLL = 0.05


class AsyncMixin:
    _db: Connections

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
