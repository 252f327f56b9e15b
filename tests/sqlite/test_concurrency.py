"""Many claimers at once: threads of one process and several processes on one file."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.contract.helpers import WAKE_WAIT
from tests.sqlite import _procs
from tests.sqlite._migrate import migrate_at_once
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Outcome
from tether.stores._sqlite.store import SCHEMA_VERSION, SQLiteStore

N_JOBS = 600


def _check_drained(store: SQLiteStore, claims: list[tuple[int, int]], ids: list[int]) -> None:
    dupes = [key for key, n in Counter(claims).items() if n > 1]
    assert not dupes, f"(job, attempt) claimed twice: {dupes[:5]}"
    assert {job_id for job_id, _ in claims} == set(ids)
    for job in store.list_jobs(limit=N_JOBS + 1):
        assert job.status == "done", job
        expected = 3 if job.id % 2 else 1  # odd ids were released twice, then finished
        assert job.attempt == expected
        assert job.interruptions == expected - 1


def _drain_in_thread(store: SQLiteStore, owner: str, claims: list[tuple[int, int]]) -> None:
    while True:
        try:
            jobs = store.claim(owner, ["default"], 7, 300.0)
        except StoreUnavailable:  # the contract lets callers retry transient trouble
            continue
        if not jobs:
            return
        claims.extend((job.id, job.attempt) for job in jobs)
        outcomes = [
            Outcome(job.lease, "released" if job.attempt < 3 and job.id % 2 else "done")
            for job in jobs
        ]
        assert store.finish(outcomes) == []


def test_threads_never_share_a_claim(
    sqlite_store: SQLiteStore, make_store: Callable[..., SQLiteStore]
) -> None:
    ids = sqlite_store.enqueue([NewJob("t") for _ in range(N_JOBS)])
    # Four threads on one store object (one connection each) + four with their own objects.
    stores = [sqlite_store] * 4 + [make_store() for _ in range(4)]
    per_thread: list[list[tuple[int, int]]] = [[] for _ in stores]
    barrier = threading.Barrier(len(stores))

    def run(i: int) -> None:
        barrier.wait(30)
        _drain_in_thread(stores[i], f"w{i}", per_thread[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    _check_drained(sqlite_store, [c for claims in per_thread for c in claims], ids)
    assert sum(1 for claims in per_thread if claims) > 1, "no concurrency happened"


@pytest.mark.slow
def test_processes_never_share_a_claim(sqlite_store: SQLiteStore, db_url: str) -> None:
    ids = sqlite_store.enqueue([NewJob("t") for _ in range(N_JOBS)])
    ctx = multiprocessing.get_context("spawn")
    n = 3
    barrier = ctx.Barrier(n)
    results: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_procs.drain, args=(db_url, f"p{i}", barrier, results)) for i in range(n)
    ]
    for proc in procs:
        proc.start()
    reports = [results.get(timeout=90) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    errors = [error for _, _, error in reports if error]
    assert not errors, errors
    _check_drained(sqlite_store, [c for _, claims, _ in reports for c in claims], ids)


def test_concurrent_migrate_threads(make_store: Callable[..., SQLiteStore]) -> None:
    stores = [make_store() for _ in range(6)]
    versions = migrate_at_once(stores)
    assert versions == [SCHEMA_VERSION] * len(stores)
    stores[0].check_schema()


@pytest.mark.slow
def test_concurrent_migrate_processes(db_url: str, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    n = 3
    barrier = ctx.Barrier(n)
    results: Any = ctx.Queue()
    procs = [ctx.Process(target=_procs.migrate, args=(db_url, barrier, results)) for _ in range(n)]
    for proc in procs:
        proc.start()
    reports = [results.get(timeout=90) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert reports == [(SCHEMA_VERSION, None)] * n
    store = SQLiteStore(db_url)
    try:
        store.check_schema()
    finally:
        store.close()


def test_wait_for_jobs_times_out(sqlite_store: SQLiteStore) -> None:
    start = time.monotonic()
    assert sqlite_store.wait_for_jobs(["default"], 0.05) is False
    # The lower bound is the timeout; the upper one only says the wait did not hang.
    assert 0.04 <= time.monotonic() - start < WAKE_WAIT / 2


def _woken_by(waiter: SQLiteStore, poke: Callable[[], object]) -> tuple[list[bool], float]:
    """A waiter (``WAKE_WAIT``) on its own thread, poked every 50 ms until it returns: one poke
    before it was waiting may be missed."""
    woke: list[bool] = []
    thread = threading.Thread(target=lambda: woke.append(waiter.wait_for_jobs([], WAKE_WAIT)))
    start = time.monotonic()
    thread.start()
    while thread.is_alive() and time.monotonic() - start < WAKE_WAIT + 5:
        poke()
        thread.join(0.05)
    thread.join(5)
    return woke, time.monotonic() - start


def test_wait_for_jobs_wakes_on_another_connection(
    sqlite_store: SQLiteStore, make_store: Callable[..., SQLiteStore]
) -> None:
    producer = make_store()
    woke, elapsed = _woken_by(sqlite_store, lambda: producer.enqueue([NewJob("t")]))
    assert woke == [True]
    assert elapsed < WAKE_WAIT / 2  # woken, not timed out


def test_wait_for_jobs_wakes_on_notify(sqlite_store: SQLiteStore) -> None:
    woke, _ = _woken_by(sqlite_store, lambda: sqlite_store.notify(["default"]))
    assert woke == [True]


def test_commit_between_claim_and_wait_is_not_missed(
    sqlite_store: SQLiteStore, make_store: Callable[..., SQLiteStore]
) -> None:
    assert sqlite_store.claim("w", ["default"], 10, 30.0) == []
    make_store().enqueue([NewJob("t")])  # lands before the wait starts
    start = time.monotonic()
    assert sqlite_store.wait_for_jobs(["default"], WAKE_WAIT) is True
    assert time.monotonic() - start < WAKE_WAIT / 2  # at once, not at the timeout
    # ...and the next wait does not spin on the same change.
    assert sqlite_store.wait_for_jobs(["default"], 0.05) is False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_store_survives_fork(sqlite_store: SQLiteStore) -> None:
    job_id = sqlite_store.enqueue([NewJob("t")])[0]  # the parent has an open connection
    ctx = multiprocessing.get_context("fork")
    results: Any = ctx.Queue()

    def child() -> None:
        jobs = sqlite_store.claim("child", ["default"], 10, 30.0)
        results.put([job.id for job in jobs])

    proc = ctx.Process(target=child)
    proc.start()
    assert results.get(timeout=30) == [job_id]
    proc.join(30)
    assert proc.exitcode == 0
    job = sqlite_store.get_job(job_id)
    assert job is not None
    assert (job.status, job.locked_by) == ("running", "child")


def _hold_write(store: SQLiteStore, held: threading.Event, release: threading.Event) -> None:
    """Sit in a write transaction of ``store`` (this thread's connection) until ``release``."""
    with store._db.write():
        held.set()
        release.wait(60)


def test_threads_take_turns_on_the_process_writer_lock(sqlite_store: SQLiteStore) -> None:
    """A write waits while another thread of the process is in one, and goes on once that
    one commits (the process lock hands over; SQLite's lock is free by then)."""
    held, release, done = threading.Event(), threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write, args=(sqlite_store, held, release))
    holder.start()
    assert held.wait(30)
    got: list[int] = []

    def write() -> None:
        got.extend(sqlite_store.enqueue([NewJob("t")]))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert not done.is_set()  # it cannot have written: the holder's transaction is open
    release.set()
    holder.join(30)
    assert done.wait(30)
    writer.join(30)
    assert [j.id for j in sqlite_store.list_jobs()] == got


