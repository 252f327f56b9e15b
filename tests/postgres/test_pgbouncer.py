"""The PostgreSQL store behind a real PgBouncer (issue 18, A), in-process.

Transaction pooling: many stores sharing a few server connections run claims, finishes and
reads without one error (before ``pooler=transaction``: ``prepared statement "_pg3_0" already
exists``); migrations run through it; wake-ups reach waiters either by LISTEN on the
``direct=`` connection or by polling, and the mode is logged once. Session pooling keeps
LISTEN/NOTIFY. The 300-job run with worker subprocesses is tests/crash/test_pgbouncer.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.contract.helpers import WAKE_WAIT, must_get, waiter_thread
from tests.crash.harness import wait_for
from tests.pg_template import clone_for_url
from tests.throwaway.pgbouncer import Bouncer, pgbouncer
from tether._errors import ConfigError, StoreError
from tether.stores import FlowLimit, NewJob
from tether.stores._postgres.flow import lock_key
from tether.stores._postgres.schema import latest_version
from tether.stores._postgres.store import PostgresStore
from tether.stores._records import Outcome

DIRECT = "&direct=127.0.0.1:5432"


@pytest.fixture(scope="module")
def tx_bouncer() -> Iterator[Bouncer]:
    """PgBouncer in transaction pooling with 3 server connections (clients share them)."""
    with pgbouncer("transaction", pool_size=3) as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def session_bouncer() -> Iterator[Bouncer]:
    with pgbouncer("session", pool_size=5) as bouncer:
        yield bouncer


@pytest.fixture
def opened() -> Iterator[list[PostgresStore]]:
    stores: list[PostgresStore] = []
    yield stores
    for store in stores:
        store.close()


def _open(opened: list[PostgresStore], url: str) -> PostgresStore:
    store = PostgresStore(url)
    opened.append(store)
    return store


def test_many_clients_share_a_transaction_pooler_without_errors(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore]
) -> None:
    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + "&pooler=transaction"
    producer = _open(opened, url)
    ids = producer.enqueue([NewJob("t", queue="q") for _ in range(240)])
    errors: list[BaseException] = []
    done: list[int] = []

    def work(n: int) -> None:
        store = PostgresStore(url, max_size=2)
        try:
            while True:
                try:
                    jobs = store.claim(f"w{n}", ["q"], 4, 30.0)
                    if not jobs:
                        return
                    for job in jobs:
                        assert store.get_job(job.id) is not None
                    lost = store.finish([Outcome(lease=j.lease, kind="done", result="1")
                                         for j in jobs])
                    assert lost == [], lost
                    done.extend(j.id for j in jobs)
                except (StoreError, AssertionError) as exc:
                    errors.append(exc)
                    return
        finally:
            store.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert sorted(done) == sorted(ids)  # each exactly once
    assert {producer.get_job(i).status for i in ids} == {"done"}  # type: ignore[union-attr]


def test_migrate_through_a_transaction_pooler(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore]
) -> None:
    """Migrations run in one transaction under a transaction-scoped advisory lock, with SET
    LOCAL: nothing outlives it, so concurrent migrations through the pooler migrate once."""
    url = tx_bouncer.url(pg_url) + "&pooler=transaction"
    stores = [_open(opened, url) for _ in range(3)]
    versions: list[int] = []
    errors: list[BaseException] = []

    def migrate(store: PostgresStore) -> None:
        try:
            versions.append(store.migrate())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=migrate, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert versions == [latest_version()] * 3
    stores[0].check_schema()  # raises SchemaError unless at the latest version


@pytest.mark.parametrize("wakeups", ["polling", "direct"])
def test_an_idle_worker_is_woken_behind_a_transaction_pooler(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore], wakeups: str
) -> None:
    """direct=: LISTEN on a session connection to the server, so the enqueue's NOTIFY (sent
    through the pooler) wakes it; without it, the wait returns after the poll interval,
    long before its own timeout."""
    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + "&pooler=transaction" + (DIRECT if wakeups == "direct" else "")
    waiter, producer = _open(opened, url), _open(opened, url)
    thread, out = waiter_thread(waiter, ["wq"], WAKE_WAIT)
    sent = time.monotonic()
    producer.enqueue([NewJob("t", queue="wq")])
    thread.join(WAKE_WAIT + 5)
    assert out["woken"] is True
    assert out["at"] - sent < WAKE_WAIT / 2
    assert [j.queue for j in waiter.claim("w", ["wq"], 5, 30.0)] == ["wq"]


@pytest.mark.parametrize("wakeups", ["polling", "direct"])
def test_wait_for_finish_behind_a_transaction_pooler(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore], wakeups: str
) -> None:
    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + "&pooler=transaction" + (DIRECT if wakeups == "direct" else "")
    producer, worker = _open(opened, url), _open(opened, url)
    (job_id,) = producer.enqueue([NewJob("t", queue="fq")])
    out: dict[str, Any] = {}

    def wait() -> None:
        out["finished"] = producer.wait_for_finish([job_id], WAKE_WAIT)
        out["at"] = time.monotonic()

    thread = threading.Thread(target=wait)
    thread.start()
    (job,) = worker.claim("w", ["fq"], 1, 30.0)
    sent = time.monotonic()
    worker.finish([Outcome(lease=job.lease, kind="done", result="1")])
    thread.join(WAKE_WAIT + 5)
    assert out["finished"] is True
    assert out["at"] - sent < WAKE_WAIT / 2


@pytest.mark.parametrize("option", ["", "&pooler=session"])
def test_session_pooling_keeps_listen_notify(
    pg_url: str, session_bouncer: Bouncer, opened: list[PostgresStore], option: str
) -> None:
    clone_for_url(pg_url)
    url = session_bouncer.url(pg_url) + option
    waiter, producer = _open(opened, url), _open(opened, url)
    assert waiter._connector.pooler.transaction is False
    assert waiter._listener.listens  # LISTEN/NOTIFY, not polling
    thread, out = waiter_thread(waiter, ["sq"], WAKE_WAIT)
    sent = time.monotonic()
    (job_id,) = producer.enqueue([NewJob("t", queue="sq")])
    thread.join(WAKE_WAIT + 5)
    assert out["woken"] is True
    assert out["at"] - sent < WAKE_WAIT / 2
    (job,) = waiter.claim("w", ["sq"], 1, 30.0)
    assert waiter.finish([Outcome(lease=job.lease, kind="done", result="1")]) == []
    assert producer.wait_for_finish([job_id], WAKE_WAIT) is True


@pytest.mark.parametrize("option, said", [
    ("&pooler=transaction", "PostgreSQL pooler=transaction: no prepared statements, no "
                            "session state; no direct= connection for LISTEN, so idle workers "
                            "poll every 0.25s"),
    ("&pooler=transaction" + DIRECT, "LISTEN/NOTIFY wake-ups on a direct connection to "
                                     "127.0.0.1:5432"),
    ("&pooler=session", "PostgreSQL pooler=session: prepared statements on"),
])
def test_the_mode_is_logged_once(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore], option: str, said: str,
    caplog: pytest.LogCaptureFixture
) -> None:
    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + option
    with caplog.at_level(logging.INFO, logger="tether.store.postgres"):
        for _ in range(3):  # a worker opens one store per thread
            _open(opened, url)
    lines = [r for r in caplog.records if "pooler=" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert said in lines[0].getMessage()
    assert lines[0].levelno == logging.INFO


def test_no_option_logs_nothing_new(
    pg_url: str, opened: list[PostgresStore], caplog: pytest.LogCaptureFixture
) -> None:
    """Without the option (no pooler, or a session pooler) the store behaves as before it
    existed: prepared statements after 2 executions, LISTEN, nothing said above DEBUG."""
    clone_for_url(pg_url)
    with caplog.at_level(logging.INFO, logger="tether.store.postgres"):
        store = _open(opened, pg_url)
    assert [r for r in caplog.records if "pooler" in r.getMessage()] == []
    assert store._connector._kwargs["prepare_threshold"] == 2
    assert store._listener.listens


@pytest.mark.parametrize("query, why", [
    ("&pooler=statement", "unknown pooler 'statement'"),
    ("&pooler=", "unknown pooler ''"),
    ("&direct=127.0.0.1:5432", "direct= in"),
    ("&pooler=session&direct=127.0.0.1:5432", "is for pooler=transaction only"),
    ("&pooler=transaction&direct=host:port", "give the PostgreSQL server as host"),
    ("&pooler=transaction&direct=", "give the PostgreSQL server as host"),
])
def test_bad_pooler_options_are_config_errors(pg_url: str, query: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        PostgresStore(pg_url + query)


@pytest.mark.parametrize("wakeups", ["polling", "direct"])
def test_the_async_producer_behind_a_transaction_pooler(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore], wakeups: str
) -> None:
    """Its own connections prepare nothing either; its wait_for_finish polls or listens."""
    import asyncio

    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + "&pooler=transaction" + (DIRECT if wakeups == "direct" else "")
    store, worker = _open(opened, url), _open(opened, url)

    async def run() -> tuple[bool, float]:
        producer = store.async_producer()
        try:
            ids = []
            for _ in range(5):  # more than prepare_threshold executions of each statement
                ids += await producer.enqueue([NewJob("t", queue="aq")])
                assert (await producer.get_job(ids[-1])) is not None
            waiting = asyncio.ensure_future(producer.wait_for_finish([ids[0]], WAKE_WAIT))
            jobs = await asyncio.to_thread(worker.claim, "w", ["aq"], 5, 30.0)
            sent = time.monotonic()
            await asyncio.to_thread(
                worker.finish, [Outcome(lease=j.lease, kind="done", result="1") for j in jobs])
            finished = await waiting
            return finished, time.monotonic() - sent
        finally:
            await producer.aclose()

    finished, took = asyncio.run(run())
    assert finished is True
    assert took < WAKE_WAIT / 2


def test_without_the_option_the_error_names_the_pooler(
    pg_url: str, opened: list[PostgresStore]
) -> None:
    """Tether does not detect a transaction pooler, but the collision it causes says what
    to do. One server connection behind the pooler: the second store's first prepared
    statement is named like the first store's."""
    clone_for_url(pg_url)
    with pgbouncer("transaction", pool_size=1) as bouncer:
        first, second = _open(opened, bouncer.url(pg_url)), _open(opened, bouncer.url(pg_url))
        for _ in range(3):
            first.now()
        with pytest.raises(StoreError) as caught:
            for _ in range(3):
                second.get_job(1)
        assert 'prepared statement "_pg3_0" already exists' in str(caught.value)
        assert "add pooler=transaction to the store URL" in str(caught.value)
        for store in (first, second):
            store.close()


