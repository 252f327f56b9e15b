"""Connecting to Redis: URL handling, client settings, and error translation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from tether.errors import ConfigError, StoreError, StoreUnavailable
from tether.stores.urls import redact, take_param

_TRANSIENT = frozenset({"READONLY", "BUSY", "MASTERDOWN", "TRYAGAIN", "LOADING"})


@contextmanager
def io() -> Iterator[None]:
    """Translate redis-py errors into tether's: transient ones become StoreUnavailable."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:  # includes BusyLoadingError
        raise StoreUnavailable(f"redis unavailable: {exc}") from exc
    except redis.ResponseError as exc:
        # READONLY: a failover left us on a replica; BUSY: another client's script is stuck;
        # MASTERDOWN / TRYAGAIN: replication or resharding in progress. All pass by themselves.
        if str(exc).split(" ", 1)[0] in _TRANSIENT or isinstance(exc, redis.ReadOnlyError):
            raise StoreUnavailable(f"redis unavailable: {exc}") from exc
        raise StoreError(f"redis error: {exc}") from exc
    except redis.RedisError as exc:
        raise StoreError(f"redis error: {exc}") from exc


def split_url(url: str) -> tuple[str, str | None]:
    """The URL for redis-py (without ``prefix``) and the prefix given in it, if any."""
    if urlsplit(url).scheme.lower() not in ("redis", "rediss"):
        raise ConfigError(f"not a redis URL: {redact(url)!r}")
    return take_param(url, "prefix")


def connect(url: str, options: dict[str, Any]) -> redis.Redis:
    """A redis-py client (connection pool, thread-safe) with tether's defaults."""
    settings: dict[str, Any] = {
        "socket_timeout": 10.0,
        "socket_connect_timeout": 5.0,
        # PING a connection that sat idle this long before using it, so a connection killed
        # by a server restart is replaced before a script is sent on it.
        "health_check_interval": 15,
        # One quick retry on a connection error (a stale pooled connection). Timeouts are NOT
        # retried: the script may have run, and replaying a claim or enqueue would apply it
        # twice; the caller gets StoreUnavailable and decides.
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), 1, (redis.ConnectionError,)),
        "retry_on_timeout": False,
    }
    settings.update(options)
    settings["decode_responses"] = True  # the codec works on str
    client: redis.Redis = redis.Redis.from_url(url, **settings)
    return client
