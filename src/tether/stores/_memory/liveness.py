"""Death detection on the memory store (the :class:`~tether.stores._contract.Liveness` role).

Invariant: a token is a flag in the shared data, set by ``take_liveness`` and cleared only by
``release_liveness``: there is no second process whose death the store could see, so "the
process died" is the explicit release (tests call it to play a death). The reap of a dead
owner is the reaper's own stall step (``maintenance.stall``), selected by owner.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.stores._contract import DeadOwners, Leadership, Reaped
from tether.stores._liveness import holder_worker
from tether.stores._memory.maintenance import stall
from tether.stores._memory.state import Shared


class MemoryLiveness:
    """The :class:`~tether.stores._contract.Liveness` role of :class:`MemoryStore`."""

    @property
    def _db(self) -> Shared:
        raise NotImplementedError  # pragma: no cover - MemoryStore provides it

    def take_liveness(self, worker_id: str) -> bool:
        with self._db.tx() as db:
            db.tokens[worker_id] = "live"
        return True

    def release_liveness(self, worker_id: str) -> None:
        with self._db.tx() as db:
            if db.tokens.get(worker_id) == "live":
                db.tokens[worker_id] = "dead"

    def dead_owners(self, elections: Sequence[str] = ()) -> DeadOwners:
        with self._db.tx() as db:
            workers = tuple(sorted(w for w, state in db.tokens.items() if state == "dead"))
            leaders: list[Leadership] = []
            for name in elections:
                row = db.leaders.get(name)
                if row is not None and row[0] is not None \
                        and db.tokens.get(holder_worker(row[0]), "live") != "live":
                    leaders.append(Leadership(name, row[0], row[1], row[2]))
            return DeadOwners(workers, tuple(leaders))

    def dead_workers(self, worker_ids: Sequence[str]) -> frozenset[str]:
        with self._db.tx() as db:
            return frozenset(w for w in worker_ids if db.tokens.get(w, "live") != "live")

    def reap_dead(
        self, owners: Sequence[str], *, now: float | None = None, limit: int = 1000
    ) -> list[Reaped]:
        if limit <= 0 or not owners:
            return []
        wanted = set(owners)
        with self._db.tx() as db:
            t = db.now(now)
            held = sorted((db.jobs[i] for i in db.running if db.jobs[i].locked_by in wanted),
                          key=lambda j: j.id)
            reaped = stall(db, held[:limit], t)
            if len(held) <= limit:  # every job of these owners is back: stop naming them
                for owner in wanted:
                    if db.tokens.get(owner) == "dead":
                        db.tokens[owner] = "reaped"
        return sorted(reaped, key=lambda r: r.job_id)


__all__ = ["MemoryLiveness"]
