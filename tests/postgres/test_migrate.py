"""Migrations, schema checks and connection errors of the PostgreSQL store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.servers import PG_DSN
from tether._errors import ConfigError, SchemaError, StoreUnavailable
from tether.stores import Outcome, Store, open_store
from tether.stores._postgres.schema import MIGRATIONS_PACKAGE, latest_version
from tether.stores._postgres.store import PostgresStore
from tether.stores._queries import read


def test_satisfies_the_protocol(pg: PostgresStore) -> None:
    store: Store = pg
    assert isinstance(store, Store)
    assert store.kind == "postgres"


def test_open_store_picks_postgres_and_strips_schema(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        assert isinstance(store, PostgresStore)
        assert "schema" not in store._connector.dsn
        assert store.migrate() == latest_version()
        assert store.info().schema_version == latest_version()
    finally:
        store.close()


def test_check_schema_on_a_missing_schema(open_pg: Callable[..., PostgresStore]) -> None:
    store = open_pg()
    with pytest.raises(SchemaError, match="tether migrate"):
        store.check_schema()
    with pytest.raises(SchemaError):
        store.get_job(1)  # tables missing: a SchemaError, not a raw driver error
    store.migrate()
    store.check_schema()


def test_concurrent_migrate_migrates_once(
    open_pg: Callable[..., PostgresStore], admin: psycopg.Connection[Any]
) -> None:
    stores = [open_pg() for _ in range(4)]
    barrier = threading.Barrier(len(stores))
    results: list[int] = []
    errors: list[BaseException] = []

    def run(store: PostgresStore) -> None:
        barrier.wait()
        try:
            results.append(store.migrate())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [latest_version()] * len(stores)
    schema = stores[0].schema
    rows = admin.execute(f'SELECT version FROM "{schema}".schema_version').fetchall()
    assert rows == [(v,) for v in range(1, latest_version() + 1)]


def test_newer_schema_version_is_refused(pg: PostgresStore, admin: psycopg.Connection[Any]) -> None:
    newer = latest_version() + 7
    admin.execute(f'INSERT INTO "{pg.schema}".schema_version (version) VALUES (%s)', (newer,))
    message = (
        f"database schema version {newer} is newer than this tether "
        f"(knows {latest_version()}); upgrade tether"
    )
    with pytest.raises(SchemaError) as caught:
        pg.check_schema()
    assert str(caught.value) == message
    with pytest.raises(SchemaError, match="upgrade tether"):
        pg.migrate()


@pytest.mark.parametrize("schema", ["1abc", "a-b", "x" * 59, "a;drop"])
def test_invalid_schema_name_is_a_config_error(schema: str) -> None:
    with pytest.raises(ConfigError, match="schema"):
        PostgresStore(f"{PG_DSN}?schema={schema}")


def test_unreachable_server_is_one_clear_line() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        PostgresStore("postgresql://postgres@127.0.0.1:1/test?schema=t", connect_timeout=2)
    message = str(caught.value)
    assert "\n" not in message
    assert "cannot connect to PostgreSQL at postgresql://postgres@127.0.0.1:1/test" in message
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


def test_unknown_database_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresStore("postgresql://postgres@127.0.0.1:5432/no_such_db_tether?schema=t")
    assert "\n" not in str(caught.value)
    assert "no_such_db_tether" in str(caught.value)


def test_password_is_redacted(pg_url: str) -> None:
    url = pg_url.replace("postgres@", "postgres:s3cret@")
    store = PostgresStore(url)  # trust auth: the password is ignored by the server
    try:
        store.migrate()
        assert "s3cret" not in store.info().url
    finally:
        store.close()


def test_upgrade_from_version_1_keeps_jobs_and_works(
    open_pg: Callable[..., PostgresStore], admin: psycopg.Connection[Any]
) -> None:
    """A database migrated by the previous release (schema 1) is upgraded in place: its jobs
    stay, and the new lease protocol works on them."""
    store = open_pg()
    schema = store.schema
    admin.execute(f'CREATE SCHEMA "{schema}"')
    with admin.transaction():
        admin.execute(f'SET LOCAL search_path TO "{schema}"')
        admin.execute(read(MIGRATIONS_PACKAGE, "0001_init.sql").encode())
        admin.execute("CREATE TABLE schema_version (version integer PRIMARY KEY, "
                      "applied_at timestamptz NOT NULL DEFAULT now())")
        admin.execute("INSERT INTO schema_version VALUES (1)")
        for _ in range(2):
            admin.execute("INSERT INTO jobs (task, queue, payload, run_at, max_attempts, "
                          "max_stalls, created_at) VALUES ('t', 'default', '[[], {}]', now(), "
                          "5, 3, now())")
    with pytest.raises(SchemaError, match="older"):
        store.check_schema()
    assert store.migrate() == latest_version() == 10
    store.check_schema()
    # Version 4: every existing job got a uid of its own (issue 18, B), and the identity row.
    uids = [store.get_job(i).uid for i in (1, 2)]  # type: ignore[union-attr]
    assert all(len(u) == 32 and int(u, 16) >= 0 for u in uids) and uids[0] != uids[1], uids
    assert store.info().extra["data_loss"] == "0"
    [job, _] = store.claim("w", ["default"], 2, 30)
    assert job.lease_token and job.lease_token.endswith(f":{job.id}")
    assert store.finish([Outcome(job.lease, "done", result="1")]) == []
    done = store.get_job(job.id)
    assert done is not None and done.status == "done"
