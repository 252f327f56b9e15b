"""A migrated PostgreSQL schema per test, cloned from a template migrated once per process.

Invariant: a clone is exactly what ``PostgresStore.migrate()`` leaves. The template is made by
``migrate()`` itself on a schema of its own, then dumped (``pg_dump --schema-only`` plus the
``schema_version`` rows); a clone replays that dump under the test's schema name, in one
transaction. ``tests/postgres/test_template.py`` compares the catalogs of a clone with those
of a freshly migrated schema, so a migration the dump cannot reproduce fails there.

Why: migrating is about 30 ms of DDL, round trips and a synchronous commit per test, about
half of the PostgreSQL contract suite's time. A clone is one round trip whose commit does not
wait for the disk (``synchronous_commit = off`` on this module's own connection: the schema is
visible to other connections at commit all the same, and a crash of the server would only lose
test schemas). Dropping a test's schema goes through the same connection.

Where ``pg_dump`` is missing (or cannot dump this server), :func:`clone_migrated` returns False
and the caller migrates as before. Tests that test migration never use a clone.
"""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg

from tests.servers import PG_DSN

#: Schema names a clone may take: the dump names its objects unquoted.
_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_TEMPLATE = "tether_template_" + uuid.uuid4().hex[:12]


class _State:
    """This process's template dump (made on first use) and its own connection."""

    def __init__(self) -> None:
        self.script: str | None = None  # the template's dump, its schema named _TEMPLATE
        self.unavailable = False
        self.conn: psycopg.Connection[Any] | None = None

    def connection(self) -> psycopg.Connection[Any]:
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = psycopg.connect(PG_DSN, autocommit=True)
            self.conn.execute("SET synchronous_commit = off")
        return self.conn

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()


_state = _State()
atexit.register(_state.close)


def _dump_template() -> str | None:
    """Migrate the template schema with the store's own migrate(), dump it, drop it."""
    from tether.stores._postgres.store import PostgresStore

    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        return None
    store = PostgresStore(f"{PG_DSN}?schema={_TEMPLATE}")
    try:
        store.migrate()
    finally:
        store.close()
    try:
        dumped = subprocess.run(
            [pg_dump, "--no-owner", "--no-privileges", "--inserts", "--schema", _TEMPLATE,
             PG_DSN],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        drop_schema(_TEMPLATE)
    # psql's meta-commands (\restrict ...) and comments are not SQL.
    lines = [line for line in dumped.splitlines()
             if not line.startswith("\\") and not line.startswith("--")]
    script = "\n".join(lines)
    return script if f"CREATE SCHEMA {_TEMPLATE};" in script else None


def clone_migrated(schema: str) -> bool:
    """Create ``schema`` as ``migrate()`` leaves it; False when no template can be made
    (the caller then migrates)."""
    if _state.unavailable or not _PLAIN_NAME.match(schema):
        return False
    if _state.script is None:
        _state.script = _dump_template()
        if _state.script is None:
            _state.unavailable = True
            return False
    script = _state.script.replace(_TEMPLATE, schema).encode()
    try:
        _replay(script)
    except psycopg.errors.DuplicateSchema:  # made already: migrate() does what is left
        return False
    except psycopg.OperationalError:  # a test killed our backend: once more on a new one
        _replay(script)
    return True


def clone_for_url(url: str) -> bool:
    """:func:`clone_migrated` on the schema named by a test's store URL (``?schema=``)."""
    schema = parse_qs(urlsplit(url).query).get("schema", [""])[0]
    return bool(schema) and clone_migrated(schema)


def _replay(script: bytes) -> None:
    conn = _state.connection()
    with conn.transaction():
        conn.execute(script, prepare=False)


def drop_schema(schema: str) -> None:
    statement = f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'
    try:
        _state.connection().execute(statement, prepare=False)
    except psycopg.OperationalError:  # a test killed our backend: once more on a new one
        _state.connection().execute(statement, prepare=False)
