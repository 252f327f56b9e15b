"""Leader election: at most one maintainer acts at a time, and a stale one knows it.

Invariants:

* Leadership is a lease in the store, acquired only when absent or expired; each acquisition
  gets a new, larger ``term``. Renew and release are fenced by (holder, term), so a paused
  ex-leader's late renew or release can never touch its successor's lease.
* A leader trusts its leadership only until ``ttl`` after it *sent* its last successful
  acquire/renew (monotonic clock). Past that, ``is_leader`` is false at once, even when the
  store cannot be reached to say so, so two leaders never act in the same trust window.
* Acting twice is harmless anyway (the reaper and pruner are idempotent); election saves work.
* The holder string stored with the lease carries a tag after the holder's id (the settings
  the holder acts with, see ``fingerprint.py``), so other processes can read who leads with
  which settings (``Store.leader_get``) and report a disagreement.
* No exception from one store call ends the election; ``StoreGone`` is raised to the caller.
* Followers poll with a read (``Store.leader``) and write (``leader_acquire``) only when the
  lease is absent or has run out.
"""

from __future__ import annotations

import logging

from tether import _clock as clock
from tether._errors import StoreGone
from tether._events import Events
from tether.stores._contract import Leadership, Maintenance

log = logging.getLogger("tether.leadership")
TAG = "settings="


def split_holder(stored: str) -> tuple[str, str]:
    """(holder id, tag) of a stored holder string; the tag is "" for holders without one."""
    holder, sep, tag = stored.partition(f" {TAG}")
    return (holder, tag) if sep else (stored, "")


class LeaderElector:
    def __init__(
        self, store: Maintenance, name: str, holder: str, events: Events, *, ttl: float,
        retry: float, tag: str = "",
    ) -> None:
        self.store = store
        self.name = name
        self.holder = holder
        #: What the store keeps as the holder: the id, then the tag (``id settings=...``).
        self.stored_holder = f"{holder} {TAG}{tag}" if tag else holder
        self.events = events
        self.ttl = ttl
        self.retry = retry
        self.lease: Leadership | None = None
        self._trusted_until = 0.0
        self.failures = 0  # store calls failed in a row (only the first is a WARNING)

    @property
    def is_leader(self) -> bool:
        if self.lease is not None and clock.monotonic() >= self._trusted_until:
            self._lose("trust window ended before a renewal succeeded")
        return self.lease is not None

    def run_once(self) -> float:
        """Acquire or renew; returns seconds until the next call is due."""
        sent = clock.monotonic()
        try:
            if self.lease is None:
                got = None if self._held_by_another() else self.store.leader_acquire(
                    self.name, self.stored_holder, self.ttl)
                if got is not None:
                    self.lease, self._trusted_until = got, sent + self.ttl
                    log.info("%s became leader of %s (term %d)", self.holder, self.name, got.term)
                    self.events.emit("leadership_acquired", worker=self.holder,
                                     detail={"name": self.name, "term": got.term})
            else:
                renewed = self.store.leader_renew(self.name, self.stored_holder,
                                                  self.lease.term, self.ttl)
                if renewed is None:
                    self._lose("renewal refused: another holder or an expired term")
                else:
                    self.lease, self._trusted_until = renewed, sent + self.ttl
        except StoreGone:
            raise
        except Exception as exc:
            self.failures += 1
            (log.warning if self.failures == 1 or self.failures % 100 == 0 else log.debug)(
                "leader election for %s failed: %s", self.name, exc)
            _ = self.is_leader  # drops leadership if the trust window has ended
            return min(self.retry, 1.0)
        self.failures = 0
        return self.ttl / 3 if self.lease is not None else self.retry

    def _held_by_another(self) -> bool:
        """A follower first *reads* who leads: while another holder's lease runs, trying to
        acquire would only be a write that changes nothing (on SQLite it takes the file's
        write lock: a follower paused inside it would stop every process on the file)."""
        current = self.store.leader(self.name)  # None when nobody holds a live lease
        return current is not None and current.holder != self.stored_holder

    def release(self) -> None:
        lease, self.lease = self.lease, None
        if lease is None:
            return
        try:
            self.store.leader_release(self.name, self.stored_holder, lease.term)
        except Exception as exc:
            log.warning("could not release leadership of %s: %s", self.name, exc)
        self.events.emit("leadership_lost", worker=self.holder,
                         detail={"name": self.name, "term": lease.term, "why": "released"})

    def _lose(self, why: str) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            log.warning("%s lost leadership of %s (term %d): %s", self.holder, self.name,
                        lease.term, why)
            self.events.emit("leadership_lost", worker=self.holder,
                             detail={"name": self.name, "term": lease.term, "why": why})
