"""The call deadline on PostgreSQL (issue 18, H; tether.stores._deadline): a statement the
server does not answer in time is cut by the watchdog, the caller gets StoreUnavailable naming
the deadline, and the pool goes on with a fresh connection. The partition itself is tested in
tests/contract/test_partition.py; here the server is healthy but slow (``pg_sleep``), which
the watchdog cannot tell apart from a frozen one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tether._errors import ConfigError, StoreUnavailable
from tether.stores._postgres.store import PostgresStore


@pytest.mark.slow  # waits out a 1 s deadline
def test_a_statement_past_its_deadline_is_cut_and_the_pool_recovers(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    store = open_pg(deadline=1)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="1 s deadline"), \
            store._connector.connection() as conn:
        conn.execute("SELECT pg_sleep(30)")
    assert time.monotonic() - started < 15  # cut, not waited out (30 s)
    assert store.get_job(1) is None  # a fresh connection: the cut one was dropped
    assert store._connector.pool.stats()["pool_size"] == 1


def test_a_slow_migration_is_not_cut(open_pg: Callable[..., PostgresStore]) -> None:
    """Work that may rightly run long (VACUUM, migrations) opts out of the deadline."""
    store = open_pg(deadline=0.2)
    with store._connector.connection(bounded=False) as conn:
        conn.execute("SELECT pg_sleep(0.5)")
    with pytest.raises(StoreUnavailable), store._connector.connection() as conn:
        conn.execute("SELECT pg_sleep(5)")


def test_the_deadline_comes_from_the_url_or_the_option(pg_url: str) -> None:
    for url, options, expected in [(pg_url, {}, 5.0), (pg_url + "&deadline=2.5", {}, 2.5),
                                   (pg_url + "&deadline=2.5", {"deadline": 7}, 7.0)]:
        store = PostgresStore(url, **options)
        try:
            assert store._connector.deadline == expected
            assert "deadline" not in store._connector.dsn  # tether's, not libpq's
        finally:
            store.close()


def test_timeouts_written_in_the_url_are_kept(pg_url: str) -> None:
    """libpq's own connect_timeout / tcp_user_timeout in the URL win over the defaults tether
    derives from the deadline (psycopg lets keyword arguments override the URL)."""
    store = PostgresStore(pg_url + "&connect_timeout=7&tcp_user_timeout=9000&deadline=1")
    try:
        with store.transaction() as conn:
            libpq = {o.keyword: o.val for o in conn.pgconn.info}
        assert (libpq[b"tcp_user_timeout"], libpq[b"connect_timeout"]) == (b"9000", b"7")
        assert "connect_timeout" not in store._connector._kwargs
        assert store._connector._kwargs["keepalives_idle"] == 5  # not in the URL: tether's
    finally:
        store.close()
    chosen = PostgresStore(pg_url + "&connect_timeout=7", connect_timeout=3)
    try:
        assert chosen._connector._kwargs["connect_timeout"] == 3  # an explicit option wins
    finally:
        chosen.close()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf", "100000", ""])
def test_a_bad_deadline_is_one_config_error(pg_url: str, value: str) -> None:
    with pytest.raises(ConfigError, match="deadline") as caught:
        PostgresStore(f"{pg_url}&deadline={value}").close()
    assert "\n" not in str(caught.value)


@pytest.mark.slow
def test_only_the_call_past_its_deadline_is_cut(open_pg: Callable[..., PostgresStore]) -> None:
    """Calls on other connections, inside their deadline, run on untouched while the watchdog
    cuts the one that outlived its own (a shorter deadline than theirs, watched after them)."""
    quick, slow = open_pg(deadline=5, max_size=4), open_pg(deadline=0.3)
    errors: list[BaseException] = []

    def run_quick() -> None:
        try:
            for _ in range(10):
                with quick._connector.connection() as conn:
                    conn.execute("SELECT pg_sleep(0.05)")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run_quick) for _ in range(3)]
    for thread in threads:
        thread.start()
    with pytest.raises(StoreUnavailable, match=r"0\.3 s deadline"), \
            slow._connector.connection() as conn:
        conn.execute("SELECT pg_sleep(10)")
    for thread in threads:
        thread.join(30)
    assert not errors, errors
