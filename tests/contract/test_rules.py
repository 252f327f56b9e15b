"""One rule each where the stores used to differ (issue #8, H): cancel requests that stick,
dead-letter retry against a held unique key, error record shapes, per-outcome fencing,
duplicate outcomes, released-with-delay, worker re-registration."""

from __future__ import annotations

import pytest

from tests.contract.helpers import (
    TTL,
    at,
    claim_one,
    errors_of,
    fresh_queue,
    must_get,
    new_job,
    running_job,
    stale,
)
from tether.stores import Outcome, RetryResult, Store, WorkerInfo

RECORD_KEYS = {"attempt", "error", "reason", "at", "owner"}


# -- a cancel request sticks ------------------------------------------------------------------
@pytest.mark.parametrize(
    "outcome",
    [
        dict(kind="error", error="boom", reason="error", retry_delay=5),
        dict(kind="error", error="timed out after 1s", reason="timeout"),
        dict(kind="released"),
    ],
)
def test_cancel_request_sticks_through_an_ending_attempt(
    store: Store, t0: float, outcome: dict[str, object]
) -> None:
    job = running_job(store, t0, max_attempts=5)
    assert store.cancel(job.id, now=t0 + 1) == "requested"
    assert store.finish([Outcome(job.lease, **outcome)], now=t0 + 2) == []  # type: ignore[arg-type]
    after = must_get(store, job.id)
    assert after.status == "cancelled", "the request was lost: the job would run again"
    assert after.finished_at == at(t0 + 2)
    assert after.locked_by is None and after.lease_until is None
    if outcome.get("error"):
        assert after.last_error == outcome["error"]


def test_cancel_request_sticks_through_a_reap(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=5)
    store.cancel(job.id, now=t0 + 1)
    [reaped] = store.reap_expired(now=t0 + 10)
    assert reaped.status == "cancelled"
    after = must_get(store, job.id)
    assert after.status == "cancelled"
    assert after.stall_count == 1
    assert errors_of(after)[-1]["reason"] == "stalled"


def test_done_wins_over_a_cancel_request(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    store.cancel(job.id, now=t0 + 1)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 2) == []
    assert must_get(store, job.id).status == "done"


