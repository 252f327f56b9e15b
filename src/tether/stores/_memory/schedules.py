"""Periodic schedules of the memory store (issue #12): ``schedule_tick`` and ``schedules`` of the
:class:`~tether.stores._contract.Maintenance` role.

Invariant: a tick is recorded and its job enqueued in one step under the shared lock, iff no
tick at or after it is recorded for the schedule, so "one job per (schedule, tick)" holds
however many leaders (or replays of one call) try it.
"""

from __future__ import annotations

from tether.stores._contract import NewJob, ScheduleState
from tether.stores._memory.state import Shared
from tether.stores._schedule_args import check_spec, check_tick


class MemorySchedules:
    """The periodic-schedule part of :class:`MemoryStore`'s Maintenance role."""

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    def schedule_tick(
        self, name: str, tick: float, job: NewJob | None, *, now: float | None = None,
        spec: str | None = None,
    ) -> int | None:
        name, tick = check_tick(name, tick, job)  # the same checks, and errors, as every store
        spec = check_spec(spec)
        with self._db.tx() as db:
            t = db.now(now)
            state = db.schedules.get(name)
            if state is not None and state.last_tick >= tick:
                return None
            job_id = None if job is None else db.insert(job, t)
            last = job_id if job_id is not None else (state.last_job_id if state else None)
            kept = spec if spec is not None else (state.spec if state else None)
            db.schedules[name] = ScheduleState(name, tick, last, t, kept)
            if job_id is not None:
                db.changed()
            return job_id

    def schedules(self) -> list[ScheduleState]:
        with self._db.tx() as db:
            return [db.schedules[name] for name in sorted(db.schedules)]
