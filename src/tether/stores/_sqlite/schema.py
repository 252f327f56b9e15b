"""Schema of the SQLite store: create, upgrade and check it (the
:class:`~tether.stores._contract.Lifecycle` role, with ``info``).

Versions: 1 is ``schema.sql``; every later version N is ``schema_vN.sql``, a list of upgrade
steps. ``migrate`` reads the file's version under the write lock and applies the missing steps
and their version rows in that one transaction, so a database made by an older tether keeps
its jobs and keeps working, and concurrent migrations apply each step once.
"""

from __future__ import annotations

import sqlite3

from tether._errors import SchemaError
from tether.stores._contract import StoreInfo
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.rows import SCHEMA_STEPS, SCHEMA_VERSION, Q, store_now

_TABLES = frozenset({"jobs", "workers", "leaders", "schema_version", "requests",
                     "schedules", "flow_starts", "job_links"})


class SQLiteSchema:
    """The :class:`~tether.stores._contract.Lifecycle` role of :class:`SQLiteStore`: migrate,
    check_schema, and info."""

    _db: Connections
    kind: str
    url: str
    path: str

    @guarded
    def migrate(self) -> int:
        """Apply the schema steps newer than the file's version, in one write transaction.

        The version is read under the write lock, so concurrent migrations (threads or
        processes) run the steps once: the first one applies them, the others find them done.
        """
        with self._db.write() as conn:
            exists = conn.execute(Q["schema_version_exists"]).fetchone() is not None
            current = (conn.execute(Q["schema_version"]).fetchone()[0] if exists else None) or 0
            if current > SCHEMA_VERSION:
                raise SchemaError(
                    f"SQLite schema version {current} is newer than this tether knows "
                    f"({SCHEMA_VERSION}); upgrade tether"
                )
            t = store_now(conn, None)
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in SCHEMA_STEPS[version].values():
                    conn.execute(statement)
                conn.execute(Q["schema_version_insert"], {"version": version, "now": t})
        return SCHEMA_VERSION

    @guarded
    def check_schema(self) -> None:
        conn = self._db.get()
        found = {row[0] for row in conn.execute(Q["schema_tables"])}
        if "schema_version" not in found:
            raise SchemaError(
                f"SQLite schema is missing in {self._db.path!r}: run `tether migrate`"
            )
        version = conn.execute(Q["schema_version"]).fetchone()[0]
        if version is None:
            raise SchemaError(f"SQLite schema in {self._db.path!r} has no version: run migrate")
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"SQLite schema version {version} is newer than this tether knows "
                f"({SCHEMA_VERSION}); upgrade tether"
            )
        if version < SCHEMA_VERSION or _TABLES - found:
            raise SchemaError(
                f"SQLite schema version {version} in {self._db.path!r} is older than this "
                f"tether's ({SCHEMA_VERSION}): run `tether migrate` (existing jobs are kept)"
            )

    @guarded
    def info(self) -> StoreInfo:
        conn = self._db.get()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        try:
            version = conn.execute(Q["schema_version"]).fetchone()[0] or 0
        except sqlite3.OperationalError:
            version = 0
        return StoreInfo(
            kind=self.kind,
            url=self.url,
            schema_version=int(version),
            extra={
                "path": self.path,
                "journal_mode": str(mode),
                "sqlite_version": sqlite3.sqlite_version,
            },
        )
