"""Periodic schedules of the SQLite store (issue #12): ``schedule_tick`` and ``schedules`` of the
:class:`~tether.stores._contract.Maintenance` role.

Invariant: **a tick and its job commit together, once.** ``schedule_tick`` runs the conditional
upsert of ``schedules.sql`` and the job's insert (through ``enqueue``'s own statements, so its
unique_key rule holds) in one ``BEGIN IMMEDIATE`` transaction. The write lock serialises every
caller (threads and processes), so of several leaders or replays offering the same tick exactly
one finds ``last_tick < tick`` and enqueues; the others write nothing and get None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.stores import _queries as queries
from tether.stores._contract import NewJob, ScheduleState
from tether.stores._schedule_args import check_spec, check_tick
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.rows import Q, store_now

S = queries.load("tether.stores._sqlite", "schedules.sql")


class SQLiteSchedules:
    """The periodic-schedule part of :class:`SQLiteStore`'s Maintenance role."""

    _db: Connections

    if TYPE_CHECKING:
        def notify(self, queues: Sequence[str]) -> None: ...

    @guarded
    def schedule_tick(
        self, name: str, tick: float, job: NewJob | None, *, now: float | None = None,
        spec: str | None = None,
    ) -> int | None:
        name, tick = check_tick(name, tick, job)
        spec = check_spec(spec)
        row: dict[str, Any] | None = None
        if job is not None:
            row = {"task": job.task, "queue": job.queue, "payload": job.payload,
                   "priority": job.priority, "run_at": job.run_at, "delay": job.delay,
                   "max_attempts": job.max_attempts, "max_stalls": job.max_stalls,
                   "unique_key": job.unique_key, "limit_key": job.limit_key}
        job_id: int | None = None
        with self._db.write() as conn:
            t = store_now(conn, now)
            cur = conn.cursor()
            taken = cur.execute(S["schedule_claim"],
                                {"name": name, "tick": tick, "now": t, "spec": spec})
            if taken.fetchone() is None:
                return None
            if row is None:
                return None
            row["now"] = t
            found = None
            if row["unique_key"] is not None:
                found = cur.execute(Q["enqueue_find_unique"], row).fetchone()
            if found is not None:
                job_id = int(found[0])
            else:
                cur.execute(Q["enqueue_insert"], row)
                job_id = int(cur.lastrowid or 0)
            cur.execute(S["schedule_set_job"], {"name": name, "job_id": job_id})
        if job is not None:
            self.notify((job.queue,))
        return job_id

    @guarded
    def schedules(self) -> list[ScheduleState]:
        rows = self._db.get().execute(S["schedules_list"]).fetchall()
        return [ScheduleState(str(r[0]), float(r[1]), None if r[2] is None else int(r[2]),
                              float(r[3]), None if r[4] is None else str(r[4])) for r in rows]
