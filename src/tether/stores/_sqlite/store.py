"""The SQLite store: tether's embedded default, for one machine and many worker processes.

Invariants this store holds across its roles (the contract is :mod:`tether.stores._contract`;
the lease path's are in ``lease.py``, the reaper's in ``maintenance.py``, the ticks' in
``schedules.py``):

* **Every call is safe to retry.** ``enqueue`` and ``claim`` with a ``request_id`` record it
  in the ``requests`` table in the same transaction, and a repeat is answered from it; a
  ``finish`` repeated after its reply was lost recognises its applied outcome by the token the
  row keeps; leader calls are idempotent for the current holder.
* **The write lock is held for statements only.** SQLite has one write lock per file; a
  process paused inside a write stops every writer. Parameters are built before ``BEGIN
  IMMEDIATE`` and results after ``COMMIT``; a lock that is not released within the busy
  timeout gives ``StoreUnavailable`` saying so.
* **The store's clock decides.** ``now=None`` means SQLite's ``julianday('now')``, read inside
  the transaction that uses it; this package never reads Python's clock for store time.
* **The file under the store is the file it opened.** A database deleted or replaced under a
  running process raises ``StoreGone`` (``_db.Connections.check_file``) instead of letting the
  process work on data nobody else sees; every row is readable, whatever bytes it holds.

The class is assembled from one mixin per role, each in the file every store package names the
same way: ``schema.py`` (Lifecycle), ``producer.py`` (Producer), ``lease.py`` (Leases),
``maintenance.py`` and ``schedules.py`` (Maintenance), ``admin.py`` (Admin), ``liveness.py``
(Liveness: death detection), ``links.py`` (job dependencies: ``get_jobs``, ``job_links`` and
resolving links in the writes that end jobs); this module adds what every role shares (opening,
closing, the clock, the declared capabilities).

All SQL lives in ``queries.sql``, ``ops.sql``, ``aio.sql``, ``schedules.sql``, ``flow.sql``,
``links.sql`` and ``schema*.sql``; batches are bound as one JSON parameter and expanded by
``json_each``, except the finish, whose one-outcome statement runs through ``executemany``
(the worker's hot path: no JSON to unpack per outcome), so every statement text is fixed and
prepared once per connection. Input is
checked by :mod:`tether._limits` before any write (a batch is all or nothing); error text goes
through :func:`tether._text.clean_error`. Requires SQLite >= 3.35 (``RETURNING``, ``UPDATE ...
FROM``).
"""

from __future__ import annotations

import threading

from tether.stores._contract import Capabilities
from tether.stores._sqlite.admin import SQLiteAdmin
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.lease import SQLiteLeases
from tether.stores._sqlite.links import SQLiteLinks
from tether.stores._sqlite.liveness import NO_PATH, SQLiteLiveness, live_dir
from tether.stores._sqlite.maintenance import SQLiteMaintenance
from tether.stores._sqlite.producer import SQLiteProducer
from tether.stores._sqlite.rows import SCHEMA_VERSION, store_now
from tether.stores._sqlite.schedules import SQLiteSchedules
from tether.stores._sqlite.schema import SQLiteSchema
from tether.stores._sqlite.signal_stamp import stamp_path
from tether.stores._sqlite.url import check_folder, parse_url


class SQLiteStore(SQLiteSchema, SQLiteProducer, SQLiteLeases, SQLiteMaintenance,
                  SQLiteSchedules, SQLiteAdmin, SQLiteLinks, SQLiteLiveness):
    """SQLite implementation of :class:`tether.stores._contract.Store`. Thread- and fork-safe.

    ``busy_timeout``: how long a write waits for another process's write lock before it
    raises StoreUnavailable. ``file_check_interval``: how often (seconds, at most) the store
    checks that its path still names the file it opened (StoreGone otherwise).
    """

    kind = "sqlite"
    #: No transactional enqueue or completion: a caller's own SQLite connection would hold
    #: the file's one write lock for its whole transaction.
    #: Death detection by flock on a per-worker file beside the database (liveness.py).
    capabilities = Capabilities(detects_death=True)

    def __init__(
        self, url: str, *, busy_timeout: float = 30.0, file_check_interval: float = 1.0
    ) -> None:
        self.url = url
        self.path = parse_url(url)
        check_folder(self.path)
        if live_dir(self.path) is None:
            self.capabilities = Capabilities(liveness_why_not=NO_PATH)
        self._db = Connections(self.path, busy_timeout, file_check_interval)
        self._wake = threading.Condition()
        self._wake_gen = 0
        self._seen = threading.local()
        self._signal_seen: dict[str, tuple[tuple[int, ...], frozenset[int], frozenset[str]]] = {}
        self._signal_gen = 0
        self._stamp = stamp_path(self.path)
        self._aio_init()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    # -- what every role shares (migrate, check_schema, info: SQLiteSchema) -------------------
    def close(self) -> None:
        self._close_aio()
        self._db.close()
        self.notify(())

    @guarded
    def now(self) -> float:
        return store_now(self._db.get(), None)


__all__ = ["SCHEMA_VERSION", "SQLiteStore"]
