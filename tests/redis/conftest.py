"""Fixtures for the Redis-specific tests: a RedisStore on a key prefix of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import redis

from tests.redis.own_server import OwnRedis
from tests.servers import REDIS_URL, isolated_url
from tether.stores._redis.store import RedisStore


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with isolated_url("redis", tmp_path) as url:
        yield url


@pytest.fixture
def prefix(redis_url: str) -> str:
    return parse_qs(urlsplit(redis_url).query)["prefix"][0]


@pytest.fixture
def rstore(redis_url: str) -> Iterator[RedisStore]:
    s = RedisStore(redis_url)
    s.migrate()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def raw() -> Iterator[redis.Redis]:
    """A plain client on the test server, for looking at keys directly."""
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        yield client
    finally:
        client.close()


def keys_under(client: redis.Redis, prefix: str) -> set[str]:
    return {str(k) for k in client.scan_iter(match=f"{prefix}:*", count=1000)}


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    """A private redis-server without persistence (restart = data loss); killed afterwards."""
    server = OwnRedis(tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis_aof(tmp_path: Path) -> Iterator[OwnRedis]:
    """A private redis-server with an append-only file (a clean restart keeps the data)."""
    server = OwnRedis(tmp_path, appendonly=True)
    try:
        yield server
    finally:
        server.stop()
