"""The scheduler: the maintenance duty that turns periodic schedules into jobs (issue #12).

Run by the leader of the ``maintenance:schedule`` election (``maintainer.py``). Invariants:

* **The store dedups, not this loop.** Each round reads the store's clock and every schedule's
  last recorded tick (``Store.schedules``), and offers the due tick to
  ``Store.schedule_tick``, which records it and enqueues its job in one atomic write iff no
  tick >= it is recorded. A leader paused mid-round that wakes after another took over, or a
  call repeated after a lost reply, therefore enqueues nothing: exactly one job per
  (schedule, tick) across the fleet. Nothing is kept in memory between rounds.
* **Catch-up** after a time with no leader (ticks in ``(last tick, now]``): ``latest`` enqueues
  only the most recent; ``all`` enqueues every one, at most :data:`MAX_CATCH_UP` (older ones
  are passed over and reported); ``none`` enqueues the most recent only if it is at most
  :data:`ON_TIME` seconds old, else records it as skipped (``job=None``). In steady state one
  tick is due per round and every policy enqueues it.
* **A new schedule starts at its next tick:** the first round that finds no record for it
  records the store's now as a skipped tick (where it starts), so nothing before that runs.
  So does a schedule whose spec or zone changed since its latest recorded tick: the new spec's
  ticks before the change were never due, and catching them up would enqueue a burst
  (``all``) or an unplanned run (``latest``). Every tick is recorded with
  ``Schedule.fingerprint`` in the schedule's own record (``ScheduleState.spec``), which is
  never pruned; it was once read from the last job only, and a deploy after the pruner
  removed that job caught up from scratch (a weekly schedule made hourly enqueued 72 jobs).
* **It sleeps until the next tick** (by the store's clock), at most :data:`MAX_SLEEP`.
* **One schedule's failure is not every schedule's:** an error offering one schedule's tick
  (the store refusing its job, the store going away mid-round) does not stop the round; the
  others are still offered, then the first error is raised for the maintainer to log and
  retry the round.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from tether._events import Events
from tether._periodic import Schedule, fingerprint_of
from tether.stores._contract import Maintenance, ScheduleState

log = logging.getLogger("tether.scheduler")
#: ``catch_up="all"`` enqueues at most this many missed ticks of one schedule per round.
MAX_CATCH_UP = 100
#: ``catch_up="none"``: a tick this many seconds old or less still counts as due now.
ON_TIME = 5.0
#: The longest sleep between rounds (a new leader elsewhere, a clock step: look again).
MAX_SLEEP = 30.0


class Scheduler:
    def __init__(self, store: Maintenance, schedules: Sequence[Schedule], events: Events,
                 holder: str) -> None:
        self.store = store
        self.schedules = list(schedules)
        self.events = events
        self.holder = holder

    def run_once(self, now: float | None = None) -> float:
        """One round over every schedule; returns seconds until the next tick is due.
        ``now``: the store's clock unless a test drives time."""
        now = self.store.now() if now is None else now
        known = {s.name: s for s in self.store.schedules()}
        wake = now + MAX_SLEEP
        failed: Exception | None = None
        for schedule in self.schedules:
            try:
                last = self._round(schedule, known.get(schedule.name), now)
            except Exception as exc:
                log.debug("schedule %s failed this round: %s", schedule.name, exc)
                failed = failed or exc
                continue
            wake = min(wake, schedule.next_after(max(last, now)))
        if failed is not None:
            raise failed
        return max(0.0, wake - now)

    def _round(self, schedule: Schedule, state: ScheduleState | None, now: float) -> float:
        """Offer what is due of one schedule; returns its latest tick now recorded."""
        if state is None:
            self.store.schedule_tick(schedule.name, now, None, now=now,
                                     spec=schedule.fingerprint)
            self._skipped(schedule, now, "start", 0)
            log.info("schedule %s starts now; first tick at %s", schedule.name,
                     _iso(schedule.next_after(now)))
            return now
        last = state.last_tick
        limit = MAX_CATCH_UP if schedule.catch_up == "all" else 1
        due = schedule.ticks_between(last, now, limit)
        if not due:
            return last
        passed = 0 if len(due) < limit else _count_before(schedule, last, due[0])
        if (len(due) > 1 or passed or now - due[-1] > ON_TIME) \
                and self._changed(schedule, state):
            self.store.schedule_tick(schedule.name, now, None, now=now,
                                     spec=schedule.fingerprint)
            self._skipped(schedule, now, "spec changed", passed + len(due))
            log.info("schedule %s changed since its last job; it starts afresh, first tick at "
                     "%s", schedule.name, _iso(schedule.next_after(now)))
            return now
        if passed:
            self._skipped(schedule, due[0], f"catch_up={schedule.catch_up}", passed)
        if schedule.catch_up == "none" and now - due[-1] > ON_TIME:
            self.store.schedule_tick(schedule.name, due[-1], None, now=now,
                                     spec=schedule.fingerprint)
            self._skipped(schedule, due[-1], "catch_up=none", 1)
            return due[-1]
        for tick in due:
            job_id = self.store.schedule_tick(schedule.name, tick, schedule.new_job(tick),
                                              now=now, spec=schedule.fingerprint)
            if job_id is None:
                log.debug("schedule %s tick %s was recorded already", schedule.name, tick)
                continue
            log.info("schedule %s: tick %s enqueued as job %d", schedule.name, _iso(tick),
                     job_id)
            self.events.emit("schedule_enqueued", job_id=job_id, worker=self.holder,
                             detail={"schedule": schedule.name, "task": schedule.task.name,
                                     "tick": tick})
        return due[-1]

    def _changed(self, schedule: Schedule, state: ScheduleState) -> bool:
        """Whether the schedule's latest tick was recorded under another spec or zone (a
        deploy changed it): then the new spec's ticks since were never due, not missed. The
        schedule's own record says so; a record from an older release has no spec, and then
        the last job's envelope is read (unknown, its job pruned, counts as the same)."""
        if state.spec is not None:
            return state.spec != schedule.fingerprint
        if state.last_job_id is None:
            return False
        job = self.store.get_job(state.last_job_id)
        seen = None if job is None else fingerprint_of(job.payload)
        return seen is not None and seen != schedule.fingerprint

    def _skipped(self, schedule: Schedule, tick: float, why: str, missed: int) -> None:
        if missed:
            log.warning("schedule %s: %d missed tick(s) before %s passed over (%s)",
                        schedule.name, missed, _iso(tick), why)
        self.events.emit("schedule_skipped", worker=self.holder,
                         detail={"schedule": schedule.name, "task": schedule.task.name,
                                 "tick": tick, "why": why, "missed": missed})


def _iso(tick: float) -> str:
    return datetime.fromtimestamp(tick, UTC).isoformat()


def _count_before(schedule: Schedule, last: float, first: float) -> int:
    """How many ticks lie in ``(last, first)``, counted up to a bound (for the report only)."""
    n, t = 0, schedule.next_after(last)
    while t < first and n < 10_000:
        n += 1
        t = schedule.next_after(t)
    return n
