"""wait_for_jobs: an enqueue, notify, reap or release wakes the waiters of its queue at once,
only those, and every one of many waiting threads.

A waiter that is not woken sleeps to its timeout (``WAKE_WAIT``, long), so returning True well
before it proves the wake-up arrived; no test bounds the latency in milliseconds, which a
loaded machine running the suite in parallel cannot promise. Pokes repeat until the waiter
returns (``wake_with``): one sent before the waiter was waiting may be missed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests.contract.helpers import WAKE_WAIT, lacks, settle, wake_with
from tether.stores import NewJob, Outcome, Store

Result = dict[str, float | bool]


def _waiter(
    store: Store, queues: list[str], timeout: float
) -> tuple[threading.Thread, Result]:
    """A thread that settles (its first wait may end at once), then waits once."""
    out: Result = {}
    settled = threading.Event()

    def run() -> None:
        settle(store, queues)
        settled.set()
        out["woken"] = store.wait_for_jobs(queues, timeout)
        out["at"] = time.perf_counter()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert settled.wait(10), "the waiter never settled"
    return thread, out


def test_enqueue_wakes_a_waiter_at_once(
    store: Store, open_another: Callable[[], Store]
) -> None:
    producer = open_another()
    for _ in range(5):
        woken, elapsed = wake_with(store, lambda: producer.enqueue([NewJob("t", queue="mail")]),
                                   queues=["mail", "default"])
        assert woken is True
        assert elapsed < WAKE_WAIT / 2, elapsed


def test_notify_wakes_and_other_queues_do_not(
    store: Store, open_another: Callable[[], Store], store_kind: str,
    request: pytest.FixtureRequest,
) -> None:
    lacks(request, store_kind,
          sqlite="notify is in-process per store object; SQLite waiters wake on commits, "
                 "whatever their queue",
          memory="any change to the data wakes every waiter, whatever its queue (a spurious "
                 "wake-up, which the contract allows)")
    other = open_another()
    thread, out = _waiter(store, ["a"], 0.5)
    time.sleep(0.05)
    other.notify(["b"])
    other.enqueue([NewJob("t", queue="c")])
    thread.join(5.0)
    assert out["woken"] is False

    woken, elapsed = wake_with(store, lambda: other.notify(["b", "a"]), queues=["a"])
    assert woken is True
    assert elapsed < WAKE_WAIT / 2


def test_reap_wakes_waiters(store: Store) -> None:
    t0 = store.now()
    jobs = 60
    store.enqueue([NewJob("t", queue="r") for _ in range(jobs)], now=t0)
    store.claim("w", ["r"], jobs, 10, now=t0)
    later = iter(range(1, jobs + 1))

    def reap_one() -> None:
        # One expired lease per poke: a poke before the waiter was waiting may be missed.
        store.reap_expired(now=t0 + 10 + next(later, jobs), limit=1)

    woken, _ = wake_with(store, reap_one, queues=["r"])
    assert woken is True


@pytest.mark.slow  # PostgreSQL's xfail sleeps its whole wait
def test_release_wakes_waiters(
    store: Store, store_kind: str, request: pytest.FixtureRequest
) -> None:
    lacks(request, store_kind, postgres="a released job goes back to pending without a "
          "NOTIFY on the jobs channel: idle workers find it at their next poll")
    t0 = store.now()
    jobs = 60
    store.enqueue([NewJob("t", queue="r") for _ in range(jobs)], now=t0)
    claimed = iter(store.claim("w", ["r"], jobs, 10, now=t0))

    def release_one() -> None:
        job = next(claimed, None)
        if job is not None:
            store.finish([Outcome(job.lease, "released")], now=t0 + 1)

    woken, _ = wake_with(store, release_one, queues=["r"])
    assert woken is True


def test_timeout_returns_false(store: Store) -> None:
    settle(store, ["nothing"])  # (a thread's first wait may end at once)
    start = time.perf_counter()
    assert store.wait_for_jobs(["nothing"], 0.2) is False
    assert 0.15 < time.perf_counter() - start < WAKE_WAIT / 2, "the timeout bounds the wait"
    assert store.wait_for_jobs(["nothing"], 0) is False


def test_many_threads_wait_at_once(store: Store) -> None:
    waiters = [_waiter(store, ["x"], WAKE_WAIT) for _ in range(10)]
    started = time.monotonic()
    while any(t.is_alive() for t, _ in waiters) and time.monotonic() - started < WAKE_WAIT:
        store.notify(["x"])  # until every waiter returned: one may not be waiting yet
        time.sleep(0.05)
    for thread, out in waiters:
        thread.join(5.0)
        assert out["woken"] is True
    assert time.monotonic() - started < WAKE_WAIT / 2
