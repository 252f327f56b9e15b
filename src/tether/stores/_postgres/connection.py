"""Connections for the PostgreSQL store: URL parsing, the pool, and where errors are mapped.

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

import os
import re
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg

from tether._errors import ConfigError, StoreUnavailable
from tether.stores._postgres.driver_errors import mapped, one_line
from tether.stores._postgres.pool import Conn, ConnectionPool
from tether.stores._postgres.pooler import announce, take_pooler
from tether.stores._urls import redact, scrub, secrets_in, take_param

DEFAULT_SCHEMA = "tether"
# A schema name must also leave room for the "_jobs" NOTIFY channel within NAMEDATALEN (63).
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,57}$")
# PostgreSQL's own schemas: tables created there are lost in the catalog or refused.
_SYSTEM = re.compile(r"^(pg_.*|information_schema)$", re.IGNORECASE)
# Connection failures that retrying will not fix: the URL or the credentials are wrong.
_PERMANENT = ("does not exist", "authentication failed", "no pg_hba.conf entry", "invalid")

__all__ = ["Conn", "Connector", "one_line", "split_url"]


def split_url(url: str) -> tuple[str, str]:
    """(DSN for psycopg without tether's own ``schema`` parameter, validated schema name)."""
    if urlsplit(url).scheme.lower() not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL: {redact(url)!r}")
    dsn, given = take_param(url, "schema")
    schema = DEFAULT_SCHEMA if given is None else given
    if not _IDENT.match(schema):
        raise ConfigError(
            f"invalid schema name {schema!r} in {redact(url)!r}: use letters, digits and "
            "underscores (at most 58 characters, not starting with a digit)"
        )
    if _SYSTEM.match(schema):
        raise ConfigError(
            f"schema {schema!r} in {redact(url)!r} is PostgreSQL's own (pg_* and "
            "information_schema are reserved): choose a schema of your own, e.g. schema=tether"
        )
    return dsn, schema


def connect_error(url: str, exc: psycopg.Error, *, first: bool) -> ConfigError | StoreUnavailable:
    """Classify a failure to connect: ConfigError when retrying cannot help (only when the
    store is being opened: later, a failing connection is an outage to ride out)."""
    message = scrub(f"cannot connect to PostgreSQL at {redact(url)}: {one_line(exc)}", url)
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
        connect_timeout: int = 5,
        prepare_threshold: int | None = 2,
        application_name: str | None = None,
    ) -> None:
        self.url = url
        self.dsn, self.schema = split_url(url)
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
            # forever: keepalives notice a silent peer, tcp_user_timeout bounds unacked sends.
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            "tcp_user_timeout": 10_000,
        }
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
            if any(secret in str(exc) for secret in secrets_in(self.url)):
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
            if any(secret in str(exc) for secret in secrets_in(self.url)):
                raise error from None
            raise error from exc

    @contextmanager
    def connection(self, conn: Conn | None = None) -> Iterator[Conn]:
        """A pool connection (or the caller's), with driver errors mapped to tether's."""
        with mapped():
            if conn is not None:
                yield conn
                return
            pooled = self.pool.getconn()
            try:
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
