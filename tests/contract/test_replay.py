"""Every store call is safe to retry: a call whose reply was lost, sent again, acts once.

These are the store halves of the client-retry rules; tests/*/ drop real replies through the
fault proxy. Here the "lost reply" is simply a call whose answer the caller ignores.
"""

from __future__ import annotations

from tests.contract.helpers import TTL, fresh_queue, must_get, new_job, running_job
from tether.stores import Outcome, Store


def test_enqueue_with_the_same_request_id_inserts_once(store: Store, t0: float) -> None:
    q = fresh_queue()
    jobs = [new_job(queue=q), new_job(queue=q, priority=3)]
    first = store.enqueue(jobs, now=t0, request_id="req-1")
    again = store.enqueue(jobs, now=t0 + 1, request_id="req-1")
    assert again == first
    assert len(store.list_jobs(queue=q, limit=100)) == 2
    other = store.enqueue(jobs, now=t0 + 2, request_id="req-2")
    assert set(other).isdisjoint(first)
    assert len(store.list_jobs(queue=q, limit=100)) == 4


def test_enqueue_without_request_id_is_not_deduplicated(store: Store, t0: float) -> None:
    q = fresh_queue()
    store.enqueue([new_job(queue=q)], now=t0)
    store.enqueue([new_job(queue=q)], now=t0)
    assert len(store.list_jobs(queue=q, limit=100)) == 2


def test_a_replayed_claim_returns_the_same_jobs_and_claims_no_more(
    store: Store, t0: float
) -> None:
    q = fresh_queue()
    ids = store.enqueue([new_job(queue=q) for _ in range(5)], now=t0)
    first = store.claim("w1", [q], 2, TTL, now=t0 + 1, request_id="c" * 32)
    assert len(first) == 2
    again = store.claim("w1", [q], 2, TTL, now=t0 + 1.5, request_id="c" * 32)
    assert sorted((j.id, j.attempt, j.lease_token) for j in again) == sorted(
        (j.id, j.attempt, j.lease_token) for j in first
    )
    running = store.list_jobs(status="running", queue=q, limit=100)
    assert len(running) == 2, "the replay claimed nothing more"
    fresh = store.claim("w1", [q], 10, TTL, now=t0 + 2)
    assert len(fresh) == 3
    assert {j.id for j in first} | {j.id for j in fresh} == set(ids)


def test_a_replayed_claim_after_the_jobs_finished_returns_nothing_running(
    store: Store, t0: float
) -> None:
    q = fresh_queue()
    store.enqueue([new_job(queue=q)], now=t0)
    [job] = store.claim("w1", [q], 1, TTL, now=t0 + 1, request_id="d" * 32)
    store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 2)
    assert store.claim("w1", [q], 1, TTL, now=t0 + 3, request_id="d" * 32) == []


def test_a_replayed_finish_is_not_reported_rejected(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    outcome = Outcome(job.lease, "done", result="7")
    assert store.finish([outcome], now=t0 + 1) == []
    assert store.finish([outcome], now=t0 + 2) == [], "our own applied outcome"
    after = must_get(store, job.id)
    assert (after.status, after.result, after.finished_at) == ("done", "7", after.finished_at)


def test_a_replayed_error_outcome_does_not_count_twice(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=5)
    outcome = Outcome(job.lease, "error", error="boom", reason="error", retry_delay=60)
    assert store.finish([outcome], now=t0 + 1) == []
    assert store.finish([outcome], now=t0 + 2) == []
    after = must_get(store, job.id)
    assert (after.status, after.failures) == ("pending", 1)


def test_a_finish_after_a_reap_is_still_rejected(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=5)
    store.reap_expired(now=t0 + 10)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 11) == [job.lease]


def test_a_replayed_heartbeat_renews_again(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    for dt in (1, 1.5):
        assert store.heartbeat("w1", [job.lease], TTL, now=t0 + dt).lost == frozenset()
    assert must_get(store, job.id).status == "running"


def test_a_replayed_claim_whose_jobs_were_reaped_claims_nothing_more(
    store: Store, t0: float
) -> None:
    """The record of the request answers a replay, not the jobs it took: once those were
    reaped (or finished) a replay still claims nothing (PostgreSQL claimed afresh)."""
    q = fresh_queue()
    store.enqueue([new_job(queue=q) for _ in range(4)], now=t0)
    first = store.claim("w1", [q], 2, 5, now=t0 + 1, request_id="e" * 32)
    assert len(first) == 2
    assert len(store.reap_expired(now=t0 + 100)) == 2
    assert store.claim("w1", [q], 2, TTL, now=t0 + 101, request_id="e" * 32) == []
    assert store.list_jobs(status="running", queue=q, limit=100) == []
    assert len(store.claim("w1", [q], 10, TTL, now=t0 + 102)) == 4, "a new request claims"


def test_a_replayed_claim_after_its_jobs_finished_claims_nothing_more(
    store: Store, t0: float
) -> None:
    q = fresh_queue()
    store.enqueue([new_job(queue=q) for _ in range(3)], now=t0)
    [job] = store.claim("w1", [q], 1, TTL, now=t0 + 1, request_id="f" * 32)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 2) == []
    assert store.claim("w1", [q], 1, TTL, now=t0 + 3, request_id="f" * 32) == []
    assert store.list_jobs(status="running", queue=q, limit=100) == []
