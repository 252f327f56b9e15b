"""The pool recovers when the server kills its connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import pytest

from tests.faults import FaultProxy
from tether._errors import StoreUnavailable
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore

R = TypeVar("R")


def _kill_own(admin: psycopg.Connection[Any], store: PostgresStore) -> int:
    """Terminate only this store's backends, found by its unique application_name."""
    row = admin.execute(
        "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
        "WHERE application_name = %s",
        (store.application_name,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _at_most_one_retry(call: Callable[[], R]) -> R:
    try:
        return call()
    except StoreUnavailable:
        return call()


def test_calls_succeed_after_all_connections_are_terminated(
    open_pg: Callable[..., PostgresStore], admin: psycopg.Connection[Any]
) -> None:
    store = open_pg(min_size=2, max_size=4)
    store.migrate()
    store.wait_for_jobs(["default"], 0.01)
    store.enqueue([NewJob("t")])
    assert _kill_own(admin, store) >= 2
    ids = _at_most_one_retry(lambda: store.enqueue([NewJob("t")]))
    assert len(ids) == 1
    assert len(_at_most_one_retry(lambda: store.claim("w", ["default"], 10, 30))) == 2
    for _ in range(3):
        assert _kill_own(admin, store) >= 1
        assert _at_most_one_retry(store.now) > 0


def test_errors_are_store_unavailable_with_cause(
    open_pg: Callable[..., PostgresStore], admin: psycopg.Connection[Any]
) -> None:
    store = open_pg(min_size=1, max_size=1, timeout=0.5)
    store.migrate()
    with store.transaction() as conn:
        # the only pooled connection is busy: the next call times out waiting for it
        with pytest.raises(StoreUnavailable) as caught:
            store.now()
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
        conn.execute("SELECT 1")
    assert store.now() > 0


# -- outages through the fault proxy (issue #8, B) ----------------------------------------------
def _through(proxy: FaultProxy, url: str, **options: Any) -> PostgresStore:
    return PostgresStore(proxy.url(url), **options)


def _wait_until(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.mark.slow
def test_wait_for_jobs_never_raises_during_an_outage(
    pg: PostgresStore, fault_proxy: Callable[[str], FaultProxy]
) -> None:
    proxy = fault_proxy("postgres")
    store = _through(proxy, pg.url)
    try:
        store.wait_for_jobs(["q"], 0.05)  # LISTENing (a thread's first wait may end at once)
        assert store.wait_for_jobs(["q"], 0.05) is False
        proxy.refuse(3.0)
        while proxy.refusing:
            assert store.wait_for_jobs(["q"], 0.2) in (True, False)
        # Back: a job enqueued now wakes the waiter again.
        _wait_until(lambda: store.wait_for_jobs(["q"], 0.2) is False, 5.0)
        woken: list[bool] = []
        warm = threading.Event()

        def wait() -> None:
            store.wait_for_jobs(["q"], 0.01)  # this thread's first wait may end at once
            warm.set()
            woken.append(store.wait_for_jobs(["q"], 5))

        waiter = threading.Thread(target=wait)
        waiter.start()
        assert warm.wait(5)
        time.sleep(0.1)
        pg.enqueue([NewJob("t", queue="q")])
        waiter.join(10)
        assert woken == [True]
    finally:
        store.close()


@pytest.mark.slow
def test_a_waiter_wakes_within_a_second_of_the_servers_return(
    pg: PostgresStore, fault_proxy: Callable[[str], FaultProxy]
) -> None:
    """Notifications sent while the listener was down are lost, so its reconnection is itself
    a wake-up: an idle worker claims again within ~1 s of the server's return, whatever the
    length of the outage."""
    proxy = fault_proxy("postgres")
    store = _through(proxy, pg.url)
    try:
        store.wait_for_jobs(["q"], 0.05)
        proxy.refuse(4.0)
        back_at: list[float] = []
        woke_at: list[float] = []

        def wait() -> None:
            while not back_at or not woke_at:
                if store.wait_for_jobs(["q"], 30.0) and back_at:
                    woke_at.append(time.monotonic())

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        _wait_until(lambda: not proxy.refusing, 10.0)
        back_at.append(time.monotonic())
        waiter.join(15)
        assert woke_at, "the waiter never woke"
        assert woke_at[0] - back_at[0] < 1.0
    finally:
        store.close()


@pytest.mark.slow
def test_the_pool_is_usable_at_once_when_the_server_returns(
    pg: PostgresStore, fault_proxy: Callable[[str], FaultProxy]
) -> None:
    """No reconnect backoff between the server's return and the next call: the first call
    after the outage succeeds (the pool's own backoff used to leave it waiting seconds)."""
    proxy = fault_proxy("postgres")
    store = _through(proxy, pg.url, min_size=2, max_size=4, timeout=1.0)
    try:
        assert store.now() > 0
        proxy.refuse(5.0)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.now()
        # refused connections fail at once, not after the pool's wait
        assert time.monotonic() - started < 1.0
        while proxy.refusing:
            with pytest.raises(StoreUnavailable):
                store.enqueue([NewJob("t")])
            time.sleep(0.2)
        assert store.now() > 0
        assert len(store.enqueue([NewJob("t")])) == 1
        assert store.claim("w", ["default"], 1, 30) != []
    finally:
        store.close()
