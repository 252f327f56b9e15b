"""The tests' migrated template (tests/pg_template.py) is exactly what migrate() leaves.

Every ``store``/``pg`` fixture on PostgreSQL starts from a clone of it; if a migration ever
makes something the dump cannot reproduce, the clone and a migrated schema differ here.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.pg_template import clone_migrated, drop_schema
from tests.servers import PG_DSN, require_server
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore

#: (what, query) pairs that describe a schema's objects, with its name as %(s)s.
_CATALOG = [
    ("columns", "SELECT table_name, column_name, ordinal_position, data_type, "
                "column_default, is_nullable, is_identity, identity_generation "
                "FROM information_schema.columns WHERE table_schema = %(s)s"),
    ("constraints", "SELECT conrelid::regclass::text, conname, "
                    "pg_get_constraintdef(c.oid) FROM pg_constraint c "
                    "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = %(s)s"),
    ("indexes", "SELECT tablename, indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = %(s)s"),
    ("sequences", "SELECT sequencename, data_type, start_value, increment_by, last_value, "
                  "cycle, cache_size FROM pg_sequences WHERE schemaname = %(s)s"),
    ("functions", "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
                  "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(s)s"),
    ("tables", "SELECT c.relname, c.relkind, c.relpersistence FROM pg_class c "
               "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(s)s"),
]


def _describe(conn: psycopg.Connection[Any], schema: str) -> dict[str, list[tuple[Any, ...]]]:
    described = {}
    for what, query in _CATALOG:
        rows = conn.execute(query, {"s": schema}).fetchall()
        described[what] = sorted(
            tuple(str(v).replace(schema, "<schema>") for v in row) for row in rows
        )
    return described


@pytest.fixture
def clone() -> Iterator[str]:
    require_server("postgres")
    schema = "t" + uuid.uuid4().hex[:12]
    if not clone_migrated(schema):
        message = "pg_dump cannot dump this server: the fixtures migrate instead"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{message} (CI=true: the suite must run as it does in CI)")
        pytest.skip(message)
    try:
        yield schema
    finally:
        drop_schema(schema)


def test_a_clone_is_what_migrate_leaves(clone: str, admin: psycopg.Connection[Any]) -> None:
    migrated = "t" + uuid.uuid4().hex[:12]
    store = PostgresStore(f"{PG_DSN}?schema={migrated}")
    try:
        store.migrate()
        assert _describe(admin, clone) == _describe(admin, migrated)
        versions = sql.SQL("SELECT version FROM {}.schema_version ORDER BY version")
        assert (admin.execute(versions.format(sql.Identifier(clone))).fetchall()
                == admin.execute(versions.format(sql.Identifier(migrated))).fetchall())
    finally:
        store.close()
        drop_schema(migrated)


def test_a_clone_works_as_a_store(clone: str) -> None:
    store = PostgresStore(f"{PG_DSN}?schema={clone}")
    try:
        store.check_schema()
        assert store.enqueue([NewJob("t")]) == [1]
        assert [j.id for j in store.claim("w", ["default"], 1, 30)] == [1]
    finally:
        store.close()
