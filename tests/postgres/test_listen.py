"""LISTEN/NOTIFY wake-ups: milliseconds, per queue, and surviving a dropped connection."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore


def _wait_in_thread(
    store: PostgresStore, queues: list[str], timeout: float
) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}
    ready = threading.Event()

    def run() -> None:
        store.wait_for_jobs(queues, 0.01)  # opens and LISTENs before we signal readiness
        ready.set()
        out["woken"] = store.wait_for_jobs(queues, timeout)
        out["at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(10)
    time.sleep(0.05)
    return thread, out


def test_enqueue_wakes_a_waiter_within_100ms(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    producer = open_pg()
    thread, out = _wait_in_thread(pg, ["mail"], 5.0)
    sent = time.monotonic()
    producer.enqueue([NewJob("t", queue="mail")])
    thread.join(5)
    assert out["woken"] is True
    assert out["at"] - sent < 0.1


def test_notify_wakes_and_other_queues_do_not(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    other = open_pg()
    thread, out = _wait_in_thread(pg, ["a"], 0.5)
    other.enqueue([NewJob("t", queue="b")])
    thread.join(5)
    assert out["woken"] is False
    # the notification for "b" was kept for a waiter on "b"
    assert pg.wait_for_jobs(["b"], 0.5) is True
    thread, out = _wait_in_thread(pg, ["a"], 5.0)
    sent = time.monotonic()
    other.notify(["a"])
    thread.join(5)
    assert out["woken"] is True
    assert out["at"] - sent < 0.1


def test_timeout_returns_false(pg: PostgresStore) -> None:
    pg.wait_for_jobs(["nothing"], 0.01)  # a thread's first wait may return at once (listen.py)
    started = time.monotonic()
    assert pg.wait_for_jobs(["nothing"], 0.2) is False
    assert 0.15 <= time.monotonic() - started < 1.0


def test_rolled_back_enqueue_does_not_notify(pg: PostgresStore) -> None:
    pg.wait_for_jobs(["tx"], 0.01)
    try:
        with pg.transaction() as conn:
            pg.enqueue([NewJob("t", queue="tx")], conn=conn)
            raise RuntimeError("abort")
    except RuntimeError:
        pass
    assert pg.wait_for_jobs(["tx"], 0.3) is False


def test_listener_reconnects_after_its_connection_is_killed(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore], admin: psycopg.Connection[Any]
) -> None:
    producer = open_pg()
    pg.wait_for_jobs(["r"], 0.01)  # opens the listening connection (may return at once)
    killed = admin.execute(  # its last statement: LISTEN, or taking the jobs key after it
        "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
        "WHERE application_name = %s AND (query LIKE 'LISTEN%%' "
        "OR query LIKE '%%pg_try_advisory_lock_shared%%')",
        (pg.application_name,),
    ).fetchone()
    assert killed == (1,)
    # the drop is noticed and reported as a (spurious) wake-up, never as a hang or crash
    started = time.monotonic()
    assert pg.wait_for_jobs(["r"], 2.0) is True
    assert time.monotonic() - started < 1.0
    thread, out = _wait_in_thread(pg, ["r"], 5.0)
    sent = time.monotonic()
    producer.enqueue([NewJob("t", queue="r")])
    thread.join(5)
    assert out["woken"] is True
    assert out["at"] - sent < 0.1
