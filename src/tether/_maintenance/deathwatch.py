"""The death watch (issue #22): finds dead worker processes within a fraction of a second and
takes their jobs back at once, whatever ``lease_ttl`` says.

Invariants:

* **Only provable deaths count.** A death is a liveness token the operating system or the
  store's server released (:class:`~tether.stores._roles.Liveness`); a paused, hung or
  partitioned worker keeps its token, and its jobs stay leased until the lease says otherwise.
  A worker without a token (an older release, a remote worker) is the lease's alone.
* **One cheap check per round** (``Store.dead_owners``: one query, or one command plus
  ``CLIENT LIST``, or a lock probe per token), every ``death_check_interval`` seconds, by
  every maintainer: followers need it too, because a dead *leader* is found the same way and
  its lease released through its own fence (``leader_release`` with the dead holder's term),
  so leadership passes as fast as a dead worker's jobs come back.
* **A death is confirmed before it is acted on**: a worker (or leader holder) counts as dead
  only once every successful check for ``CONFIRM`` seconds has found its token released. A
  live process whose token connection was cut (a proxy restart, an outage that reset every
  connection) takes a new token at once when the store answers again, so it gets that long to
  do it before anything is reaped; a check that fails forgets every suspicion (what happened
  while the store was away is not observed). A real death costs ``CONFIRM`` more, which the
  documented bound includes.
* **Only the reap leader reaps** (``Store.reap_dead``: the stall path, fenced, selected by
  owner), and every job it takes back is reported as the reaper reports one (``stalled``).
* **It never stops the maintainer**: an exception from one call is logged (once per run of
  failures) and the next round tries again; ``StoreGone`` is the maintainer's to handle.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from tether import _clock as clock
from tether._errors import StoreGone
from tether._events import Events
from tether.stores._contract import DeadOwners, Leadership, Liveness, Maintenance, Reaped
from tether.stores._liveness import holder_worker

log = logging.getLogger("tether.deathwatch")
#: Seconds a released token must stay released, over successful checks, before its holder is
#: judged dead: a live process re-takes a cut token well within it (its watcher tries every
#: 0.1 s once the store answers).
CONFIRM = 0.4
#: While a death is being confirmed, checks come this often (at most): the confirmation costs
#: CONFIRM, not CONFIRM rounded up to the next death_check_interval.
CONFIRM_EVERY = 0.1


def take_token(store: Liveness, holder: str, *, check_every: float, lease_ttl: float) -> bool:
    """Take this process's liveness token for ``holder`` (a worker, or ``tether reaper``),
    before its first claim or election. When the store cannot detect death (or detection is
    turned off), say so once, here: a death of this process is then found when its leases run
    out. Never raises: without a token, the lease alone decides, as before."""
    why = "" if check_every > 0 else "death_check_interval=0"
    if not why:
        try:
            if store.take_liveness(holder):
                return True
            why = store.capabilities.liveness_why_not or f"the {store.kind} store cannot"
        except StoreGone:
            raise
        except Exception as exc:
            why = f"the token could not be taken ({type(exc).__name__}: {exc})"
    log.info("death detection is off for %s: %s; if this process dies, its jobs come back "
             "when their leases expire (lease_ttl=%gs)", holder, why, lease_ttl)
    return False


class WatchedStore(Maintenance, Liveness, Protocol):
    """What the watch calls: the check and the reap, and ``leader_release``."""


class DeathWatch:
    def __init__(self, store: WatchedStore, events: Events, elections: Sequence[str], *,
                 batch: int = 1000) -> None:
        self.store = store
        self.events = events
        self.elections = tuple(elections)
        self.batch = batch
        self.failures = 0
        self.total = 0
        #: Worker id -> monotonic time a check first found its token released (still so at
        #: every successful check since).
        self.suspects: dict[str, float] = {}

    def check(self) -> DeadOwners:
        """One check: the confirmed deaths (see ``CONFIRM``); an empty answer when the store
        could not be asked (logged)."""
        try:
            found = self.store.dead_owners(self.elections)
        except StoreGone:
            raise
        except Exception as exc:
            self._failed("check", exc)
            self.suspects.clear()
            return DeadOwners()
        self.failures = 0
        now = clock.monotonic()
        seen = set(found.workers) | {holder_worker(lead.holder) for lead in found.leaders}
        self.suspects = {w: self.suspects.get(w, now) for w in seen}
        dead = {w for w, since in self.suspects.items() if now - since >= CONFIRM}
        return DeadOwners(tuple(w for w in found.workers if w in dead),
                          tuple(lead for lead in found.leaders
                                if holder_worker(lead.holder) in dead))

    def next_in(self, interval: float) -> float:
        """Seconds until the next check: ``interval``, or sooner while a death is being
        confirmed."""
        return min(interval, CONFIRM_EVERY) if self.suspects else interval

    def release(self, lead: Leadership) -> bool:
        """Release a dead holder's lease through its own fence (its holder and term): a
        successor that took it meanwhile is untouched. True when released."""
        try:
            released = self.store.leader_release(lead.name, lead.holder, lead.term)
        except StoreGone:
            raise
        except Exception as exc:
            self._failed("leader release", exc)
            return False
        if released:
            log.info("leader of %s (term %d) died: its lease was released, %s passes now",
                     lead.name, lead.term, lead.name)
        return bool(released)

    def reap(self, owners: Sequence[str]) -> list[Reaped]:
        """Take back every running job of the dead ``owners``."""
        reaped: list[Reaped] = []
        try:
            while True:
                chunk = self.store.reap_dead(owners, limit=self.batch)
                reaped.extend(chunk)
                if len(chunk) < self.batch:
                    break
        except StoreGone:
            raise
        except Exception as exc:
            self._failed("reap", exc)
        if reaped:
            self.total += len(reaped)
            log.info("worker(s) %s died: %d job(s) back at once", ", ".join(sorted(
                {r.owner for r in reaped})), len(reaped))
            for r in reaped:
                self.events.emit("stalled", job_id=r.job_id, attempt=r.attempt, worker=r.owner,
                                 detail={"status": r.status, "stall_count": r.stall_count,
                                         "died": True})
        return reaped

    def _failed(self, what: str, exc: Exception) -> None:
        self.failures += 1
        (log.warning if self.failures == 1 or self.failures % 100 == 0 else log.debug)(
            "death watch (%s) failed (%s: %s); trying again next round", what,
            type(exc).__name__, exc)


__all__ = ["DeathWatch", "WatchedStore", "take_token"]
