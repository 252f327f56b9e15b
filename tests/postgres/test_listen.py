"""The LISTEN connection survives the server killing it (pg_terminate_backend): the drop is
reported as a spurious wake-up, and wake-ups arrive again on the new connection.

The other wake-up tests run on every store in tests/contract/test_wakeup*.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

from tests.contract.helpers import WAKE_WAIT, waiter_thread
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore


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
    assert pg.wait_for_jobs(["r"], WAKE_WAIT) is True
    assert time.monotonic() - started < WAKE_WAIT / 2
    thread, out = waiter_thread(pg, ["r"], WAKE_WAIT)
    sent = time.monotonic()
    producer.enqueue([NewJob("t", queue="r")])
    thread.join(WAKE_WAIT + 5)
    assert out["woken"] is True
    assert out["at"] - sent < WAKE_WAIT / 2