def test_limited_claims_hold_through_a_transaction_pooler(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore]
) -> None:
    """Limited claims (issue 19) serialise on a transaction-level advisory lock only: through
    a transaction pooler, 6 clients on 3 server connections reach a concurrency limit and
    never pass it, and no server connection is left holding the lock."""
    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + "&pooler=transaction"
    producer = _open(opened, url)
    producer.enqueue([NewJob("t", queue="q", limit_key=str(i % 2)) for i in range(60)])
    flow = [FlowLimit("task", "t", concurrency=2, per_key=True)]
    barrier = threading.Barrier(6)
    got: list[list[int]] = [[] for _ in range(6)]
    errors: list[BaseException] = []

    def claim(n: int) -> None:
        store = PostgresStore(url, max_size=1)
        try:
            barrier.wait(30)
            for _ in range(5):
                got[n] += [j.id for j in store.claim(f"w{n}", ["q"], 3, 30.0, flow=flow)]
        except (StoreError, AssertionError, threading.BrokenBarrierError) as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    claimed = [i for ids in got for i in ids]
    assert len(claimed) == len(set(claimed)) == 4, "2 per key: reached, never passed"
    keys = Counter(producer.get_job(i).limit_key for i in claimed)  # type: ignore[union-attr]
    assert keys == {"0": 2, "1": 2}
    with psycopg.connect(pg_url.split("?", maxsplit=1)[0], autocommit=True) as direct:
        held = direct.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND ((classid::bigint << 32) | objid::bigint) = %s",
            (lock_key(producer.schema),)).fetchone()
    assert held == (0,), "the flow lock ended with its transaction"


