"""What every PostgreSQL store method stands on: the connector, the statements bound to the
store's schema, and running one named statement with driver errors mapped.

Statements run on a pool connection (autocommit: one statement, one transaction), or on a
caller's connection inside the caller's transaction, never committing it (``conn=``, the
outbox pattern). A statement that failed on a race that a fresh snapshot resolves is run
again, on our own connections only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from tether._errors import StoreError, StoreUnavailable
from tether.stores._incident_watch import Watched
from tether.stores._postgres import statements
from tether.stores._postgres.connection import Conn, Connector
from tether.stores._postgres.watch import FailoverWatch, Sighting
from tether.stores._urls import redact

#: Statements that hit a race they cannot see (SQLSTATE 40001 / a concurrent unique key) are
#: run this many times in all before the caller is told to retry.
RACE_RETRIES = 5
Row = tuple[Any, ...]


class Plumbing(Watched):
    """The connection side of :class:`~tether.stores._postgres.store.PostgresStore`."""

    _watch: FailoverWatch

    def __init__(self, url: str, **options: Any) -> None:
        self._connector = Connector(url, **options)
        self.url = url
        self.schema = self._connector.schema
        self.channel = self._connector.channel
        self.done_channel = self._connector.done_channel
        self.signal_channel = self._connector.signal_channel
        self.done_key = self._connector.done_key
        self.application_name = self._connector.application_name
        self.queries = statements.for_schema(self.schema)
        self._watch = FailoverWatch(f"{redact(url)} schema {self.schema!r}")
        self._connector.on_connect = self._watch.soon

    def _rows(self, name: str, params: dict[str, Any], conn: Conn | None = None) -> list[Row]:
        """Run one named statement on a pool connection, or on the caller's (inside its
        transaction, never committing it), with driver errors mapped."""
        try:
            with self._connector.connection(conn) as used:
                if conn is None and self._watch.due():
                    self._observe(used)  # on this connection, before this statement
                return used.execute(self.queries[name], params).fetchall()
        except StoreUnavailable:
            self._watch.soon()  # the server may be failing over: look as soon as it answers
            raise

    def _observe(self, conn: Conn) -> None:
        """Look for a failover or data loss (see watch.py) on ``conn``, a pool connection
        about to run the caller's statement: after a failover, the look comes before the
        first id is drawn from the new server. A refused look never fails the caller's call;
        a broken connection fails it as the caller's statement would have."""
        q = self.queries
        try:
            probed = self._watch.probe()  # judged against this, not later claims
            probe = {"id": probed[1][0]}
            seen = Sighting(conn.execute(q["observe"], probe).fetchone())
            if not seen.has_identity:  # a schema cloned without its rows
                conn.execute(q["identity_ensure"])
                seen = Sighting(conn.execute(q["observe"], probe).fetchone())
            lost, moved = self._watch.judge(seen, probed)
            if lost and seen.epoch == self._watch.epoch:  # we are the first to see it
                row = conn.execute(q["count_data_loss"], {"epoch": seen.epoch}).fetchone()
                if row is None:  # another process counted it first: take its epoch
                    row = conn.execute(q["observe"], probe).fetchone()
                seen.epoch = None if row is None else row[0]
            if seen.timeline is not None and seen.timeline != seen.recorded_timeline:
                conn.execute(q["count_failover"], {"timeline": seen.timeline,
                                                   "old": seen.recorded_timeline})
        except psycopg.Error as exc:
            if conn.broken or isinstance(exc, psycopg.OperationalError):
                self._watch.soon()  # not answering: look again before the next call's work
                raise
            self._watch.failed(exc)  # refused (a server without these functions): said once
            return
        self._watch.learn(seen, lost=lost, moved=moved)

    def _one(self, name: str, params: dict[str, Any]) -> Row | None:
        rows = self._rows(name, params)
        return rows[0] if rows else None

    def _retrying(self, name: str, params: dict[str, Any], conn: Conn | None,
                  is_race: Callable[[psycopg.Error], bool]) -> list[Row]:
        """``_rows``, run again when it failed on a race a fresh snapshot resolves. Only on
        our own connections: a caller's transaction is aborted by the failure, and the caller
        gets StoreUnavailable (retry the transaction)."""
        for attempt in range(RACE_RETRIES):
            try:
                return self._rows(name, params, conn)
            except StoreError as exc:
                cause = exc.__cause__
                if not isinstance(cause, psycopg.Error) or not is_race(cause):
                    raise
                if conn is not None or attempt == RACE_RETRIES - 1:
                    raise StoreUnavailable(f"{exc} (a concurrent write raced this one; "
                                           "retry)") from cause
        raise AssertionError("unreachable")

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """A pool connection inside a transaction: commit on success, rollback on error.

        Pass it as ``conn=`` to :meth:`enqueue` / :meth:`finish` to make them part of the
        caller's own writes. It keeps the user's search_path, and errors of the caller's own
        statements reach the caller unchanged."""
        with self._connector.transaction() as conn:
            yield conn


def race(exc: psycopg.Error) -> bool:
    """A failure that running the statement again with a fresh snapshot resolves: a unique
    key committed concurrently (unique_key_race, SQLSTATE 40001), a concurrent call with the
    same request id, a live job taking a key that a dead-letter retry meant to restore, or a
    deadlock the server broke by failing this statement (an enqueue naming parents locks
    them, in id order, but a finish releasing children locks its own rows first)."""
    if exc.sqlstate in ("40001", "40P01"):  # 40P01: a deadlock victim; the rest committed
        return True
    return exc.sqlstate == "23505" and exc.diag.constraint_name in (
        "requests_pkey", "jobs_unique_key_idx")


__all__ = ["RACE_RETRIES", "Plumbing", "Row", "race"]
