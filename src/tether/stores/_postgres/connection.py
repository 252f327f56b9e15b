"""Connections for the PostgreSQL store: the pool, and where errors are mapped (the URL is
:mod:`url`'s).

Everything that turns a driver failure into a tether error goes through here (the mapping
itself is :mod:`driver_errors`), so the store methods read as plain queries. A URL or login
that can never work is a :class:`ConfigError` when the store is opened; once it has run, a
failing connection is :class:`StoreUnavailable` (a failover or a restart looks the same from
here, and a worker must ride it out). No message ever carries the URL's password.

Connections keep the user's own ``search_path``: tether's statements name their schema
explicitly (see :mod:`queries_for`), so the connection :meth:`transaction` hands out sees the
user's tables exactly as the user's own connections do, and a user table called ``jobs`` can
never be confused with tether's.
"""

from __future__ import annotations

import math
import os
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from tether import _clock as clock
from tether._errors import ConfigError, StoreUnavailable
from tether.stores._deadline import take_deadline
from tether.stores._postgres.driver_errors import mapped, one_line
from tether.stores._postgres.pool import Conn, ConnectionPool
from tether.stores._postgres.pooler import announce, take_pooler
from tether.stores._postgres.url import split_url
from tether.stores._postgres.watchdog import WATCHDOG
from tether.stores._urls import hint, leaks, redact, scrub, take_param

