"""The schema of the Redis store (the :class:`~tether.stores._contract.Lifecycle` role, with
``info``): a version key, created by ``migrate`` with the epoch and incident record of
``observe.lua`` (``watch.py``), and checked against :data:`SCHEMA_VERSION`.

Redis has no tables: every other key is made by the script that first writes it, so there is
nothing else to create or upgrade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether._errors import SchemaError
from tether.stores._contract import StoreInfo
from tether.stores._redis.connection import io

SCHEMA_VERSION = 1


class RedisSchema:
    """The :class:`~tether.stores._contract.Lifecycle` role of :class:`RedisStore`: migrate,
    check_schema, and info."""

    kind: str
    prefix: str
    _url: str
    _client: Any

    if TYPE_CHECKING:  # RedisStore's
        def _key(self, *parts: str) -> str: ...

        def _observe(self, *, create: bool = False) -> None: ...

    def migrate(self) -> int:
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
        version = self._schema_version()
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"redis prefix {self.prefix!r} has schema version {version}, this tether "
                f"knows up to {SCHEMA_VERSION}: upgrade tether"
            )

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
            "restarts_seen": str(incidents.get("restarts_seen", "0")),
            "data_loss": str(incidents.get("data_loss", "0")),
        }
        for field in ("last_restart_at", "last_data_loss_at"):
            if field in incidents:
                extra[field] = str(incidents[field])
        return StoreInfo(self.kind, self._url, int(raw) if raw else 0, extra)


__all__ = ["SCHEMA_VERSION", "RedisSchema"]
