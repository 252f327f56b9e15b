"""retry_failed: the dead-letter retry, for some ids or for all."""

from __future__ import annotations

from tests.contract.helpers import at, claim_one, enqueue_one, must_get, running_job
from tether.stores import JobRecord, Outcome, RetryResult, Store


def _failed(store: Store, now: float, ttl: float = 10, **fields: object) -> JobRecord:
    job = running_job(store, now, ttl=ttl, **fields)
    out = Outcome(job.lease, "dead", error="boom", reason="error")
    assert store.finish([out], now=now + 1) == []
    failed = must_get(store, job.id)
    assert failed.status == "failed"
    return failed


def test_retry_failed_job(store: Store, t0: float) -> None:
    # one stall and one failure before it failed
    job = running_job(store, t0, ttl=10, max_stalls=5)
    store.reap_expired(now=t0 + 20)
    lease = claim_one(store, "w1", job.queue, t0 + 21).lease
    store.finish([Outcome(lease, "dead", error="boom", reason="error")], now=t0 + 22)
    failed = must_get(store, job.id)
    assert (failed.status, failed.failures, failed.stall_count, failed.attempt) == (
        "failed",
        1,
        1,
        2,
    )

    assert store.retry_failed([job.id], now=t0 + 100) == RetryResult(1)
    after = must_get(store, job.id)
    assert after.status == "pending"
    assert after.run_at == at(t0 + 100)
    assert after.failures == 0
    assert after.stall_count == 0
    assert after.failure_reason is None
    assert after.attempt == 2, "attempt is the fence: it never goes down"
    assert after.locked_by is None

    again = claim_one(store, "w2", job.queue, t0 + 100)
    assert again.attempt == 3


def test_retry_failed_ignores_jobs_that_are_not_failed(store: Store, t0: float) -> None:
    pending = enqueue_one(store, t0)
    running = running_job(store, t0)
    done = running_job(store, t0)
    store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 1)
    ids = [pending, running.id, done.id]
    before = [must_get(store, i) for i in ids]
    assert store.retry_failed(ids, now=t0 + 2) == RetryResult(0)
    assert [must_get(store, i) for i in ids] == before


def test_retry_failed_only_the_given_ids(store: Store, t0: float) -> None:
    a = _failed(store, t0)
    b = _failed(store, t0)
    assert store.retry_failed([a.id], now=t0 + 5) == RetryResult(1)
    assert must_get(store, a.id).status == "pending"
    assert must_get(store, b.id) == b


def test_retry_failed_none_means_all(store: Store, t0: float) -> None:
    failed = [_failed(store, t0) for _ in range(3)]
    other = enqueue_one(store, t0)
    other_before = must_get(store, other)
    assert store.retry_failed(None, now=t0 + 5) == RetryResult(3)
    for job in failed:
        after = must_get(store, job.id)
        assert (after.status, after.failures, after.failure_reason) == ("pending", 0, None)
    assert must_get(store, other) == other_before
    assert store.retry_failed(None, now=t0 + 6) == RetryResult(0)
