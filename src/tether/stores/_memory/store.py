"""The in-memory store (``memory://NAME``): the whole store contract in one process, for tests
and demos. Nothing survives the process, and no other process can see it.

Invariants this store holds across its roles (the contract is :mod:`tether.stores._contract`;
the locking and index rules are in :mod:`tether.stores._memory.state`, the claim and the fences
in ``lease.py``):

* **Each method is one atomic step** under the shared lock, so the claim is the lease grant,
  and two reapers, claimers or finishers give the end state one of them alone would.
* **The same input checks as every store** (:mod:`tether._limits`) run before anything is
  written, so the same ``ValueError``/``TypeError`` comes out and a batch is all or nothing.
* **Replays act once**: ``enqueue``/``claim`` with a request id are answered from a record
  kept 24 h; a repeated ``finish`` recognises its applied outcome by the token the row keeps.
* **The store's clock** is :func:`tether._clock.wall` plus :meth:`MemoryStore.advance`'s offset;
  every time-dependent method takes an explicit ``now``.

The class is assembled from one mixin per role, each in the file every store package names the
same way: ``producer.py`` (Producer; its async half in ``aio.py``), ``lease.py`` (Leases),
``maintenance.py`` and ``schedules.py`` (Maintenance), ``admin.py`` (Admin), ``liveness.py``
(Liveness); job dependencies (issue #20) are ``links.py``'s, applied by ``state.py`` whenever a
row ends. There is no schema, so this module holds the Lifecycle role itself, with what every
role shares.
"""

from __future__ import annotations

import threading

from tether.stores._contract import Capabilities, StoreInfo
from tether.stores._memory.admin import MemoryAdmin
from tether.stores._memory.lease import MemoryLeases
from tether.stores._memory.liveness import MemoryLiveness
from tether.stores._memory.maintenance import MemoryMaintenance
from tether.stores._memory.producer import MemoryProducer
from tether.stores._memory.schedules import MemorySchedules
from tether.stores._memory.state import SCHEMA_VERSION, Shared, closed_error, shared_for


def parse_name(url: str) -> str | None:
    """``memory://NAME`` -> NAME; ``memory://`` -> None (a private store)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "memory":
        from tether._errors import ConfigError

        raise ConfigError(f"not a memory store URL: {url!r} (use memory://NAME)")
    name = rest.split("?", 1)[0].split("#", 1)[0].strip("/")
    return name or None


class MemoryStore(MemoryProducer, MemoryLeases, MemoryMaintenance, MemorySchedules, MemoryAdmin,
                  MemoryLiveness):
    """In-process implementation of :class:`tether.stores._contract.Store`. Thread-safe.

    Stores opened with the same ``memory://NAME`` in one process share their jobs (a worker
    opens several); ``memory://`` alone is private to this object.
    """

    kind = "memory"
    #: No transactional enqueue or completion: there is no database a caller shares.
    #: Death detection by explicit release only: no other process shares the data.
    capabilities = Capabilities(detects_death=True)

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self.name = parse_name(url)
        self._shared: Shared | None = shared_for(self.name)
        self._local = threading.local()  # per thread: the generation its last wait saw

    def __repr__(self) -> str:
        return f"MemoryStore({self.url!r})"

    @property
    def _db(self) -> Shared:
        db = self._shared
        if db is None:
            raise closed_error()
        return db

    # -- lifecycle, and what every role shares ----------------------------------------------
    def migrate(self) -> int:
        with self._db.tx(migrated=False) as db:
            db.version = SCHEMA_VERSION
            return db.version

    def check_schema(self) -> None:
        with self._db.tx():
            pass

    def close(self) -> None:
        db, self._shared = self._shared, None
        if db is not None:
            with db.lock:
                db.changed()  # wake this store's waiters: they end at once
        self._close_producer()

    def info(self) -> StoreInfo:
        db = self._db
        return StoreInfo(self.kind, self.url, db.version,
                         {"name": self.name or "(private)", "jobs": str(len(db.jobs))})

    def now(self) -> float:
        return self._db.now()

    def advance(self, seconds: float) -> float:
        """Move this store's clock (and every store of its name) ``seconds`` forward; returns
        the new store time. Tests use it to make delayed jobs and retries due at once, and to
        let leases expire, without waiting."""
        if seconds < 0:
            raise ValueError("the store's clock only moves forward")
        with self._db.tx(migrated=False) as db:
            db.offset += float(seconds)
            db.changed()
            return db.now()


__all__ = ["MemoryStore", "parse_name"]
