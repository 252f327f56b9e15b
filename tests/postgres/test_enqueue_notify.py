"""The enqueue's NOTIFY gate (issue #10): an enqueue wakes idle workers at once, and skips its
NOTIFY (a cluster-wide lock at commit) when no worker waits.

A process whose workers wait holds the shared advisory lock on the store's jobs key on its
listening connection (listen.py); an enqueue that can take it exclusively skips the NOTIFY.
Every check reads real notifications from a real server; the absence of one is read against a
marker NOTIFY sent after the enqueue (notifications arrive in commit order), not by waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import tether
from tests.servers import PG_DSN
from tests.worker.helpers import wait_until
from tether.stores import NewJob
from tether.stores._postgres.store import PostgresStore

MARK = "--marker--"


def _payloads_until_marker(listener: psycopg.Connection[Any], channel: str) -> list[str]:
    """Payloads on ``channel`` delivered before a marker sent now (commit order)."""
    listener.execute("SELECT pg_notify(%s, %s)", (channel, MARK))
    seen: list[str] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for note in listener.notifies(timeout=1.0):
            if note.payload == MARK:
                return seen
            seen.append(note.payload)
    raise AssertionError(f"the marker never arrived (saw {seen})")


def test_an_enqueue_skips_its_notify_when_no_worker_waits(pg: PostgresStore) -> None:
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.channel}"')  # listening, but not holding the jobs key
        pg.enqueue([NewJob("t")])
        pg.enqueue([NewJob("t", queue="a"), NewJob("t", queue="b")])
        assert _payloads_until_marker(listener, pg.channel) == []


def test_an_enqueue_notifies_while_a_worker_waits(pg: PostgresStore) -> None:
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.channel}"')
        listener.execute("SELECT pg_advisory_lock_shared(%s)", (pg._connector.jobs_key,))
        pg.enqueue([NewJob("t")])
        pg.enqueue([NewJob("t", queue="a"), NewJob("t", queue="b")])
        assert sorted(_payloads_until_marker(listener, pg.channel)) == ["a", "b", "default"]


def test_an_enqueue_inside_the_callers_transaction_always_notifies(pg: PostgresStore) -> None:
    """conn=: the jobs key is never taken there (it would be held until the caller commits)."""
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.channel}"')
        with pg.transaction() as conn:
            pg.enqueue([NewJob("t", queue="tx")], conn=conn)
        assert _payloads_until_marker(listener, pg.channel) == ["tx"]


def test_an_idle_store_waiter_is_woken_at_once(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    """The waiting side through the store: once waiting (its key held), an enqueue from
    another process's store wakes it long before its timeout."""
    producer = open_pg()
    while pg.wait_for_jobs(["q"], 0.2):  # the first waits return True: the key was taken
        pass
    assert pg._listener._jobs_held
    woken: list[float] = []

    def wait() -> None:
        if pg.wait_for_jobs(["q"], 30.0):
            woken.append(time.monotonic())

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(0.3)
    sent = time.monotonic()
    producer.enqueue([NewJob("t", queue="q")])
    waiter.join(30)
    assert woken and woken[0] - sent < 5, "the enqueue did not wake the waiter"


def test_a_wait_after_a_skipped_notify_returns_at_once(
    pg: PostgresStore, open_pg: Callable[..., PostgresStore]
) -> None:
    """The race the gate must not lose: a worker claims (empty), a job is enqueued before
    its listener holds the key (no NOTIFY), then it waits. The wait must end as soon as the key
    is taken (so the worker claims again), not at its timeout."""
    producer = open_pg()
    assert pg.claim("w", ["r"], 1, 30) == []
    producer.enqueue([NewJob("t", queue="r")])
    started = time.monotonic()
    assert pg.wait_for_jobs(["r"], 30.0) is True
    assert time.monotonic() - started < 5
    assert len(pg.claim("w", ["r"], 1, 30)) == 1


def test_the_key_is_given_up_after_the_linger(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker busy for longer than JOBS_LINGER lets enqueues skip NOTIFY again."""
    from tether.stores._postgres import listen

    monkeypatch.setattr(listen, "JOBS_LINGER", 0.2)
    while pg.wait_for_jobs(["q"], 0.1):
        pass
    assert pg._listener._jobs_held
    wait_until(lambda: not pg._listener._jobs_held, 10)
    with psycopg.connect(PG_DSN, autocommit=True) as listener:
        listener.execute(f'LISTEN "{pg.channel}"')
        pg.enqueue([NewJob("t")])
        assert _payloads_until_marker(listener, pg.channel) == []


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_an_idle_worker_is_woken_at_once_by_an_enqueue(pg_url: str) -> None:
    """A real worker, idle with a 30 s poll: a job enqueued from another App starts within a
    few seconds, so only the NOTIFY can have woken it."""
    started: list[float] = []
    app = tether.App(pg_url, poll_interval=30.0)

    @app.task(name="t.mark")
    def mark() -> None:
        started.append(time.monotonic())

    producer = tether.App(pg_url)
    worker = app.worker(concurrency=2, maintenance=False)
    thread = threading.Thread(target=lambda: worker.run(install_signals=False), daemon=True)
    thread.start()
    try:
        listener = worker.store._listener  # type: ignore[attr-defined]
        wait_until(lambda: listener._jobs_held and listener._jobs_waiting > 0, 10)
        for _ in range(3):
            sent = time.monotonic()
            before = len(started)
            producer.enqueue("t.mark")
            wait_until(lambda b=before: len(started) > b, 20)  # type: ignore[misc]
            assert started[-1] - sent < 5, f"picked up after {started[-1] - sent:.1f}s"
    finally:
        worker.stop(force=True)
        thread.join(20)
        producer.close()
        app.close()
