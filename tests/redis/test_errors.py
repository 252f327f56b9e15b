"""Errors (issue #8, B/A): no raw redis-py (or encoding) exception ever leaves the store.

Transient server states (a read-only replica after failover, a master link down, loading)
are ``StoreUnavailable``, so callers back off and retry; everything else (a script error on
corrupted data, text no driver can encode) is ``StoreError`` with a one-line message.
"""

from __future__ import annotations

import pytest
import redis

from tests.throwaway.redis import ThrowawayRedis
from tether._errors import StoreError, StoreUnavailable
from tether.stores import Lease, NewJob, Outcome, WorkerInfo
from tether.stores._redis.store import RedisStore


def test_text_no_driver_can_encode_is_a_store_error_not_a_unicode_error(
    rstore: RedisStore,
) -> None:
    calls = [
        lambda: rstore.claim("w", ["q\udcff"], 1, 30),
        lambda: rstore.heartbeat("w\udcff", [], 30),
        lambda: rstore.leader_acquire("reaper\udcff", "h", 30),
        lambda: rstore.register_worker(WorkerInfo("w\udcff", "h", 1, ("q",), 1)),
        lambda: rstore.finish([Outcome(Lease(1, 1, "w\udcff", "t"), "released")]),
    ]
    for call in calls:
        with pytest.raises(StoreError) as info:
            call()
        assert not isinstance(info.value, StoreUnavailable), "a permanent error is not transient"
        assert "\n" not in str(info.value)


def test_a_script_error_on_corrupted_data_is_a_one_line_store_error(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    (job_id,) = rstore.enqueue([NewJob("t", queue="corrupt")])
    raw.hset(f"{prefix}:job:{job_id}", "attempt", "not-a-number")
    with pytest.raises(StoreError) as info:
        rstore.claim("w", ["corrupt"], 1, 30)
    assert not isinstance(info.value, StoreUnavailable)
    assert "\n" not in str(info.value)


def test_a_read_only_replica_is_store_unavailable(server: ThrowawayRedis) -> None:
    store = RedisStore(f"{server.url}?prefix=ro")
    admin = server.client()
    try:
        store.migrate()
        store.enqueue([NewJob("t")])
        # After a failover a client can be left on a replica: writes fail with READONLY.
        admin.execute_command("REPLICAOF", "127.0.0.1", "1")
        admin.config_set("replica-serve-stale-data", "yes")
        for call in (
            lambda: store.enqueue([NewJob("t")]),
            lambda: store.claim("w", ["default"], 1, 30),
            lambda: store.leader_acquire("reaper", "h", 30),
        ):
            with pytest.raises(StoreUnavailable, match=r"(?i)READONLY|read only"):
                call()
        # A replica that will not serve stale data refuses reads too: MASTERDOWN.
        admin.config_set("replica-serve-stale-data", "no")
        with pytest.raises(StoreUnavailable, match=r"(?i)master"):
            store.get_job(1)
        admin.execute_command("REPLICAOF", "NO", "ONE")
        assert len(store.claim("w", ["default"], 1, 30)) == 1
    finally:
        admin.close()
        store.close()