def test_a_write_held_too_long_by_another_thread_gives_store_unavailable(
    make_store: Callable[..., SQLiteStore],
) -> None:
    store = make_store(busy_timeout=0.2)
    store.migrate()
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_write, args=(store, held, release))
    holder.start()
    try:
        assert held.wait(30)
        with pytest.raises(StoreUnavailable, match="another thread of this process"):
            store.enqueue([NewJob("t")])
    finally:
        release.set()
        holder.join(30)
    assert store.enqueue([NewJob("t")])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_the_writer_lock_is_held_writes(sqlite_store: SQLiteStore) -> None:
    """The process writer lock held in the parent at the fork (here by the test itself, as a
    thread does between taking it and BEGIN) is not the child's: the child writes at once
    instead of waiting out busy_timeout on a lock no thread of its own will release."""
    job_id = sqlite_store.enqueue([NewJob("t")])[0]
    ctx = multiprocessing.get_context("fork")
    results: Any = ctx.Queue()

    def child() -> None:
        try:
            jobs = sqlite_store.claim("child", ["default"], 10, 30.0)
            results.put([job.id for job in jobs])
        except Exception as exc:  # reported to the parent, which fails the test
            results.put(repr(exc))

    writer = sqlite_store._db._writer
    assert writer.acquire(timeout=30)
    try:
        proc = ctx.Process(target=child)
        proc.start()
        assert results.get(timeout=60) == [job_id]
    finally:
        writer.release()
    proc.join(30)
    assert proc.exitcode == 0
