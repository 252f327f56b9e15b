"""Fixtures for the Redis-specific tests: a RedisStore on a key prefix of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import redis

from tests.servers import REDIS_URL, isolated_url
from tests.throwaway.redis import ThrowawayRedis, throwaway_redis
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
def server(tmp_path: Path) -> Iterator[ThrowawayRedis]:
    """A throwaway redis-server without persistence (a restart is a data loss), for tests that
    reconfigure, fill, restart or break it; killed afterwards."""
    with throwaway_redis(tmp_path) as s:
        yield s


@pytest.fixture
def server_aof(tmp_path: Path) -> Iterator[ThrowawayRedis]:
    """A throwaway redis-server with an append-only file fsynced on every write: a restart,
    even a SIGKILL, keeps every acknowledged write."""
    with throwaway_redis(tmp_path, appendonly=True, appendfsync="always") as s:
        yield s
