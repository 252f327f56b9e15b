"""A store made for one test and removed after it: what the pytest plugin's ``tether_app``
runs on (``tether_store`` = ``memory``, ``sqlite``, or a PostgreSQL / Redis server URL).

Invariant: a test's store shares nothing with any other test, in this process or another
(pytest-xdist): memory stores and PostgreSQL schemas and Redis key prefixes get a random
name, SQLite files live in the test's own ``tmp_path``. What a test made on a server (its
schema, its keys) is deleted after it, and only that: the name is the test's alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit

from tether._errors import ConfigError
from tether.stores._urls import redact, take_param

KINDS = ("memory", "sqlite")
_POSTGRES = ("postgresql", "postgres")
_REDIS = ("redis", "rediss")


def check_choice(choice: str) -> str:
    """``memory``, ``sqlite`` or a PostgreSQL / Redis URL; ConfigError for anything else."""
    scheme = urlsplit(choice).scheme.lower() if "://" in choice else ""
    if choice in KINDS or scheme in _POSTGRES + _REDIS:
        return choice
    raise ConfigError(f"tether_store must be memory, sqlite, or a postgresql:// or redis:// "
                      f"URL of a server the tests may use, got {redact(choice)!r}")


def _with_param(url: str, name: str, value: str) -> str:
    base, _ = take_param(url, name)
    return f"{base}{'&' if urlsplit(base).query else '?'}{name}={quote(value, safe='')}"


@contextmanager
def fresh_url(choice: str, tmp_path: Path) -> Iterator[str]:
    """A store URL nobody else uses, for the ``with`` block; its data is removed after."""
    check_choice(choice)
    tag = f"tether_test_{uuid.uuid4().hex[:16]}"
    if choice == "memory":
        yield f"memory://{tag}"  # gone when the last store of the name closes
        return
    if choice == "sqlite":
        yield f"sqlite:///{tmp_path / 'tether.db'}"  # pytest removes tmp_path
        return
    if urlsplit(choice).scheme.lower() in _POSTGRES:
        url = _with_param(choice, "schema", tag)
        try:
            yield url
        finally:
            _drop_schema(url)
    else:
        url = _with_param(choice, "prefix", tag)
        try:
            yield url
        finally:
            _drop_prefix(url)


def _drop_schema(url: str) -> None:
    import psycopg
    from psycopg import sql

    from tether.stores._postgres.url import split_url

    dsn, schema = split_url(url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _drop_prefix(url: str) -> None:
    import redis

    from tether.stores._redis.url import parse

    checked = parse(url)
    client = redis.Redis.from_url(checked.client_url)
    try:
        keys = list(client.scan_iter(match=f"{checked.prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
    finally:
        client.close()


__all__ = ["KINDS", "check_choice", "fresh_url"]
