"""Noticing that PostgreSQL failed over, and that the failover lost data, and saying so loudly.

Why: with asynchronous streaming replication a promoted standby lacks the commits it had not
replayed: acknowledged enqueues are gone and, since the id sequence is behind, their ids are
handed out again to other jobs. The job's ``uid`` keeps every dedup key apart, but people must
learn that jobs were lost: every process whose store lived through it logs it once at ERROR
(logger ``tether.store.postgres``), and the identity row counts it once for ``tether stats`` and
the dashboard. A failover that lost nothing (a caught-up or synchronous standby) is a WARNING.

The signs, compared with what this process saw last (``identity.sql``, ``observe``):

* the sequence's last value below the newest id this process saw handed out: ids will repeat;
* the newest job this process claimed gone, or another job under its id, after the server's
  WAL timeline moved (a promotion): that job was lost;
* the identity row's epoch changed: another process counted a loss (or the database was
  replaced under us).

The look costs one round trip and runs at most every ``interval`` seconds, on the connection
of whatever store call comes next and before that call's statement; and at once after the
store saw a connection error or opened a new connection (a failover cuts every connection, and
a multi-host URL reconnects to another server), so the first id drawn from a promoted standby
comes after the look. When to look, and logging an incident once per process, are shared
with Redis's watch (``_incident_watch.py``); this module holds what PostgreSQL is judged by.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tether.stores._incident_watch import CHECK_INTERVAL, IncidentWatch, first_report

log = logging.getLogger("tether.store.postgres")


class Sighting:
    """What one ``observe`` found (see identity.sql), and what this process knew before."""

    def __init__(self, row: Sequence[Any] | None) -> None:
        row = row or (None,) * 7
        self.epoch: str | None = row[0]
        self.recorded_timeline: int | None = None if row[1] is None else int(row[1])
        self.timeline: int | None = None if row[4] is None else int(row[4])
        self.last_id: int | None = None if row[5] is None else int(row[5])
        self.uid_at_newest: str | None = row[6]
        self.has_identity = row[0] is not None


class FailoverWatch(IncidentWatch):
    """What this store saw of the server last: the epoch, the timeline, the newest ids; it
    notices "data_loss" and "failover"."""

    def __init__(self, where: str) -> None:
        super().__init__(where, log)  # where: the redacted URL and schema
        self.timeline: int | None = None
        #: The newest id this process saw handed out (enqueue, claim), and the newest claimed
        #: job's (id, uid).
        self.newest_id = 0
        self.newest_claimed: tuple[int, str] = (0, "")

    def failed(self, exc: Exception) -> None:
        """The look itself was refused: no failover can be noticed; said once per process."""
        if first_report(self.where, "refused", type(exc).__name__):
            log.warning("postgresql %s: cannot look for failovers and the data loss they "
                        "cause (%s); tether's dedup keys stay distinct all the same",
                        self.where, exc)

    def saw_ids(self, ids: Sequence[int]) -> None:
        if ids:
            top = max(ids)
            with self._lock:
                self.newest_id = max(self.newest_id, top)

    def saw_claimed(self, id_uid: tuple[int, str]) -> None:
        with self._lock:
            if id_uid[0] > self.newest_claimed[0]:
                self.newest_claimed = id_uid
            self.newest_id = max(self.newest_id, id_uid[0])

    def probe(self) -> tuple[int, tuple[int, str]]:
        """What this store knows before a look: (newest id seen, newest claimed (id, uid)).
        The look is judged against this snapshot, never against what other threads of the
        store claimed or enqueued while its round trip was under way (that read as "another
        job under its id" or "the sequence went back": a false data loss)."""
        with self._lock:
            return self.newest_id, self.newest_claimed

    def judge(self, seen: Sighting,
              probed: tuple[int, tuple[int, str]]) -> tuple[bool, bool]:
        """(lost, failed over) by this process's own evidence, before anything is updated;
        ``probed``: :meth:`probe`, taken before the look."""
        newest, (claimed_id, claimed_uid) = probed
        with self._lock:
            known_epoch, known_timeline = self.epoch, self.timeline
        moved = (known_timeline is not None and seen.timeline is not None
                 and seen.timeline != known_timeline)
        behind = newest > 0 and seen.last_id is not None and seen.last_id < newest
        # After a promotion, the newest job we claimed must still be there under its uid; a
        # pruned or purged job is missing too, hence only after the timeline moved.
        replaced = claimed_id > 0 and seen.uid_at_newest not in (None, claimed_uid)
        vanished = moved and claimed_id > 0 and seen.uid_at_newest is None
        changed = bool(known_epoch) and seen.epoch is not None and seen.epoch != known_epoch
        return behind or replaced or vanished or changed, moved

    def learn(self, seen: Sighting, *, lost: bool, moved: bool) -> None:
        """Take what ``observe`` found and log what changed since this store last looked."""
        with self._lock:
            old_timeline = self.timeline
            if seen.timeline is not None:
                self.timeline = seen.timeline
            self._take(seen.epoch, "data_loss" if lost else "failover" if moved else None)
            if lost:
                # Ids up to what the server knows now are its own: judge the next look afresh.
                self.newest_id = seen.last_id or 0
                self.newest_claimed = (0, "")
        if lost:
            self._say_lost(
                seen.epoch or "",
                "postgresql %s: the server failed over to a standby that had not received "
                "the last commits, and tether's data was lost: jobs enqueued, claimed or "
                "finished just before are gone and job ids are being handed out again "
                "(dedup keys stay distinct: they carry the job's uid). Use synchronous "
                "replication for a queue (docs/guarantees.md).",
            )
        elif moved and first_report(self.where, "failover", str(seen.timeline)):
            log.warning(
                "postgresql %s: the server failed over (timeline %s -> %s); no loss of "
                "tether's data was seen", self.where, old_timeline, seen.timeline,
            )


__all__ = ["CHECK_INTERVAL", "FailoverWatch", "Sighting"]