def test_dead_stays_failed_with_a_cancel_request(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    store.cancel(job.id, now=t0 + 1)
    store.finish([Outcome(job.lease, "dead", error="no", reason="error")], now=t0 + 2)
    assert must_get(store, job.id).status == "failed"


# -- dead-letter retry and unique keys --------------------------------------------------------
def _dead(store: Store, now: float, **fields: object) -> int:
    job = running_job(store, now, **fields)
    store.finish([Outcome(job.lease, "dead", error="x", reason="error")], now=now + 1)
    return job.id


def test_retry_of_a_job_whose_key_is_held_by_a_live_job_is_refused_and_reported(
    store: Store, t0: float
) -> None:
    key = f"k-{fresh_queue()}"
    old = _dead(store, t0, unique_key=key)
    live = store.enqueue([new_job(unique_key=key, queue=fresh_queue())], now=t0 + 2)[0]
    assert live != old
    free = _dead(store, t0, unique_key=key + "-free")
    assert store.retry_failed([old, free], now=t0 + 3) == RetryResult(1, (old,))
    assert must_get(store, old).status == "failed"
    assert must_get(store, free).status == "pending"
    # And through "retry everything":
    assert store.retry_failed(None, now=t0 + 4) == RetryResult(0, (old,))
    assert must_get(store, old).status == "failed"


def test_retry_clears_a_cancel_request(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    store.cancel(job.id, now=t0 + 1)
    store.finish([Outcome(job.lease, "dead", error="no", reason="error")], now=t0 + 2)
    assert store.retry_failed([job.id], now=t0 + 3) == RetryResult(1)
    after = claim_one(store, "w2", job.queue, t0 + 4)
    assert after.cancel_requested is False
    assert store.heartbeat("w2", [after.lease], TTL, now=t0 + 5).cancel_requested == frozenset()


# -- error records: one shape from every path -------------------------------------------------
def test_error_records_have_one_shape_from_finish_and_reap(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=5, owner="w-a", max_attempts=9, max_stalls=9)
    store.reap_expired(now=t0 + 10)
    b = claim_one(store, "w-b", job.queue, t0 + 11)
    store.finish([Outcome(b.lease, "error", error="e", reason="error")], now=t0 + 12)
    c = claim_one(store, "w-c", job.queue, t0 + 13)
    store.finish([Outcome(c.lease, "released", error="bye")], now=t0 + 14)
    records = errors_of(must_get(store, job.id))
    assert [set(r) for r in records] == [RECORD_KEYS] * 3
    assert [(r["attempt"], r["owner"], r["reason"]) for r in records] == [
        (1, "w-a", "stalled"), (2, "w-b", "error"), (3, "w-c", "released"),
    ]
    assert [r["at"] for r in records] == [at(t0 + 10), at(t0 + 12), at(t0 + 14)]


def test_released_record_keeps_the_given_reason(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    out = Outcome(job.lease, "released", error="unknown task", reason="unknown_task",
                  retry_delay=5)
    store.finish([out], now=t0 + 1)
    after = must_get(store, job.id)
    assert errors_of(after)[-1]["reason"] == "unknown_task"


# -- released with a delay --------------------------------------------------------------------
def test_released_with_a_delay_is_due_later_and_counts_nothing(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    store.finish([Outcome(job.lease, "released", retry_delay=30)], now=t0 + 1)
    after = must_get(store, job.id)
    assert after.status == "pending"
    assert after.run_at == at(t0 + 31)
    assert (after.failures, after.stall_count, after.interruptions) == (0, 0, 1)
    assert store.claim("w1", [job.queue], 1, TTL, now=t0 + 30) == []
    assert len(store.claim("w1", [job.queue], 1, TTL, now=t0 + 32)) == 1


def test_released_without_delay_keeps_its_place(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    store.finish([Outcome(job.lease, "released")], now=t0 + 50)
    assert must_get(store, job.id).run_at == at(job.run_at)


# -- finish: fenced outcome by outcome --------------------------------------------------------
def test_a_stale_outcome_next_to_the_valid_one_does_not_hide_it(store: Store, t0: float) -> None:
    """The self-zombie case: the same worker reports its lost attempt 1 and its attempt 2 of
    the same job in one batch. Attempt 2's completion must land."""
    job = running_job(store, t0, ttl=5)
    store.reap_expired(now=t0 + 10)
    second = claim_one(store, "w1", job.queue, t0 + 11)
    old = Outcome(job.lease, "error", error="late", reason="error")
    new = Outcome(second.lease, "done", result='"ok"')
    assert store.finish([old, new], now=t0 + 12) == [job.lease]
    after = must_get(store, job.id)
    assert (after.status, after.result, after.failures) == ("done", '"ok"', 0)


def test_the_valid_outcome_first_then_a_stale_one(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    new = Outcome(job.lease, "done", result='"ok"')
    forged = Outcome(stale(job.lease, owner="zombie"), "error", error="x", reason="error")
    assert store.finish([new, forged], now=t0 + 1) == [forged.lease]
    assert must_get(store, job.id).status == "done"


def test_the_same_outcome_twice_in_a_batch_counts_once(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=5)
    out = Outcome(job.lease, "error", error="boom", reason="error", retry_delay=9)
    assert store.finish([out, out], now=t0 + 1) == []
    after = must_get(store, job.id)
    assert (after.status, after.failures, len(errors_of(after))) == ("pending", 1, 1)


# -- workers -------------------------------------------------------------------------------
def test_registering_again_keeps_started_at(store: Store, t0: float) -> None:
    first = WorkerInfo("w-re", "h", 1, ("a",), 2)
    store.register_worker(first, now=t0)
    store.register_worker(WorkerInfo("w-re", "h", 1, ("a", "b"), 4), now=t0 + 10)
    [row] = [w for w in store.list_workers() if w.id == "w-re"]
    assert row.started_at == at(t0)
    assert row.last_seen == at(t0 + 10)
    assert (row.queues, row.concurrency) == (("a", "b"), 4)