#: libpq parameters tether sets from the deadline unless the URL gives them.
_NETWORK_PARAMS = ("connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                   "keepalives_count", "tcp_user_timeout")
# Connection failures that retrying will not fix: the URL or the credentials are wrong.
_PERMANENT = ("does not exist", "authentication failed", "no pg_hba.conf entry", "invalid")

__all__ = ["Conn", "Connector", "one_line", "split_url"]


def connect_error(url: str, exc: psycopg.Error, *, first: bool) -> ConfigError | StoreUnavailable:
    """Classify a failure to connect: ConfigError when retrying cannot help (only when the
    store is being opened: later, a failing connection is an outage to ride out)."""
    said = one_line(exc)
    if leaks(said, url):  # libpq split a password that was not percent-encoded elsewhere
        said = "the driver's message is left out: it quotes part of the URL's user info"
    message = scrub(f"cannot connect to PostgreSQL at {redact(url)}: {said}{hint(url)}", url)
    permanent = isinstance(exc, psycopg.ProgrammingError) or any(
        word in str(exc) for word in _PERMANENT)
    return ConfigError(message) if first and permanent else StoreUnavailable(message)


class Connector:
    """The pool plus a way to open the dedicated (unpooled) listening connection."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 10.0,
        connect_timeout: int | None = None,
        deadline: float | None = None,
        prepare_threshold: int | None = 2,
        application_name: str | None = None,
    ) -> None:
        self.url = url
        self.dsn, self.schema = split_url(url)
        #: Seconds a call waits for a server that does not answer (:mod:`_deadline`).
        self.dsn, self.deadline = take_deadline(self.dsn, deadline)
        explicit_connect_timeout = connect_timeout is not None
        if connect_timeout is None:  # libpq takes whole seconds, at least 2
            connect_timeout = max(2, math.ceil(self.deadline))
        # Behind a transaction pooler nothing may outlive a transaction (pooler.py).
        self.dsn, self.pooler = take_pooler(self.dsn, url)
        if self.pooler.transaction:
            prepare_threshold = None
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ConfigError(f"need 0 <= min_size <= max_size >= 1, got {min_size}/{max_size}")
        # A name the operator gave (option or ``?application_name=`` in the URL) is what
        # pg_stat_activity must show them; only without one does tether name its sessions.
        self.dsn, named = take_param(self.dsn, "application_name")
        self.application_name = (application_name or named
                                 or f"tether-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.channel = f"{self.schema}_jobs"
        #: wait_for_finish's channel: ids of jobs that became terminal (same length as above).
        self.done_channel = f"{self.schema}_done"
        #: wait_for_signal's channel: the worker a cancel concerns, '*' for a pause (issue 22).
        self.signal_channel = f"{self.schema}_signal"
        #: The advisory lock key that says "a finish waiter listens" (queries.sql, finish).
        self.done_key = zlib.crc32(self.done_channel.encode())
        #: The advisory lock key that says "a worker waits idle" (producers.sql, enqueue_one).
        self.jobs_key = zlib.crc32(self.channel.encode())
        self.connect_timeout = connect_timeout
        self._kwargs: dict[str, Any] = {
            "autocommit": True,
            "prepare_threshold": prepare_threshold,
            "application_name": self.application_name,
            "connect_timeout": connect_timeout,
            # A peer that vanished (host down, partition) must not hang a heartbeat or a claim
            # forever: keepalives notice a silent peer, tcp_user_timeout bounds unacked sends
            # (in ms) to the deadline. A peer whose kernel still acknowledges (a frozen
            # server or proxy) is the watchdog's (``connection``).
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            "tcp_user_timeout": max(1, round(self.deadline * 1000)),
        }
        # A value the operator wrote in the URL is theirs: psycopg lets keyword arguments
        # override the URL, so tether's defaults step aside (an explicit option still wins).
        for name in _NETWORK_PARAMS:
            if take_param(self.dsn, name)[1] is not None and not (
                    name == "connect_timeout" and explicit_connect_timeout):
                del self._kwargs[name]
        self._opened = False
        #: Called after every new connection: the server behind the URL may be another one
        #: now (a multi-host URL after a failover), so the store's watch looks at once.
        self.on_connect: Callable[[], None] | None = None
        self.pool = ConnectionPool(self.connect, max_size=max_size, timeout=timeout)
        # Fail fast with the real reason (wrong host, password, database) at open time: the
        # preflight connection becomes the pool's first.
        self.pool.add(self.connect())
        self._opened = True
        for _ in range(min_size - 1):
            self.pool.add(self.connect())
        announce(self.pooler, url)

    def connect(self, *, listener: bool = False, **overrides: Any) -> Conn:
        """A fresh connection (the pool's, or the listener's own: straight to the server
        behind a transaction pooler when the URL gives ``direct=``)."""
        dsn = self.pooler.direct if listener and self.pooler.direct else self.dsn
        try:
            conn = psycopg.connect(dsn, **{**self._kwargs, **overrides})
        except psycopg.Error as exc:
            error = connect_error(self.url, exc, first=not self._opened)
            if leaks(str(exc), self.url):
                raise error from None  # the driver quoted the password: do not chain it
            raise error from exc
        if self.on_connect is not None:
            self.on_connect()
        return conn

    async def aconnect(self) -> psycopg.AsyncConnection[Any]:
        """A fresh async connection (the async producer's), with the pool's settings; a
        failure is an outage to ride out (the store was opened already)."""
        try:
            return await psycopg.AsyncConnection.connect(self.dsn, **self._kwargs)
        except psycopg.Error as exc:
            error = connect_error(self.url, exc, first=False)
            if leaks(str(exc), self.url):
                raise error from None
            raise error from exc

    @contextmanager
    def connection(self, conn: Conn | None = None, *, bounded: bool = True) -> Iterator[Conn]:
        """A pool connection (or the caller's), with driver errors mapped to tether's.

        ``bounded``: waiting for a free connection and everything run on it end within the
        store's deadline, or the connection is cut (:mod:`watchdog`) and StoreUnavailable
        raised. Only work that may rightly run long (a VACUUM, a migration) passes False;
        TCP keepalive still notices a peer that vanished. A caller's own connection is
        never cut."""
        with mapped():
            if conn is not None:
                yield conn
                return
            if not bounded:
                pooled = self.pool.getconn()
                try:
                    yield pooled
                finally:
                    self.pool.putconn(pooled)
                return
            due = clock.monotonic() + self.deadline
            pooled = self.pool.getconn(self.deadline)
            try:
                with WATCHDOG.watch(pooled, due - clock.monotonic(), deadline=self.deadline):
                    yield pooled
            finally:
                self.pool.putconn(pooled)

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """A pool connection inside a transaction. Our own steps (checkout, BEGIN, COMMIT)
        are mapped; what the caller's statements raise is theirs and passes unchanged."""
        with mapped():
            conn = self.pool.getconn()
        try:
            with mapped():
                tx = conn.transaction()
                tx.__enter__()
            try:
                yield conn
            except BaseException as exc:
                with mapped():
                    tx.__exit__(type(exc), exc, exc.__traceback__)
                raise
            with mapped():
                tx.__exit__(None, None, None)
        finally:
            self.pool.putconn(conn)

    def close(self) -> None:
        self.pool.close()
