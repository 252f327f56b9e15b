"""Periodic schedules of the PostgreSQL store (issue #12): ``schedule_tick`` and ``schedules``
of the :class:`~tether.stores._contract.Maintenance` role.

Invariant: **a tick and its job commit together, once.** ``schedule_tick`` runs, in one
transaction on one pool connection, the conditional upsert ``schedule_claim`` (``schedules.sql``),
then the store's own batch ``enqueue`` statement (so unique_key and its race rule hold exactly
as for any enqueue) and ``schedule_set_job``. The upsert's row lock orders concurrent callers:
one takes the tick, the others find it taken once the first commits and write nothing. A race
that a fresh snapshot resolves (a unique_key committed concurrently) rolls the whole
transaction back, tick included, and it runs again.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tether._errors import StoreError, StoreUnavailable
from tether.stores._contract import NewJob, ScheduleState
from tether.stores._postgres.plumbing import RACE_RETRIES, Plumbing, race
from tether.stores._schedule_args import check_spec, check_tick


def _enqueue_params(job: NewJob, channel: str, now: float | None) -> dict[str, Any]:
    """producers.sql ``enqueue`` parameters for a batch of one, without a request id (the
    tick itself is what dedups a replay). Never gated: it runs inside the tick's transaction,
    which would hold the jobs key to its end (see producers.sql)."""
    return {
        "now": now, "channel": channel, "request_id": None, "jobs_key": 0, "gate": False,
        "tasks": [job.task], "payloads": [job.payload], "queues": [job.queue],
        "priorities": [job.priority], "run_ats": [job.run_at], "delays": [float(job.delay)],
        "max_attempts": [job.max_attempts], "max_stalls": [job.max_stalls],
        "unique_keys": [job.unique_key], "limit_keys": [job.limit_key],
    }


class PostgresSchedules(Plumbing):
    """The periodic-schedule part of :class:`PostgresStore`'s Maintenance role."""

    def schedule_tick(
        self, name: str, tick: float, job: NewJob | None, *, now: float | None = None,
        spec: str | None = None,
    ) -> int | None:
        name, tick = check_tick(name, tick, job)
        claim = {"name": name, "tick": tick, "now": now, "spec": check_spec(spec)}
        for attempt in range(RACE_RETRIES):
            try:
                return self._schedule_tick_once(claim, job, now)
            except StoreError as exc:
                cause = exc.__cause__
                if not isinstance(cause, psycopg.Error) or not race(cause):
                    raise
                if attempt == RACE_RETRIES - 1:
                    raise StoreUnavailable(f"{exc} (a concurrent write raced this one; "
                                           "retry)") from cause
        raise AssertionError("unreachable")

    def _schedule_tick_once(
        self, claim: dict[str, Any], job: NewJob | None, now: float | None
    ) -> int | None:
        q = self.queries
        with self._connector.connection() as conn, conn.transaction():
            if conn.execute(q["schedule_claim"], claim).fetchone() is None or job is None:
                return None
            [(job_id,)] = conn.execute(q["enqueue"],
                                       _enqueue_params(job, self.channel, now)).fetchall()
            conn.execute(q["schedule_set_job"], {"name": claim["name"], "job_id": job_id})
        return int(job_id)

    def schedules(self) -> list[ScheduleState]:
        with self._connector.connection() as conn:
            rows = conn.execute(self.queries["schedules_list"]).fetchall()
        return [ScheduleState(str(r[0]), float(r[1]), None if r[2] is None else int(r[2]),
                              float(r[3]), None if r[4] is None else str(r[4])) for r in rows]
