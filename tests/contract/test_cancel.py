"""cancel: pending at once, running by request, terminal untouched, unknown id raises."""

from __future__ import annotations

import pytest

from tests.contract.helpers import at, enqueue_one, must_get, running_job
from tether._errors import JobNotFound
from tether.stores import Outcome, Store


def test_cancel_pending_job_at_once(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0)
    assert store.cancel(job_id, now=t0 + 1) == "cancelled"
    after = must_get(store, job_id)
    assert after.status == "cancelled"
    assert after.finished_at == at(t0 + 1)
    assert after.locked_by is None
    assert store.claim("w1", ["default"], 10, 30, now=t0 + 2) == []


def test_cancel_delayed_pending_job(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0, delay=100)
    assert store.cancel(job_id, now=t0 + 1) == "cancelled"
    assert must_get(store, job_id).status == "cancelled"
    assert store.claim("w1", ["default"], 10, 30, now=t0 + 200) == []


def test_cancel_running_job_is_a_request(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=30)
    before = must_get(store, job.id)
    assert before.cancel_requested is False
    assert store.cancel(job.id, now=t0 + 1) == "requested"
    after = must_get(store, job.id)
    assert after.status == "running"
    assert after.cancel_requested is True
    assert after.lease == job.lease
    assert after.lease_until == before.lease_until

    hb = store.heartbeat("w1", [job.lease], 30, now=t0 + 2)
    assert hb.cancel_requested == frozenset({job.lease})
    assert hb.lost == frozenset()

    # asking twice is still a request
    assert store.cancel(job.id, now=t0 + 3) == "requested"
    # the holder stops and reports it
    assert store.finish([Outcome(job.lease, "cancelled")], now=t0 + 4) == []
    done = must_get(store, job.id)
    assert done.status == "cancelled"
    assert done.finished_at == at(t0 + 4)


def test_cancel_terminal_job_is_finished(store: Store, t0: float) -> None:
    done = running_job(store, t0)
    store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 1)
    failed = running_job(store, t0)
    store.finish([Outcome(failed.lease, "dead", error="x", reason="error")], now=t0 + 1)
    cancelled = enqueue_one(store, t0)
    store.cancel(cancelled, now=t0 + 1)
    for job_id in (done.id, failed.id, cancelled):
        before = must_get(store, job_id)
        assert store.cancel(job_id, now=t0 + 2) == "finished"
        assert must_get(store, job_id) == before


def test_cancel_unknown_job_raises(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0)
    with pytest.raises(JobNotFound) as info:
        store.cancel(job_id + 1000, now=t0)
    assert info.value.job_id == job_id + 1000
    assert must_get(store, job_id).status == "pending"
