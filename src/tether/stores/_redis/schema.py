"""The schema of the Redis store (the :class:`~tether.stores._contract.Lifecycle` role, with
``info``): a version key, created by ``migrate`` with the epoch and incident record of
``observe.lua`` (``watch.py``), and checked against :data:`SCHEMA_VERSION`.

Redis has no tables: every other key is made by the script that first writes it, so there is
nothing else to create or upgrade.

Opening checks the server's ``maxmemory-policy`` too (``migrate`` and ``check_schema``, which
every worker, producer and ``tether migrate`` go through): any policy but ``noeviction`` lets
Redis delete tether's keys when memory runs short (a job hash, ``schema_version``, the epoch),
which loses jobs and used to wedge the queue; so it is a :class:`ConfigError` unless the URL
says ``allow_eviction=1``. A server that will not tell (INFO refused) gets a WARNING.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from tether._errors import ConfigError, SchemaError
from tether.stores._contract import StoreInfo
from tether.stores._redis.connection import io
from tether.stores._redis.memory import usage

SCHEMA_VERSION = 1
log = logging.getLogger("tether.store.redis")

#: (server, what) already warned about by this process: a worker opens several stores.
_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(server: str, what: str, message: str) -> None:
    with _warned_lock:
        if (server, what) in _warned:
            return
        _warned.add((server, what))
    log.warning("%s", message)


class RedisSchema:
    """The :class:`~tether.stores._contract.Lifecycle` role of :class:`RedisStore`: migrate,
    check_schema, and info."""

    kind: str
    prefix: str
    _url: str
    _client: Any
    _allow_eviction: bool
    _policy_checked: bool = False

    if TYPE_CHECKING:  # RedisStore's
        def _key(self, *parts: str) -> str: ...

        def _observe(self, *, create: bool = False) -> None: ...

    def migrate(self) -> int:
        self._check_policy()
        self._observe(create=True)  # detects a loss first, then creates what is missing
        self.check_schema()
        return self._schema_version()

    def _schema_version(self) -> int:
        with io():
            raw = self._client.get(self._key("schema_version"))
        if raw is None:
            raise SchemaError(f"no tether data under prefix {self.prefix!r}: run migrate first")
        try:
            return int(raw)
        except ValueError as exc:
            raise SchemaError(f"bad schema version {raw!r} under {self.prefix!r}") from exc

    def check_schema(self) -> None:
        self._check_policy()
        version = self._schema_version()
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"redis prefix {self.prefix!r} has schema version {version}, this tether "
                f"knows up to {SCHEMA_VERSION}: upgrade tether"
            )

    def _check_policy(self) -> None:
        """Refuse an evicting maxmemory-policy (see the module docstring), once per store."""
        if self._policy_checked:
            return
        with io():
            seen = usage(self._client)
        policy = "?" if seen is None else seen[2]
        if policy == "?":
            _warn_once(self._url, "unchecked", (
                f"redis {self._url}: could not check maxmemory-policy (INFO memory is not "
                "permitted): make sure it is noeviction, or Redis may evict tether's jobs "
                "(docs/deploying.md)"))
        elif policy != "noeviction":
            text = (f"redis {self._url}: maxmemory-policy is {policy}, which lets Redis evict "
                    "tether's keys (jobs, schema_version, epoch): set maxmemory-policy "
                    "noeviction (docs/deploying.md), or add allow_eviction=1 to the URL to run "
                    "anyway")
            if not self._allow_eviction:
                raise ConfigError(text)
            _warn_once(self._url, "evicting", f"{text}; allow_eviction=1: running anyway")
        self._policy_checked = True

    def info(self) -> StoreInfo:
        with io():
            pipe = self._client.pipeline(transaction=False)
            pipe.info("server")
            pipe.info("persistence")
            pipe.info("memory")
            pipe.get(self._key("schema_version"))
            pipe.hgetall(self._key("incidents"))
            server, persistence, memory, raw, incidents = pipe.execute()
        extra = {
            "prefix": self.prefix,
            "redis_version": str(server.get("redis_version", "?")),
            "run_id": str(server.get("run_id", "?")),
            "aof_enabled": str(persistence.get("aof_enabled", "?")),
            "maxmemory_policy": str(memory.get("maxmemory_policy", "?")),
            "used_memory": str(memory.get("used_memory", "?")),
            "maxmemory": str(memory.get("maxmemory", "?")),
            "missing_jobs": str(incidents.get("missing_jobs", "0")),
            "restarts_seen": str(incidents.get("restarts_seen", "0")),
            "data_loss": str(incidents.get("data_loss", "0")),
        }
        for field in ("last_restart_at", "last_data_loss_at"):
            if field in incidents:
                extra[field] = str(incidents[field])
        return StoreInfo(self.kind, self._url, int(raw) if raw else 0, extra)


__all__ = ["SCHEMA_VERSION", "RedisSchema"]
