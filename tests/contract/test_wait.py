"""wait_for_finish: woken when a job becomes terminal (done, failed, cancelled, reaped into
the dead letter), from this store object or another connection; at once for a job already
terminal; bounded by its timeout otherwise.

Real (monotonic) time, because waiting is the behaviour under test. PostgreSQL and Redis have
no poll here: a waiter that is not notified sleeps to its timeout (``WAIT``), so returning well
before it proves the notification arrived. SQLite polls every 50 ms.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

import pytest

from tests.contract.helpers import enqueue_one, fresh_queue, run_concurrently, running_job
from tether.stores import Outcome, Store

WAIT = 20.0  # a waiter woken by a notification returns long before this
WOKEN = WAIT / 2  # ... in under half of it, which a waiter nobody notified cannot do
SETTLE = 0.3  # lets the waiter get past its first read, so the wake-up is what ends it


def _ending(store: Store, kind: str) -> tuple[int, Callable[[], object]]:
    """A job and the action that ends it by ``kind`` (done, dead, error, cancelled,
    released-with-cancel, reaped)."""
    t0 = store.now()
    if kind == "cancelled":
        job_id = enqueue_one(store, t0, queue=fresh_queue())
        return job_id, lambda: store.cancel(job_id)
    if kind == "reaped":
        job = running_job(store, t0, ttl=1.0, max_stalls=1)
        return job.id, lambda: store.reap_expired(0.0, now=t0 + 60)
    job = running_job(store, t0, max_attempts=1)
    lease = job.lease
    if kind == "done":
        outcome = Outcome(lease, "done", result='"ok"')
    elif kind == "error":  # the last attempt's error: dead-lettered
        outcome = Outcome(lease, "error", error="boom")
    elif kind == "dead":
        outcome = Outcome(lease, "dead", error="fatal")
    else:  # pragma: no cover
        raise ValueError(kind)
    return job.id, lambda: store.finish([outcome])


def _wait_in_thread(waiter: Store, ids: list[int], end: Callable[[], object]) -> tuple[bool, float]:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(waiter.wait_for_finish(ids, WAIT)),
                              daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(SETTLE)
    end()
    thread.join(WAIT + 10)
    assert not thread.is_alive(), "wait_for_finish overran its timeout"
    return result[0], time.monotonic() - started


ENDINGS = ["done", "error", "dead", "cancelled", "reaped"]


@pytest.mark.parametrize("kind", ENDINGS)
def test_a_waiter_on_another_connection_is_woken(
    store: Store, open_another: Callable[[], Store], kind: str
) -> None:
    job_id, end = _ending(store, kind)
    waiter = open_another()
    woken, elapsed = _wait_in_thread(waiter, [job_id], end)
    assert woken is True
    assert elapsed < WOKEN, f"woken after {elapsed:.2f}s: no notification reached the waiter"
    job = store.get_job(job_id)
    assert job is not None and job.status in ("done", "failed", "cancelled")


@pytest.mark.parametrize("kind", ["done", "cancelled", "reaped"])
def test_a_waiter_on_the_same_store_is_woken(store: Store, kind: str) -> None:
    job_id, end = _ending(store, kind)
    woken, elapsed = _wait_in_thread(store, [job_id], end)
    assert woken is True
    assert elapsed < WOKEN


def test_one_of_several_ids_finishing_wakes_the_waiter(
    store: Store, open_another: Callable[[], Store]
) -> None:
    t0 = store.now()
    others = [enqueue_one(store, t0, queue=fresh_queue()) for _ in range(3)]
    job_id, end = _ending(store, "done")
    woken, elapsed = _wait_in_thread(open_another(), [*others, job_id], end)
    assert woken is True
    assert elapsed < WOKEN


def test_an_already_terminal_job_returns_at_once(store: Store) -> None:
    job_id, end = _ending(store, "done")
    end()
    started = time.monotonic()
    assert store.wait_for_finish([job_id], WAIT) is True
    assert time.monotonic() - started < WOKEN


def test_an_unknown_job_returns_at_once(store: Store) -> None:
    """A job that is gone (pruned, purged, never there) can never finish: the waiter is told
    at once, and its re-read of the job says why."""
    started = time.monotonic()
    assert store.wait_for_finish([987_654_321], WAIT) is True
    assert time.monotonic() - started < WOKEN


def test_the_timeout_bounds_the_wait(store: Store) -> None:
    job_id = enqueue_one(store, store.now(), queue=fresh_queue())
    started = time.monotonic()
    woken = store.wait_for_finish([job_id], 0.5)
    elapsed = time.monotonic() - started
    assert woken is False, "nothing finished the job"
    assert 0.4 <= elapsed < WOKEN


def test_zero_timeout_returns_at_once(store: Store) -> None:
    job_id = enqueue_one(store, store.now(), queue=fresh_queue())
    started = time.monotonic()
    assert store.wait_for_finish([job_id], 0.0) is False
    assert time.monotonic() - started < WOKEN


def test_a_retry_is_not_a_finish(store: Store, open_another: Callable[[], Store]) -> None:
    """An error with attempts left puts the job back to pending; the waiter may wake (spurious
    wake-ups are allowed) but must not be told the job finished when it reads again."""
    t0 = store.now()
    job = running_job(store, t0, max_attempts=3)
    store.finish([Outcome(job.lease, "error", error="again")])
    assert store.wait_for_finish([job.id], 0.3) is False


def test_bad_ids_raise_value_error(store: Store) -> None:
    with pytest.raises(ValueError):
        store.wait_for_finish([0], 0.1)


@pytest.mark.slow
def test_a_finish_racing_the_start_of_a_wait_is_never_missed(
    store: Store, open_another: Callable[[], Store]
) -> None:
    """The waiter's first moments (registering, reading, starting to listen) and a finish at
    the same instant, on a fresh store object each time: every wait still ends early. (On
    PostgreSQL this is the window the done key closes: a finish that skips its NOTIFY because
    nobody listened yet must be read by the waiter.)"""
    t0 = store.now()
    for _ in range(8):
        job = running_job(store, t0)
        waiter = open_another()
        started = time.monotonic()
        woken, _ = run_concurrently([
            functools.partial(waiter.wait_for_finish, [job.id], WAIT),
            functools.partial(store.finish, [Outcome(job.lease, "done", result="1")]),
        ])
        assert woken is True
        assert time.monotonic() - started < WOKEN, "a finish at the start of the wait was missed"
