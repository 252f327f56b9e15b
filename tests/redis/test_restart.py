"""A private redis-server that the test stops and restarts: errors are StoreUnavailable while
it is down, and afterwards the store reconnects, reloads its scripts (NOSCRIPT) and wakes
waiters again. The server is this test's own process (tests/throwaway/redis.py), on a free
loopback port, with an append-only file fsynced on every write: the jobs survive its SIGKILL."""

from __future__ import annotations

import time

import pytest

from tests.contract.helpers import WAKE_WAIT, wake_with
from tests.throwaway.redis import ThrowawayRedis
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Outcome
from tether.stores._redis.store import RedisStore


def test_store_survives_a_server_restart(server_aof: ThrowawayRedis) -> None:
    store = RedisStore(f"{server_aof.url}?prefix=r", socket_timeout=2.0)
    try:
        store.migrate()
        t0 = store.now()
        ids = store.enqueue([NewJob("t"), NewJob("u")], now=t0)
        (first,) = store.claim("w", ["default"], 1, 30, now=t0)
        store.wait_for_jobs(["-"], 0.05)  # may wake at once: the claim came before subscribing
        assert store.wait_for_jobs(["-"], 0.05) is False  # the listener is subscribed

        server_aof.stop()
        with pytest.raises(StoreUnavailable):
            store.claim("w", ["default"], 1, 30, now=t0)
        with pytest.raises(StoreUnavailable):
            store.finish([Outcome(first.lease, "done")], now=t0)

        server_aof.start()  # AOF (fsync always) brings the jobs back; the script cache is empty
        deadline = time.monotonic() + 10
        while True:
            try:
                (second,) = store.claim("w", ["default"], 1, 30, now=t0)
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store never reconnected"
                time.sleep(0.05)
        assert {first.id, second.id} == set(ids)
        assert store.finish([Outcome(first.lease, "done", result="1")], now=t0 + 1) == []

        # wake-ups work again once the listener has resubscribed (spurious ones allowed)
        deadline = time.monotonic() + 10
        while store.wait_for_jobs(["q"], 0.05):
            assert time.monotonic() < deadline
        # Poked until it returns (one enqueue before it was waiting may be missed); woken,
        # it returns long before its WAKE_WAIT timeout, which it would sleep out otherwise.
        woken, elapsed = wake_with(store, lambda: store.enqueue([NewJob("t", queue="q")]),
                                   queues=["q"])
        assert woken is True
        assert elapsed < WAKE_WAIT / 2
    finally:
        store.close()
