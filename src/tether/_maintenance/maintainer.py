"""The maintainer: runs the reaper (with store housekeeping) and the pruner, each under its own
leadership unless election is off.

Runs as a thread inside each worker (by default) or alone as ``tether reaper``.

Invariants:

* **One election per duty.** Reaping (election ``maintenance``) and pruning (election
  ``maintenance:prune``) are led separately, and a maintainer only campaigns for the duties it
  performs. So the documented set-up, workers with ``reaper_interval=0`` plus ``tether reaper``,
  always has an able reaper in the lead: the workers' prune-only maintainers cannot win the
  reaper's election and then not reap (which left a dead worker's jobs ``running`` forever).
* **Periodic schedules** (issue #12) are a third duty with its own election
  (``maintenance:schedule``), campaigned for only by maintainers that were given schedules;
  ``scheduler.py`` holds its rules (the store dedups each tick).
* **Settings are compared.** Each leader's holder string carries the settings its duty
  depends on (``fingerprint.py``); every maintainer reads the current leaders
  (``Store.leader_get``) and logs at ERROR, once per change of leader, when they disagree with
  its own.
* **Dead processes are found in a fraction of a second** (issue #22, ``deathwatch.py``): each
  round that is due (every ``death_check_interval``) asks the store which liveness tokens
  were released; a dead holder of one of our elections has its lease released through its
  own fence, so the election runs at once in the same round, and the reap leader takes the
  dead workers' jobs back in the same round too. A store (or URL) that cannot detect death
  has no watch: the lease alone decides.
* **It never dies of a store error**: every exception from one store call is logged and the
  call retried later; ``StoreGone`` and its own bugs stop the worker that hosts it, because a
  worker without its reaper would quietly break the recovery bound.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from tether import _clock as clock
from tether._config import Settings
from tether._errors import StoreGone
from tether._events import Events
from tether._loop import Loop
from tether._maintenance import fingerprint
from tether._maintenance.deathwatch import DeathWatch, WatchedStore
from tether._maintenance.leadership import LeaderElector, split_holder
from tether._maintenance.pruner import Pruner
from tether._maintenance.reaper import Reaper
from tether._maintenance.scheduler import Scheduler
from tether._periodic import Schedule
from tether.stores._contract import Liveness, Maintenance

log = logging.getLogger("tether.maintainer")
ELECTION = "maintenance"  # the reaper's (the name predates per-duty elections)
PRUNE_ELECTION = "maintenance:prune"
SCHEDULE_ELECTION = "maintenance:schedule"
HOUSEKEEPING_EVERY = 2.0  # a statistics read; the VACUUM it may start runs on its own thread
CHECK_EVERY = 10.0  # how often the leaders' settings are compared with ours (two reads)
#: The reaper's longest sleep when the settings disable it in workers (``reaper_interval=0``)
#: but this maintainer reaps anyway (``tether reaper``).
STANDALONE_REAP_EVERY = 5.0


@dataclass(eq=False)
class Duty:
    name: str  # "reap", "prune" or "schedule"
    election: str
    keys: dict[str, str]
    tag: str
    elector: LeaderElector | None
    next_election: float = 0.0
    next_run: float = 0.0
    failures: int = 0

    @property
    def acting(self) -> bool:
        return self.elector is None or self.elector.is_leader


class Maintainer(Loop):
    def __init__(
        self,
        store: Maintenance,
        holder: str,
        settings: Settings,
        events: Events,
        *,
        on_fatal: Callable[[BaseException], None] | None = None,
        reap: bool = True,
        schedules: Sequence[Schedule] = (),
    ) -> None:
        super().__init__("tether-maintainer", log=log, on_fatal=on_fatal, died="maintainer died")
        self.store = store
        self.holder = holder
        self.settings = settings
        interval = settings.reap_every or min(STANDALONE_REAP_EVERY, settings.lease_ttl)
        self.reaper = Reaper(store, events, stall_grace=settings.stall_grace,
                             interval=interval) if reap else None
        self.pruner = Pruner(store, {
            "done": settings.retention_done, "failed": settings.retention_failed,
            "cancelled": settings.retention_cancelled,
        }) if settings.prune_interval > 0 else None
        self.tags = {"reap": fingerprint.tag(settings, fingerprint.REAP_KEYS),
                     "prune": fingerprint.tag(settings, fingerprint.PRUNE_KEYS)}
        self.duties: list[Duty] = []
        for name, election, keys, on in (
            ("reap", ELECTION, fingerprint.REAP_KEYS, self.reaper is not None),
            ("prune", PRUNE_ELECTION, fingerprint.PRUNE_KEYS, self.pruner is not None),
        ):
            if on:
                elector = LeaderElector(
                    store, election, holder, events, ttl=settings.leader_lease,
                    retry=settings.leader_retry_every, tag=self.tags[name],
                ) if settings.election else None
                self.duties.append(Duty(name, election, keys, self.tags[name], elector))
        self.scheduler = Scheduler(store, schedules, events, holder) if schedules else None
        if self.scheduler is not None:
            elector = LeaderElector(
                store, SCHEDULE_ELECTION, holder, events, ttl=settings.leader_lease,
                retry=settings.leader_retry_every) if settings.election else None
            self.duties.append(Duty("schedule", SCHEDULE_ELECTION, {}, "", elector))
        self.watch = DeathWatch(
            cast(WatchedStore, store), events, [d.election for d in self.duties]
        ) if (settings.death_check_interval > 0 and isinstance(store, Liveness)
              and store.capabilities.detects_death) else None
        self._next_watch = 0.0
        self._reported: dict[str, str] = {}  # election -> leader holder last reported
        self._housekeeper: threading.Thread | None = None
        self._next_house = self._next_reap = self._next_check = 0.0

    @property
    def elector(self) -> LeaderElector | None:
        """The reaper's elector (None without election or without reaping)."""
        return next((d.elector for d in self.duties if d.name == "reap"), None)

    @property
    def acting(self) -> bool:
        """True while this maintainer performs at least one of its duties."""
        return any(d.acting for d in self.duties)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop and wait (within ``timeout`` in all) for it and for a housekeeping
        run still going: the caller closes the store next, and an SQLite connection closed
        while another thread uses it crashes the process."""
        deadline = clock.monotonic() + (self.stop_wait if timeout is None else timeout)
        super().stop(timeout)  # the loop first: it may start a housekeeper
        house = self._housekeeper
        if house is not None and house.is_alive() and threading.current_thread() is not house:
            house.join(max(0.0, deadline - clock.monotonic()))

    def died(self, exc: BaseException) -> None:
        """``StoreGone`` is one clear line, not a traceback; then as any other death."""
        if not isinstance(exc, StoreGone):
            super().died(exc)
            return
        log.error("maintenance stopped: the store's data is gone: %s", exc)
        if self._loop_fatal is None:
            raise exc
        self._loop_fatal(exc)

    def finished(self) -> None:
        """Leadership is released on the way out."""
        for duty in self.duties:
            if duty.elector is not None:
                duty.elector.release()

    def housekeep(self) -> None:
        """Start store housekeeping unless a run is still going; never blocks the reaper."""
        if self._housekeeper is not None and self._housekeeper.is_alive():
            return

        def run() -> None:
            try:
                done = self.store.housekeeping()
                if done:
                    log.info("housekeeping: %s", done)
            except Exception as exc:
                log.warning("housekeeping failed: %s", exc)

        self._housekeeper = threading.Thread(target=run, name="tether-housekeeping",
                                             daemon=True)
        self._housekeeper.start()

    def round(self) -> float:
        """Each duty that is due (its election first), the settings check; returns the wait
        until the next of them is due."""
        now = clock.monotonic()
        due: list[float] = []
        dead: tuple[str, ...] = ()
        if self.watch is not None:
            if now >= self._next_watch:
                dead = self._watch_round(now)
                self._next_watch = now + self.watch.next_in(self.settings.death_check_interval)
            due.append(self._next_watch)
        for duty in self.duties:
            if duty.elector is not None:
                if now >= duty.next_election:
                    duty.next_election = now + duty.elector.run_once()
                due.append(duty.next_election)
            if not duty.acting:
                duty.next_run = 0.0  # act at once on becoming leader
                if duty.name == "reap":
                    self._next_reap = 0.0
                continue
            if now >= duty.next_run:
                duty.next_run = clock.monotonic() + max(0.0, self._perform(duty))
            due.append(duty.next_run)
        if dead and self.watch is not None and any(
                d.name == "reap" and d.acting for d in self.duties):
            self.watch.reap(dead)
        if self.settings.election and now >= self._next_check:
            self._next_check = now + CHECK_EVERY
            self.check_settings()
        wait = (min(due) - clock.monotonic()) if due else CHECK_EVERY
        return max(0.005, min(wait, self._next_check - clock.monotonic()))

    def _watch_round(self, now: float) -> tuple[str, ...]:
        """One death check: release the leases of dead leaders (their elections then run at
        once, this round), and return the dead workers for the reap leader."""
        assert self.watch is not None
        found = self.watch.check()
        for lead in found.leaders:
            duty = next((d for d in self.duties if d.election == lead.name), None)
            if duty is None or duty.elector is None:
                continue
            if split_holder(lead.holder)[0] == self.holder:
                continue  # our own token looked released (a cut connection): not dead
            if self.watch.release(lead):
                duty.next_election = now
        # Our own token looked released: its connection was cut, we are alive (it is being
        # taken again); never reap ourselves.
        return tuple(w for w in found.workers if w != self.holder)

    def _perform(self, duty: Duty) -> float:
        """Do one round of a duty; returns seconds until the next one."""
        try:
            if duty.name == "reap":
                assert self.reaper is not None
                now = clock.monotonic()
                if now >= self._next_reap:
                    self.reaper.run_once()
                    self._next_reap = clock.monotonic() + self.reaper.next_wait()
                if now >= self._next_house:
                    self.housekeep()
                    self._next_house = clock.monotonic() + HOUSEKEEPING_EVERY
                wait = min(self._next_reap, self._next_house) - clock.monotonic()
            elif duty.name == "schedule":
                assert self.scheduler is not None
                wait = self.scheduler.run_once()
            else:
                assert self.pruner is not None
                self.pruner.run_once()
                wait = self.settings.prune_interval
        except StoreGone:
            raise
        except Exception as exc:
            if duty.name == "reap":
                self._next_reap = 0.0  # sweep again when the duty runs next, in a second
            duty.failures += 1
            (log.warning if duty.failures == 1 or duty.failures % 100 == 0 else log.debug)(
                "maintenance (%s) failed (%s: %s); retrying", duty.name,
                type(exc).__name__, exc)
            return 1.0
        duty.failures = 0
        return wait

    def check_settings(self) -> None:
        """Compare the current leaders' settings with ours; report a disagreement once."""
        for name, election, keys in (("reap", ELECTION, fingerprint.REAP_KEYS),
                                     ("prune", PRUNE_ELECTION, fingerprint.PRUNE_KEYS)):
            try:
                lead = self.store.leader_get(election)
            except StoreGone:
                raise
            except Exception as exc:
                log.debug("could not read the leader of %s: %s", election, exc)
                continue
            if lead is None:
                continue
            holder, theirs = split_holder(lead.holder)
            if holder == self.holder or not theirs:
                continue
            diff = fingerprint.differences(theirs, self.tags[name], keys)
            if not diff:
                self._reported.pop(election, None)
            elif self._reported.get(election) != lead.holder:
                self._reported[election] = lead.holder
                log.error("maintenance settings disagree: %s leads %s (%s) with %s; this "
                          "process (%s) has other values. Give every worker and `tether "
                          "reaper` the same app (tether reaper MODULE:APP)", holder, name,
                          election, "; ".join(diff), self.holder)