def test_workflows_through_a_transaction_pooler(
    pg_url: str, tx_bouncer: Bouncer, opened: list[PostgresStore]
) -> None:
    """Job dependencies (issue 20) keep no session state: the parents' row locks, the links
    and resolve_links (which carries its own search_path) live within one transaction.
    Through a transaction pooler (3 server connections), 4 worker clients run a fan-out of 30
    children and a chord over them, released once every member is done, while a failing
    branch cancels its descendants; the async producer links children the same way."""
    import asyncio

    clone_for_url(pg_url)
    url = tx_bouncer.url(pg_url) + "&pooler=transaction"
    producer = _open(opened, url)
    [root, failing] = producer.enqueue([NewJob("t", queue="wf"), NewJob("fail", queue="wf")])
    members = producer.enqueue([NewJob("t", queue="wf", after=(root,)) for _ in range(30)])
    [chord] = producer.enqueue([NewJob("t", queue="wf", after=tuple(members))])

    async def link() -> list[int]:
        aproducer = producer.async_producer()
        try:
            [kid] = await aproducer.enqueue([NewJob("t", queue="wf", after=(failing,))])
            return [kid, *await aproducer.enqueue([NewJob("t", queue="wf", after=(kid,))])]
        finally:
            await aproducer.aclose()

    doomed = asyncio.run(link())
    errors: list[BaseException] = []
    ran: list[int] = []
    stop = threading.Event()

    def work(n: int) -> None:
        store = PostgresStore(url, max_size=1)
        try:
            while not stop.is_set():
                jobs = store.claim(f"w{n}", ["wf"], 2, 30.0)
                if not jobs:
                    store.wait_for_jobs(["wf"], 0.2)
                    continue
                ran.extend(j.id for j in jobs)
                outcomes = [Outcome(j.lease, "dead", error="boom", reason="error")
                            if j.task == "fail" else Outcome(j.lease, "done", result="1")
                            for j in jobs]
                assert store.finish(outcomes) == []
        except (StoreError, AssertionError) as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: errors or must_get(producer, chord).status == "done", 120,
                 "the chord's callback to run")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert errors == []
    assert sorted(ran) == sorted([root, failing, *members, chord]), "each ran once"
    ends = [must_get(producer, m).finished_at or 0.0 for m in members]
    assert max(ends) <= (must_get(producer, chord).started_at or 0.0)
    for job in producer.get_jobs(doomed):
        assert (job.status, job.failure_reason) == ("cancelled", "dependency_failed")
    assert producer.job_links(chord).parents == tuple(members)
