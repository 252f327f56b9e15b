"""The PostgreSQL store: production, many worker machines sharing one database.

How the contract's invariants hold here: the claim and the fences (1, 2) in ``lease.py``, the
reaper (3) in ``maintenance.py``, a tick and its job in ``schedules.py``; and across them:

4. **The database clock decides** (``statement_timestamp()``). Times are ``timestamptz``;
   epoch seconds exist only at the SQL boundary.
6. **Dependencies resolve once, in the write that decides them** (``workflows.py``): the
   statement that ends a parent resolves its links itself, through a function whose fresh
   snapshot sees every child an enqueue linked under the parent's row lock.

Every call is safe to retry: enqueue and claim take a ``request_id`` that a repeat is answered
from, finish recognises its own applied outcomes, heartbeat and renew are idempotent, and a
holder's repeated ``leader_acquire`` gets its leadership back. psycopg itself never replays.
No driver exception leaves a method (``driver_errors``); no method waits on a producer's
open transaction (enqueue locks no job row), except on a job that transaction named in an
``after`` (it locks those parents until it ends: workflows.sql).

Transactional enqueue/finish (the outbox pattern) is a declared capability: pass ``conn=`` to
run inside a caller's transaction without committing, or use :meth:`PostgresStore.transaction`
(:class:`~tether.stores._contract.Transactional`).

The class is assembled from one mixin per role, each in the file every store package names the
same way: ``schema.py`` (Lifecycle), ``producer.py`` (Producer; its async half in ``aio.py``),
``lease.py`` (Leases), ``maintenance.py`` and ``schedules.py`` (Maintenance), ``admin.py``
(Admin), ``liveness.py`` (Liveness: death detection), ``workflows.py`` (the Basics reads of job
dependencies); every mixin stands on ``plumbing.py`` (the connector and the statements), and
this module adds what every role shares (opening, closing, the clock, the capabilities).
"""

from __future__ import annotations

from typing import Any

from tether.stores._contract import Capabilities
from tether.stores._postgres import statements
from tether.stores._postgres.admin import PostgresAdmin
from tether.stores._postgres.lease import PostgresLeases
from tether.stores._postgres.listen import Listener
from tether.stores._postgres.liveness import POOLED, PostgresLiveness
from tether.stores._postgres.maintenance import REQUEST_TTL, PostgresMaintenance
from tether.stores._postgres.poll import PollingListener
from tether.stores._postgres.producer import PostgresProducer
from tether.stores._postgres.schedules import PostgresSchedules
from tether.stores._postgres.schema import PostgresSchema
from tether.stores._postgres.workflows import PostgresWorkflows

#: The statement templates ({schema} unformatted); each store formats its own set.
QUERIES = statements.TEMPLATES


class PostgresStore(PostgresSchema, PostgresProducer, PostgresLeases, PostgresMaintenance,
                    PostgresSchedules, PostgresAdmin, PostgresWorkflows, PostgresLiveness):
    """``postgresql://user@host:5432/db?schema=tether``. Thread-safe (a small pool).

    URL options of tether's own: ``schema``, ``pooler=session|transaction`` and
    ``direct=host[:port][/dbname]`` (behind PgBouncer: ``pooler.py``, docs/deploying.md).

    Options: ``min_size``/``max_size`` (pool, default 1/4), ``timeout`` (seconds to wait for a
    free pooled connection, at most the deadline), ``deadline`` (seconds a call waits for a
    server that does not answer, default 5, also ``?deadline=`` in the URL: see
    :mod:`tether.stores._deadline`), ``connect_timeout`` (default: the deadline rounded up,
    at least 2), ``prepare_threshold`` (executions before psycopg prepares a statement
    server-side; always off with ``pooler=transaction``), ``application_name``,
    ``vacuum_threshold`` (dead row versions in the jobs table before ``housekeeping`` vacuums
    it).
    """

    kind = "postgres"
    capabilities = Capabilities(enqueue_in_transaction=True, complete_in_transaction=True,
                                detects_death=True)

    def __init__(self, url: str, *, vacuum_threshold: int = 10_000, **options: Any) -> None:
        super().__init__(url, **options)
        self.vacuum_threshold = vacuum_threshold
        if self._connector.pooler.polls:  # no session connection for the liveness token
            self.capabilities = Capabilities(
                enqueue_in_transaction=True, complete_in_transaction=True,
                liveness_why_not=POOLED)
        # Behind a transaction pooler without direct=, nothing can LISTEN: poll (poll.py).
        self._listener = (PollingListener(self._connector) if self._connector.pooler.polls
                          else Listener(self._connector))
        self._closed = False

    # -- what every role shares (migrate, check_schema, info: PostgresSchema) -----------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_aio()
        self._listener.close()
        self._connector.close()

    def now(self) -> float:
        row = self._one("now", {})
        return float(row[0]) if row else 0.0


__all__ = ["QUERIES", "REQUEST_TTL", "PostgresStore"]
