"""Connecting to Redis: client settings, and the one place redis-py's errors become tether's.

Invariant: no redis-py exception (nor an encoding error from its encoder) leaves the store.
Transient server states become :class:`StoreUnavailable` (the caller backs off and retries);
the server at its maxmemory (OOM) becomes :class:`StoreFull`, a StoreUnavailable on which a
worker also stops claiming; everything else becomes :class:`StoreError` with a one-line
message, so a permanent error is never retried forever and never kills a worker thread with a
raw driver exception.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from tether._errors import ConfigError, StoreError, StoreFull, StoreUnavailable

#: Error codes of states that pass by themselves: a failover left us on a replica (READONLY),
#: the replica's master link is down (MASTERDOWN), a resharding or cluster state change
#: (TRYAGAIN, CLUSTERDOWN), the dataset is loading (LOADING), another client's script is
#: running long (BUSY), the server is out of memory until something is freed (OOM, the
#: "resources" class every store treats as transient), not enough replicas (NOREPLICAS).
TRANSIENT_CODES = frozenset(
    {"READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "BUSY", "OOM", "NOREPLICAS"}
)
_TRANSIENT_TYPES: tuple[type[Exception], ...] = tuple(
    t
    for t in (
        getattr(redis.exceptions, name, None)
        for name in ("ReadOnlyError", "MasterDownError", "TryAgainError", "ClusterDownError",
                     "OutOfMemoryError", "BusyLoadingError")
    )
    if isinstance(t, type) and issubclass(t, Exception)
)
_MAX_MESSAGE = 300


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def is_full(exc: redis.RedisError) -> bool:
    """The server is at its maxmemory and refuses commands that may grow memory (OOM)."""
    oom = getattr(redis.exceptions, "OutOfMemoryError", None)
    if isinstance(oom, type) and isinstance(exc, oom):
        return True
    # Redis < 7 wraps an error raised inside a script: "ERR Error running script ...: -OOM
    # command not allowed when used memory > 'maxmemory'".
    text = str(exc)
    return text.startswith("OOM ") or "command not allowed when used memory" in text


def is_transient(exc: redis.RedisError) -> bool:
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, *_TRANSIENT_TYPES)):
        return True  # BusyLoadingError (LOADING) is a ConnectionError in redis-py
    code = str(exc).split(" ", 1)[0]
    return code in TRANSIENT_CODES


@contextmanager
def io() -> Iterator[None]:
    """Translate redis-py errors into tether's: transient ones become StoreUnavailable."""
    try:
        yield
    except redis.AuthenticationError as exc:  # a ConnectionError, but retrying cannot help
        raise StoreError(f"redis refused the credentials: {one_line(exc)}") from exc
    except redis.RedisError as exc:
        if is_full(exc):
            raise StoreFull(
                f"redis is at its memory limit and refuses writes ({one_line(exc)}): free "
                "memory or raise maxmemory; tether resumes by itself (docs/deploying.md)"
            ) from exc
        if is_transient(exc):
            raise StoreUnavailable(f"redis unavailable: {one_line(exc)}") from exc
        raise StoreError(f"redis error: {one_line(exc)}") from exc
    except UnicodeError as exc:
        # redis-py's encoder met text it cannot encode (a lone surrogate): the caller's input,
        # never transient. (Stores check their own text fields first; this is the last line.)
        raise StoreError(f"redis: text that is not valid Unicode: {one_line(exc)}") from exc


def keepalive(deadline: float) -> dict[int, int]:
    """TCP options (where the platform has them) that notice a peer gone silent: probes after
    5 s idle, every 2 s, 3 of them; and data left unacknowledged for the deadline ends the
    connection (``TCP_USER_TIMEOUT``, in ms)."""
    wanted = {"TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3,
              "TCP_USER_TIMEOUT": max(1, round(deadline * 1000))}
    return {getattr(socket, name): value for name, value in wanted.items()
            if hasattr(socket, name)}


def timeouts(deadline: float) -> dict[str, Any]:
    """The client settings that bound every wait of a command by the store's deadline (see
    :mod:`tether.stores._deadline`): connecting, and reading each reply. A user's own
    ``socket_timeout`` or ``socket_connect_timeout`` in the URL wins."""
    return {
        "socket_timeout": deadline,
        "socket_connect_timeout": deadline,
        "socket_keepalive": True,
        "socket_keepalive_options": keepalive(deadline),
    }


def connect(url: str, options: dict[str, Any], deadline: float) -> redis.Redis:
    """A redis-py client (connection pool, thread-safe) with tether's defaults."""
    settings: dict[str, Any] = {
        **timeouts(deadline),
        # PING a connection that sat idle this long before using it, so a connection killed
        # by a server restart is replaced before a script is sent on it.
        "health_check_interval": 15,
        # One quick retry on a connection error (a stale pooled connection, or a reply lost
        # on the way back). It may replay a script the server already ran: every script is
        # replay-safe (request records, kept tokens, idempotent renewals; see store.py).
        # Timeouts are not retried here: the caller gets StoreUnavailable and decides (a
        # retry would wait out the deadline again).
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), 1, (redis.ConnectionError,)),
        "retry_on_timeout": False,
    }
    settings.update(options)
    settings["decode_responses"] = True  # the codec works on str
    try:
        client: redis.Redis = redis.Redis.from_url(url, **settings)
    except (TypeError, ValueError) as exc:  # an option redis-py does not take
        raise ConfigError(f"redis client options: {one_line(exc)}") from exc
    return client
