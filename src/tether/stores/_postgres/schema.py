"""Versioned schema migrations for the PostgreSQL store, and its
:class:`~tether.stores._contract.Lifecycle` role (:class:`PostgresSchema`).

Migrations are the ``NNNN_name.sql`` files of the ``migrations`` package, applied in order,
each recorded in ``schema_version``. :func:`migrate` runs in ONE transaction that first takes
``pg_advisory_xact_lock`` on the schema name, so processes starting together migrate once:
the second waits, then finds the work done. The migration files name their tables without a
schema: the transaction sets its own ``search_path`` to the schema (``SET LOCAL``, gone at
commit), so the connection goes back to the pool with the user's path untouched.
"""

from __future__ import annotations

import re
from importlib import resources

from psycopg import sql

from tether._errors import SchemaError
from tether.stores import _queries as named
from tether.stores._contract import StoreInfo
from tether.stores._postgres.connection import Conn
from tether.stores._postgres.plumbing import Plumbing
from tether.stores._urls import redact

MIGRATIONS_PACKAGE = "tether.stores._postgres.migrations"
_FILE = re.compile(r"^(\d{4})_[A-Za-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str]]:
    """(version, filename) of every shipped migration, in order, versions 1..N without gaps."""
    found: list[tuple[int, str]] = []
    for entry in resources.files(MIGRATIONS_PACKAGE).iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name))
    found.sort()
    if [version for version, _ in found] != list(range(1, len(found) + 1)):
        raise SchemaError(f"migration files are not numbered 1..N: {found}")
    return found


def latest_version() -> int:
    return len(migrations())


def too_new(found: int, known: int) -> SchemaError:
    return SchemaError(
        f"database schema version {found} is newer than this tether (knows {known}); upgrade tether"
    )


def migrate(conn: Conn, schema: str, queries: dict[str, str]) -> int:
    """Create or upgrade ``schema`` on ``conn`` (autocommit; statements bound to ``schema``)."""
    known = migrations()
    with conn.transaction():
        conn.execute(queries["migrate_lock"], {"schema": schema}, prepare=False)
        conn.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)),
            prepare=False,
        )
        conn.execute(
            sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)), prepare=False
        )
        conn.execute(queries["create_version_table"], prepare=False)
        current = _version(conn, queries)
        if current > len(known):
            raise too_new(current, len(known))
        for version, filename in known[current:]:
            conn.execute(named.read(MIGRATIONS_PACKAGE, filename).encode(), prepare=False)
            conn.execute(queries["record_version"], {"version": version}, prepare=False)
    return len(known)


def check(conn: Conn, schema: str, queries: dict[str, str]) -> int:
    """The schema version in place; SchemaError when missing, too old or too new."""
    row = conn.execute(queries["has_version_table"], prepare=False).fetchone()
    if row is None or not row[0]:
        raise SchemaError(
            f"PostgreSQL schema {schema!r} has no tether tables: run `tether migrate`"
        )
    current = _version(conn, queries)
    known = latest_version()
    if current > known:
        raise too_new(current, known)
    if current < known:
        raise SchemaError(
            f"database schema version {current} is older than this tether (needs {known}): "
            "run `tether migrate`"
        )
    return current


def current(conn: Conn, queries: dict[str, str]) -> int:
    """The schema version in place, 0 when there is none yet (never raises SchemaError)."""
    row = conn.execute(queries["has_version_table"], prepare=False).fetchone()
    return _version(conn, queries) if row is not None and row[0] else 0


def _version(conn: Conn, queries: dict[str, str]) -> int:
    row = conn.execute(queries["schema_version"], prepare=False).fetchone()
    return int(row[0]) if row is not None else 0


class PostgresSchema(Plumbing):
    """The :class:`~tether.stores._contract.Lifecycle` role of :class:`PostgresStore`:
    migrate, check_schema, and info (the functions above do the work)."""

    kind: str

    def migrate(self) -> int:
        # DDL may wait for locks and rewrite tables: not bound by the call deadline.
        with self._connector.connection(bounded=False) as conn:
            return migrate(conn, self.schema, self.queries)

    def check_schema(self) -> None:
        with self._connector.connection() as conn:
            check(conn, self.schema, self.queries)

    def info(self) -> StoreInfo:
        with self._connector.connection() as conn:
            version = current(conn, self.queries)
            server = conn.info.server_version
            incidents = _incidents(conn, self.queries) if version >= IDENTITY_VERSION else {}
        stats = self._connector.pool.stats()
        return StoreInfo(
            kind=self.kind,
            url=redact(self.url),
            schema_version=version,
            extra={
                "schema": self.schema,
                "server_version": f"{server // 10000}.{server % 10000}",
                "pool_size": str(stats["pool_size"]),
                "pool_max": str(stats["pool_max"]),
                "channel": self.channel,
                "application_name": self.application_name,
                **incidents,
            },
        )


#: The schema version that made the identity row (0004).
IDENTITY_VERSION = 4


def _incidents(conn: Conn, queries: dict[str, str]) -> dict[str, str]:
    """The failovers and data losses counted by the stores' watches (see watch.py)."""
    row = conn.execute(queries["identity_info"], prepare=False).fetchone()
    timeline, failovers, lost, failover_at, lost_at = row or (None, 0, 0, None, None)
    found = {"timeline": "?" if timeline is None else str(timeline),
             "failovers": str(failovers or 0), "data_loss": str(lost or 0)}
    if failover_at is not None:
        found["last_failover_at"] = str(failover_at)
    if lost_at is not None:
        found["last_data_loss_at"] = str(lost_at)
    return found


__all__ = ["PostgresSchema", "check", "current", "latest_version", "migrate", "migrations"]
