"""PostgreSQL URLs: bad input is one ConfigError, parameters reach libpq intact, and no
password ever shows (issue #8, I)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import quote

import pytest

from tests.servers import PG_DSN
from tether._errors import ConfigError, TetherError
from tether.stores import open_store
from tether.stores._postgres.store import PostgresStore
from tether.stores._urls import redact, take_param

SECRET = "s3cr3t-pw-x"


@pytest.mark.parametrize(
    "schema", ["pg_catalog", "information_schema", "pg_toast", "pg_temp_3", "pg_temp",
               "PG_CATALOG", "pg_anything"]
)
def test_system_schemas_are_refused(schema: str) -> None:
    with pytest.raises(ConfigError, match="schema") as caught:
        PostgresStore(f"{PG_DSN}?schema={schema}")
    assert "\n" not in str(caught.value)


def test_parameters_with_spaces_reach_libpq_intact(pg_url: str) -> None:
    url = pg_url + "&options=-c%20statement_timeout%3D4321&application_name=my%20app"
    store = PostgresStore(url)
    try:
        with store.transaction() as conn:
            assert conn.execute("SHOW statement_timeout").fetchone() == ("4321ms",)
            # the operator's name is what pg_stat_activity shows, not tether's generated one
            assert conn.execute("SHOW application_name").fetchone() == ("my app",)
        assert store.application_name == "my app" == store.info().extra["application_name"]
        store.migrate()
        assert store.now() > 0
    finally:
        store.close()


def test_take_param_keeps_the_other_parameters_byte_for_byte() -> None:
    url = "postgresql://u@h/db?options=-c%20a%3Db&schema=s&x=a+b&y=%2B"
    rest, value = take_param(url, "schema")
    assert value == "s"
    assert rest == "postgresql://u@h/db?options=-c%20a%3Db&x=a+b&y=%2B"
    assert take_param("postgresql://u@h/db?schema=s", "schema") == ("postgresql://u@h/db", "s")
    assert take_param("postgresql://u@h/db", "schema") == ("postgresql://u@h/db", None)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://bob:{SECRET}@127.0.0.1:1/db",
        f"postgresql://bob@127.0.0.1:1/db?password={SECRET}",
        f"postgresql://bob@127.0.0.1:1/db?sslmode=disable&password={quote(SECRET)}&x=1",
        f"postgresq://bob:{SECRET}@127.0.0.1:1/db",
        f"host=127.0.0.1 port=1 user=bob password={SECRET} dbname=db",
        f"host=127.0.0.1 password = '{SECRET}' dbname=db",
        f"mysql://bob:{SECRET}@localhost/db",
    ],
)
def test_no_password_in_any_error_or_log_line(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert SECRET not in redact(url)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TetherError) as caught:
        open_store(url, connect_timeout=2)
    text = str(caught.value) + repr(caught.value)
    assert SECRET not in text, text
    assert SECRET not in caplog.text


def test_a_wrong_password_is_not_echoed(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = pg_url.replace("postgresql://postgres@", f"postgresql://nobody_here:{SECRET}@")
    with pytest.raises(TetherError) as caught:
        PostgresStore(url)
    assert SECRET not in str(caught.value)
    assert SECRET not in caplog.text


def test_redact_keeps_what_is_not_secret() -> None:
    assert redact("postgresql://u:pw@h:5/db?schema=s") == "postgresql://u:***@h:5/db?schema=s"
    assert redact("postgresql://u@h/db?password=pw&schema=s") == (
        "postgresql://u@h/db?password=***&schema=s")
    assert redact("host=h password=pw dbname=d") == "host=h password=*** dbname=d"
    assert redact("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"


def test_info_and_errors_show_the_redacted_url(
    pg_url: str, open_pg: Callable[..., PostgresStore]
) -> None:
    store = open_pg()
    assert store.info().url == redact(pg_url)
