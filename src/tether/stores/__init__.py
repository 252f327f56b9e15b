"""The store contract and the store registry: what a storage engine implements, and the URL
that picks one.

Public: the contract (``Store``, the role Protocols a caller names instead of all of it:
``Producer``, ``Leases``, ``Maintenance``, ``Admin``, ``Lifecycle``; the declared
``Capabilities`` and the ``Transactional`` ability; and the records that cross the seam,
re-exported from the private modules that hold them) for anyone who writes or tests a store,
and ``open_store``.
Tether's own modules import from the private modules directly, so that this package can open
every store without an import circle.

* ``sqlite:///relative.db`` / ``sqlite:////absolute/path.db`` (embedded default)
* ``postgresql://user@host:5432/db?schema=tether`` (also ``postgres://``)
* ``redis://host:6379/0?prefix=tether`` (also ``rediss://``)
* ``tether://TOKEN@HOST:PORT[,HOST:PORT...]`` (a ``tether server``; ``tethers://`` for TLS)
* ``memory://NAME`` (in-process, for tests and demos; stores of one NAME share data,
  ``memory://`` alone is private)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tether._errors import ConfigError
from tether._install import install_hint
from tether.stores import _contract
from tether.stores._contract import *  # noqa: F403 - the contract, re-exported whole
from tether.stores._contract import Store
from tether.stores._urls import redact

DEFAULT_PATH = "tether.db"
#: The store of a process that names none: an SQLite file in the working directory (a
#: WARNING says so, outside tests: tether._environ).
DEFAULT_URL = f"sqlite:///{DEFAULT_PATH}"


def open_store(url: str, **options: Any) -> Store:
    """Open the store a URL names. Extra options go to the store's constructor."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        from tether.stores._sqlite.store import SQLiteStore

        return SQLiteStore(url, **options)
    if scheme in ("postgresql", "postgres"):
        try:
            from tether.stores._postgres.store import PostgresStore
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                f"{redact(url)!r} needs the PostgreSQL driver, {install_hint('postgres')} "
                f"({exc})"
            ) from exc
        return PostgresStore(url, **options)
    if scheme in ("redis", "rediss"):
        try:
            from tether.stores._redis.store import RedisStore
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                f"{redact(url)!r} needs the Redis client, {install_hint('redis')} ({exc})"
            ) from exc
        return RedisStore(url, **options)
    if scheme in ("tether", "tethers"):
        try:
            from tether.stores._remote.store import RemoteStore
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigError(
                f"{redact(url)!r} needs the gRPC client, {install_hint('server')} ({exc})"
            ) from exc
        return RemoteStore(url, **options)
    if scheme == "memory":
        from tether.stores._memory.store import MemoryStore

        return MemoryStore(url, **options)
    raise ConfigError(
        f"unknown store URL {redact(url)!r}: use sqlite:///path.db, postgresql://host/db or "
        "redis://host:6379/0 (or memory://NAME for tests)"
    )


__all__ = ["DEFAULT_PATH", "DEFAULT_URL", "open_store"]
__all__ += _contract.__all__
