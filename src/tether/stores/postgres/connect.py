"""Connections for the PostgreSQL store: URL parsing, the pool, and error mapping.

Everything that turns a driver failure into a tether error lives here, so the store methods
read as plain queries. Transient trouble (refused, dropped, terminated, pool exhausted) becomes
:class:`StoreUnavailable` with the driver error kept as ``__cause__``; a URL or login that can
never work becomes :class:`ConfigError`; a missing table becomes :class:`SchemaError`.
"""

from __future__ import annotations

import os
import re
import select
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolClosed

from tether.errors import ConfigError, SchemaError, StoreUnavailable
from tether.stores.urls import redact, take_param

DEFAULT_SCHEMA = "tether"
# A schema name must also leave room for the "_jobs" NOTIFY channel within NAMEDATALEN (63).
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,57}$")
# Connection failures that retrying will not fix: the URL or the credentials are wrong.
_PERMANENT = ("does not exist", "authentication failed", "no pg_hba.conf entry", "invalid")

Conn = psycopg.Connection[Any]


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
    return dsn, schema


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def connect_error(url: str, exc: psycopg.Error) -> ConfigError | StoreUnavailable:
    """Classify a failure to connect: ConfigError when retrying cannot help."""
    message = f"cannot connect to PostgreSQL at {redact(url)}: {one_line(exc)}"
    if isinstance(exc, psycopg.ProgrammingError) or any(word in str(exc) for word in _PERMANENT):
        return ConfigError(message)
    return StoreUnavailable(message)


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
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ConfigError(f"need 0 <= min_size <= max_size >= 1, got {min_size}/{max_size}")
        self.application_name = application_name or (f"tether-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.channel = f"{self.schema}_jobs"
        self.search_path = sql.Identifier(self.schema).as_string(None)
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
        self._own: weakref.WeakSet[Conn] = weakref.WeakSet()
        # Fail fast with the real reason (wrong host, password, database) instead of a pool
        # timeout 10 s later: one direct connection before the pool starts.
        self.connect().close()
        self.pool: ConnectionPool[Conn] = ConnectionPool(
            self.dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs=self._kwargs,
            configure=self._configure,
            timeout=timeout,
            name=self.application_name,
            open=True,
        )

    def connect(self) -> Conn:
        """A fresh connection outside the pool (preflight, LISTEN)."""
        try:
            conn = psycopg.connect(self.dsn, **self._kwargs)
        except psycopg.Error as exc:
            raise connect_error(self.url, exc) from exc
        try:
            self._configure(conn)
        except psycopg.Error as exc:
            conn.close()
            raise connect_error(self.url, exc) from exc
        return conn

    def _configure(self, conn: Conn) -> None:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        self._own.add(conn)

    def owns(self, conn: Conn) -> bool:
        """True for connections this store configured (their search_path is ours)."""
        return conn in self._own

    @contextmanager
    def connection(self, conn: Conn | None = None) -> Iterator[Conn]:
        """A pool connection (or the caller's), with driver errors mapped to tether's."""
        with errors_mapped():
            if conn is not None:
                yield conn
                return
            pooled = self._checkout()
            try:
                yield pooled
            finally:
                self.pool.putconn(pooled)

    def _checkout(self) -> Conn:
        """A live pool connection. Dead idle connections (their backend was terminated, the
        server restarted) are discarded and the next one tried at once: the pool's own check
        loop would back off for seconds between them."""
        for _ in range(self.pool.max_size):
            conn = self.pool.getconn()
            if _alive(conn):
                return conn
            conn.close()  # a closed connection is discarded, not re-queued, when handed back
            self.pool.putconn(conn)
        return self.pool.getconn()

    def close(self) -> None:
        self.pool.close()


def _alive(conn: Conn) -> bool:
    """Liveness without a round trip: an idle connection has nothing to read, so a readable
    socket means the server said goodbye (terminated backend, restart) or closed it."""
    if conn.closed or conn.broken:
        return False
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return not readable


@contextmanager
def errors_mapped() -> Iterator[None]:
    try:
        yield
    except psycopg.errors.UndefinedTable as exc:
        raise SchemaError(
            f"tether tables are missing ({one_line(exc)}): run `tether migrate` first"
        ) from exc
    except (psycopg.OperationalError, psycopg.InterfaceError, PoolClosed) as exc:
        # OperationalError covers PoolTimeout, terminated backends, lost connections,
        # deadlocks and serialization failures: all are safe for the caller to retry.
        raise StoreUnavailable(f"PostgreSQL unavailable: {one_line(exc)}") from exc
