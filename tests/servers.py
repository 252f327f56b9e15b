"""Real servers for tests: isolated URLs per test, and the CI rule.

Each test gets its own SQLite file, PostgreSQL schema or Redis key prefix, so tests never see
each other's jobs. When a server is unreachable the test is skipped on a developer machine but
*fails* under ``CI=true``: CI must never go green by not testing a store.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PG_DSN = os.environ.get("TETHER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TETHER_TEST_REDIS", "redis://127.0.0.1:6379/0")
STORE_KINDS = ("sqlite", "postgres", "redis")
#: Suites that stay in one process (the contract suite, the in-process worker suite) also run on
#: the memory store; suites that share a store with another process (crash tests, CLI
#: subprocesses) cannot use it, so STORE_KINDS leaves it out.
IN_PROCESS_KINDS = (*STORE_KINDS, "memory")


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def require_server(kind: str) -> None:
    host, port = {"postgres": ("127.0.0.1", 5432), "redis": ("127.0.0.1", 6379)}[kind]
    if _reachable(host, port):
        return
    message = f"{kind} is not reachable on {host}:{port}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message} (CI=true: an unreachable server is a failure)")
    pytest.skip(message)


def _drop_pg_schema(schema: str) -> None:
    from tests.pg_template import drop_schema  # imports this module

    drop_schema(schema)


def _drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        batch = [key for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        for i in range(0, len(batch), 500):
            client.delete(*batch[i : i + 500])
    finally:
        client.close()


@contextmanager
def isolated_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A store URL nobody else uses, cleaned up afterwards."""
    tag = "t" + uuid.uuid4().hex[:12]
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / (tag + '.db')}"
    elif kind == "postgres":
        require_server("postgres")
        try:
            yield f"{PG_DSN}?schema={tag}"
        finally:
            _drop_pg_schema(tag)
    elif kind == "memory":
        yield f"memory://{tag}"
    elif kind == "redis":
        require_server("redis")
        try:
            yield f"{REDIS_URL}?prefix={tag}"
        finally:
            _drop_redis_prefix(tag)
    else:  # pragma: no cover
        raise ValueError(kind)
