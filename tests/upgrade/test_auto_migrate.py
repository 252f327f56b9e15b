"""What an app, a worker and the CLI do to a store's schema at start (issue #24, item 2).

The rolling-deploy rule (docs/upgrading.md): by default a process **creates** a schema where
there is none (no older worker can be using a store that has no schema) but **never upgrades**
one: an older schema is refused with one line naming `tether migrate`, the deploy step, so a
new release's first worker cannot change the schema under the old release's running workers.
``auto_migrate=True`` also upgrades (one-process and development set-ups); ``False`` only
checks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import tether
from tests.servers import PG_DSN
from tether._cli.main import main
from tether._errors import SchemaError
from tether.stores._postgres.schema import MIGRATIONS_PACKAGE, latest_version
from tether.stores._queries import read
from tether.stores._sqlite.rows import SCHEMA_STEPS, SCHEMA_VERSION


def _sqlite_at(path: Path, version: int) -> None:
    """A database file as the release of SQLite schema ``version`` left it, with one job."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("BEGIN IMMEDIATE")
        for v in range(1, version + 1):
            for statement in SCHEMA_STEPS[v].values():
                raw.execute(statement)
            raw.execute("INSERT INTO schema_version (version, applied_at) VALUES (?, 0)", (v,))
        raw.execute(
            "INSERT INTO jobs (task, queue, payload, status, run_at, max_attempts, max_stalls,"
            " created_at) VALUES ('t', 'default', '[[1], {}]', 'pending', 0, 5, 3, 0)"
        )
        raw.execute("COMMIT")
    finally:
        raw.close()


def _sqlite_version(path: Path) -> int:
    raw = sqlite3.connect(path)
    try:
        return int(raw.execute("SELECT max(version) FROM schema_version").fetchone()[0])
    finally:
        raw.close()


def _enqueue_one(app: tether.App) -> int:
    @app.task
    def noop() -> None: ...

    return int(noop.enqueue())


def test_default_creates_a_missing_sqlite_schema(tmp_path: Path) -> None:
    """The quick start's case: a fresh file needs no extra step."""
    app = tether.App(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert _enqueue_one(app) == 1
        assert app.store.info().schema_version == SCHEMA_VERSION
    finally:
        app.close()


def test_default_refuses_an_older_sqlite_schema_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _sqlite_at(path, 3)
    app = tether.App(f"sqlite:///{path}")
    try:
        with pytest.raises(SchemaError) as caught:
            _ = app.store
        message = str(caught.value)
        assert "\n" not in message and "run `tether migrate`" in message, message
        assert _sqlite_version(path) == 3, "the default must never upgrade an existing schema"
    finally:
        app.close()


def test_auto_migrate_true_upgrades_and_false_only_checks(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _sqlite_at(path, 3)
    app = tether.App(f"sqlite:///{path}", auto_migrate=True)
    try:
        assert app.store.info().schema_version == SCHEMA_VERSION
        assert app.get_job(1) is not None, "the upgrade keeps the old jobs"
    finally:
        app.close()
    strict = tether.App(f"sqlite:///{tmp_path / 'missing.db'}", auto_migrate=False)
    try:
        with pytest.raises(SchemaError, match="tether migrate"):
            _ = strict.store
    finally:
        strict.close()


def test_cli_worker_refuses_and_tether_migrate_upgrades(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator's view: the worker exits with one line naming the deploy step; `tether
    migrate` is that step; `tether enqueue` (a producer) and `tether server` do not upgrade
    either."""
    path = tmp_path / "old.db"
    _sqlite_at(path, 3)
    url = f"sqlite:///{path}"
    code = main(["enqueue", "t", "--url", url])
    err = capsys.readouterr().err
    assert code == 3 and "run `tether migrate`" in err and len(err.strip().splitlines()) == 1
    code = main(["worker", "tether._demo_tasks:app", "--url", url, "--burst"])
    err = capsys.readouterr().err
    assert code == 3 and "run `tether migrate`" in err, err
    code = main(["server", "--url", url, "--listen", "127.0.0.1:0", "--insecure"])
    err = capsys.readouterr().err
    assert code == 3 and "run `tether migrate`" in err, err
    assert _sqlite_version(path) == 3
    assert main(["migrate", "--url", url]) == 0
    assert f"schema at version {SCHEMA_VERSION}" in capsys.readouterr().out
    assert main(["enqueue", "t", "--url", url]) == 0


@pytest.fixture
def pg_schema_url() -> Iterator[tuple[str, str]]:
    """A PostgreSQL schema name of this test's own (dropped after), and its store URL."""
    name = f"t_automig_{tether_random()}"
    yield name, f"{PG_DSN}?schema={name}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def tether_random() -> str:
    import secrets

    return secrets.token_hex(6)


def test_default_on_postgres_creates_a_missing_schema_refuses_an_older_one(
    pg_schema_url: tuple[str, str],
) -> None:
    schema, url = pg_schema_url
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        with admin.transaction():
            admin.execute(f'SET LOCAL search_path TO "{schema}"')
            admin.execute(read(MIGRATIONS_PACKAGE, "0001_init.sql").encode())
            admin.execute("CREATE TABLE schema_version (version integer PRIMARY KEY, "
                          "applied_at timestamptz NOT NULL DEFAULT now())")
            admin.execute("INSERT INTO schema_version VALUES (1)")
    app = tether.App(url)
    try:
        with pytest.raises(SchemaError, match="run `tether migrate`"):
            _ = app.store
    finally:
        app.close()
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        row = admin.execute(f'SELECT max(version) FROM "{schema}".schema_version').fetchone()
        assert row is not None and row[0] == 1, "the default must never upgrade"
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    fresh = tether.App(url)
    try:
        assert _enqueue_one(fresh) >= 1
        assert fresh.store.info().schema_version == latest_version()
    finally:
        fresh.close()
