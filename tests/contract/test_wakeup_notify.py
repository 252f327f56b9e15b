"""Wake-ups per queue: a notification for one queue wakes that queue's waiters only and is
kept for a waiter that comes later, an enqueue from another store wakes a waiter, and an
enqueue rolled back with the caller's transaction wakes nobody.

A waiter that is not woken sleeps to its timeout (``WAKE_WAIT``, long), so returning True well
before it proves the wake-up arrived; pokes repeat until the waiter returns (``wake_with``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.contract.helpers import WAKE_WAIT, lacks, settle, waiter_thread, wake_with
from tether.stores import NewJob, Store, transactional_enqueue


def test_enqueue_from_another_store_wakes_a_waiter(
    store: Store, open_another: Callable[[], Store]
) -> None:
    producer = open_another()
    woken, elapsed = wake_with(store, lambda: producer.enqueue([NewJob("t", queue="mail")]),
                               queues=["mail"])
    assert woken is True
    assert elapsed < WAKE_WAIT / 2


def test_a_notification_is_kept_for_its_own_queue(
    store: Store, open_another: Callable[[], Store], store_kind: str,
    request: pytest.FixtureRequest,
) -> None:
    lacks(request, store_kind,
          sqlite="notify is in-process per store object; SQLite waiters wake on commits, "
                 "whatever their queue",
          memory="any change to the data wakes every waiter, whatever its queue (a spurious "
                 "wake-up, which the contract allows)",
          redis="a wake-up is delivered to the waiters of that moment; a later wait does not "
                "see one that came before it began")
    other = open_another()
    thread, out = waiter_thread(store, ["a"], 0.5)
    other.enqueue([NewJob("t", queue="b")])
    thread.join(5)
    assert out["woken"] is False
    # the notification for "b" was kept for a waiter on "b"
    assert store.wait_for_jobs(["b"], 0.5) is True
    woken, elapsed = wake_with(store, lambda: other.notify(["a"]), queues=["a"])
    assert woken is True
    assert elapsed < WAKE_WAIT / 2


def test_timeout_returns_false(store: Store) -> None:
    settle(store, ["nothing"])  # a thread's first wait may return at once
    started = time.monotonic()
    assert store.wait_for_jobs(["nothing"], 0.2) is False
    assert 0.15 <= time.monotonic() - started < WAKE_WAIT / 2, "the timeout bounds the wait"


def test_rolled_back_enqueue_does_not_notify(
    store: Store, store_kind: str, request: pytest.FixtureRequest
) -> None:
    lacks(request, store_kind, **{
        kind: "no enqueue inside the caller's transaction (no transaction())"
        for kind in ("sqlite", "redis", "memory", "remote-sqlite", "remote-postgres",
                     "remote-redis")
    })
    settle(store, ["tx"])
    inside = transactional_enqueue(store)
    assert inside is not None, f"{store_kind} declares no enqueue inside a transaction"
    try:
        with inside.transaction() as conn:
            inside.enqueue([NewJob("t", queue="tx")], conn=conn)
            raise RuntimeError("abort")
    except RuntimeError:
        pass
    assert store.wait_for_jobs(["tx"], 0.3) is False
