"""wait_for_jobs through pub/sub: wake-ups arrive in milliseconds, only for the right queues."""

from __future__ import annotations

import threading
import time

from tether.stores import NewJob, Outcome
from tether.stores._redis.store import RedisStore

Result = dict[str, float | bool]


def _waiter(
    store: RedisStore, queues: list[str], timeout: float
) -> tuple[threading.Thread, Result]:
    out: Result = {}

    def run() -> None:
        out["woken"] = store.wait_for_jobs(queues, timeout)
        out["at"] = time.perf_counter()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _settle(store: RedisStore) -> None:
    # the first wait subscribes; after that the listener is live
    store.wait_for_jobs(["-"], 0.01)


def test_enqueue_wakes_a_waiter_within_100ms(redis_url: str, rstore: RedisStore) -> None:
    producer = RedisStore(redis_url)
    try:
        _settle(rstore)
        latencies = []
        for _ in range(5):
            thread, out = _waiter(rstore, ["mail", "default"], 5.0)
            time.sleep(0.05)
            sent = time.perf_counter()
            producer.enqueue([NewJob("t", queue="mail")])
            thread.join(5.0)
            assert out["woken"] is True
            latencies.append(float(out["at"]) - sent)
        assert max(latencies) < 0.1, latencies
    finally:
        producer.close()


def test_notify_wakes_and_other_queues_do_not(rstore: RedisStore, redis_url: str) -> None:
    other = RedisStore(redis_url)
    try:
        _settle(rstore)
        thread, out = _waiter(rstore, ["a"], 0.5)
        time.sleep(0.05)
        other.notify(["b"])
        other.enqueue([NewJob("t", queue="c")])
        thread.join(5.0)
        assert out["woken"] is False

        thread, out = _waiter(rstore, ["a"], 5.0)
        time.sleep(0.05)
        sent = time.perf_counter()
        other.notify(["b", "a"])
        thread.join(5.0)
        assert out["woken"] is True
        assert float(out["at"]) - sent < 0.1
    finally:
        other.close()


def test_release_and_reap_wake_waiters(rstore: RedisStore) -> None:
    t0 = rstore.now()
    rstore.enqueue([NewJob("t", queue="r")], now=t0)
    (job,) = rstore.claim("w", ["r"], 1, 10, now=t0)
    _settle(rstore)

    thread, out = _waiter(rstore, ["r"], 5.0)
    time.sleep(0.05)
    rstore.reap_expired(now=t0 + 11)
    thread.join(5.0)
    assert out["woken"] is True

    (job,) = rstore.claim("w", ["r"], 1, 10, now=t0 + 11)
    thread, out = _waiter(rstore, ["r"], 5.0)
    time.sleep(0.05)
    rstore.finish([Outcome(job.lease, "released")], now=t0 + 12)
    thread.join(5.0)
    assert out["woken"] is True


def test_timeout_returns_false(rstore: RedisStore) -> None:
    start = time.perf_counter()
    assert rstore.wait_for_jobs(["nothing"], 0.2) is False
    assert 0.15 < time.perf_counter() - start < 2.0
    assert rstore.wait_for_jobs(["nothing"], 0) is False


def test_many_threads_wait_at_once(rstore: RedisStore) -> None:
    _settle(rstore)
    waiters = [_waiter(rstore, ["x"], 5.0) for _ in range(10)]
    time.sleep(0.05)
    rstore.notify(["x"])
    for thread, out in waiters:
        thread.join(5.0)
        assert out["woken"] is True
