"""The pool recovers when the server kills its connections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import pytest

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
