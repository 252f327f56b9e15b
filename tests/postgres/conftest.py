"""Fixtures for the PostgreSQL-specific tests: a schema per test (or per module)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pg_template import clone_for_url
from tests.servers import PG_DSN, isolated_url
from tether.stores._postgres.store import PostgresStore


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    with isolated_url("postgres", tmp_path) as url:
        yield url


@pytest.fixture
def open_pg(pg_url: str) -> Iterator[Callable[..., PostgresStore]]:
    """Open (and later close) stores on the test's schema; the first call migrates."""
    opened: list[PostgresStore] = []

    def _open(**options: Any) -> PostgresStore:
        store = PostgresStore(pg_url, **options)
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def pg(pg_url: str, open_pg: Callable[..., PostgresStore]) -> PostgresStore:
    """A store on the test's schema, migrated: cloned from the migrated template
    (tests/pg_template.py), so migrate() only checks it. Tests of migration use ``open_pg``."""
    clone_for_url(pg_url)
    store = open_pg()
    store.migrate()
    return store


@pytest.fixture
def admin() -> Iterator[psycopg.Connection[Any]]:
    """A plain autocommit connection for inspecting and poking the server."""
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        yield conn


@pytest.fixture
def scratch_db() -> Iterator[str]:
    """A database of its own (created and dropped here), for tests that change database-wide
    settings (a read-only node) or need the default ``public`` schema to themselves. Yields
    its URL (without tether's ``schema`` parameter)."""
    name = "tether_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_DSN.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
