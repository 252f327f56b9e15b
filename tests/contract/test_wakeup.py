"""wait_for_jobs / notify: bounded waits, and waking up early on notify or enqueue.

These use real (monotonic) time because waiting is the behaviour under test; no store time
is involved. Spurious wake-ups are allowed, so no test asserts that a wait is *not* woken.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.contract.helpers import WAKE_WAIT, lacks, wake_with
from tether.stores import NewJob, Store

WAIT = WAKE_WAIT  # a waiter woken early returns long before this


def _wake_with(waiter: Store, poke: Callable[[], None]) -> tuple[bool, float]:
    return wake_with(waiter, poke, wait=WAIT)


def test_wait_times_out(store: Store) -> None:
    started = time.monotonic()
    woken = store.wait_for_jobs(["default"], 0.3)
    elapsed = time.monotonic() - started
    assert isinstance(woken, bool)
    assert elapsed < 5.0, "the timeout bounds the wait"
    if not woken:
        assert elapsed >= 0.2, "a wait that was not woken lasts about the timeout"


def test_zero_timeout_returns_at_once(store: Store) -> None:
    started = time.monotonic()
    store.wait_for_jobs(["default"], 0.0)
    assert time.monotonic() - started < 2.0


def test_notify_wakes_a_waiter_on_the_same_store(store: Store) -> None:
    woken, elapsed = _wake_with(store, lambda: store.notify(["default"]))
    assert woken is True
    assert elapsed < WAIT / 2


@pytest.mark.slow
def test_notify_wakes_a_waiter_on_another_connection(
    store: Store,
    open_another: Callable[[], Store],
    store_kind: str,
    request: pytest.FixtureRequest,
) -> None:
    lacks(
        request,
        store_kind,
        sqlite="notify is in-process per store object; SQLite waiters wake on commits",
        # Through a server every client's notify reaches the one SQLite store object.
        **{"remote-sqlite": ""},
    )
    waiter = open_another()
    woken, elapsed = _wake_with(waiter, lambda: store.notify(["default"]))
    assert woken is True
    assert elapsed < WAIT / 2


def test_enqueue_wakes_a_waiter_on_another_connection(
    store: Store, open_another: Callable[[], Store]
) -> None:
    waiter = open_another()
    woken, elapsed = _wake_with(waiter, lambda: store.enqueue([NewJob("t")]))
    assert woken is True
    assert elapsed < WAIT / 2


def test_reap_wakes_a_waiter_on_another_connection(
    store: Store, open_another: Callable[[], Store]
) -> None:
    """A job the reaper hands back must reach idle workers at once, not at their next poll."""
    t0 = store.now()
    jobs = 60
    store.enqueue([NewJob("t") for _ in range(jobs)], now=t0)
    store.claim("dead-worker", ["default"], jobs, 1.0, now=t0)
    waiter = open_another()
    later = iter(range(1, jobs + 1))

    def reap_one() -> None:
        # One expired lease per poke: a poke before the waiter subscribed may be missed.
        store.reap_expired(0.0, now=t0 + 10 + next(later, jobs), limit=1)

    woken, elapsed = _wake_with(waiter, reap_one)
    assert woken is True
    assert elapsed < WAIT / 2


def test_a_wake_up_between_an_empty_claim_and_the_wait_is_not_lost(
    store: Store, open_another: Callable[[], Store]
) -> None:
    """The fetcher's loop is: claim (nothing due), then wait. A job enqueued while the empty
    claim's reply is on its way back must end the following wait at once, not after the
    whole poll interval (issue #8, H: Redis lost it, SQLite and PostgreSQL did not)."""
    producer = open_another()
    store.wait_for_jobs(["default"], 0.05)  # the waiter's listener is up
    assert store.claim("w1", ["default"], 1, 30.0) == []
    producer.enqueue([NewJob("t")])
    time.sleep(0.3)  # the wake-up was delivered before the wait below begins
    started = time.monotonic()
    woken = store.wait_for_jobs(["default"], WAIT)
    assert woken is True, "the wake-up that came between the claim and the wait was lost"
    assert time.monotonic() - started < WAIT / 2
