"""claim: the lease grant, its limits and order, and that no two claimers share a job."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial

import pytest

from tests.contract.helpers import (
    TTL,
    at,
    enqueue_one,
    must_get,
    new_job,
    run_concurrently,
    transient,
)
from tether.stores import JobRecord, Outcome, Store


def test_claim_returns_empty_when_nothing_is_due(store: Store, t0: float) -> None:
    assert store.claim("w1", ["default"], 10, TTL, now=t0) == []
    enqueue_one(store, t0, delay=60)
    assert store.claim("w1", ["default"], 10, TTL, now=t0 + 1) == []


def test_claim_grants_the_lease(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0)
    claimed = store.claim("worker-a", ["default"], 5, 45.0, now=t0 + 2)
    assert [j.id for j in claimed] == [job_id]
    for job in (claimed[0], must_get(store, job_id)):
        assert job.status == "running"
        assert job.locked_by == "worker-a"
        assert job.lease_until == at(t0 + 2 + 45)
        assert job.attempt == 1
        assert job.started_at == at(t0 + 2)
        assert job.cancel_requested is False
        assert job.lease.job_id == job_id
        assert job.lease.attempt == 1
        assert job.lease.owner == "worker-a"
        assert job.failures == 0
        assert job.finished_at is None


def test_claimed_job_is_not_claimed_again(store: Store, t0: float) -> None:
    enqueue_one(store, t0)
    assert len(store.claim("w1", ["default"], 10, TTL, now=t0)) == 1
    assert store.claim("w2", ["default"], 10, TTL, now=t0 + 1) == []


def test_attempt_counts_claims(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0)
    for n in range(1, 4):
        (job,) = store.claim("w1", ["default"], 1, TTL, now=t0 + n * 10)
        assert job.attempt == n
        assert must_get(store, job_id).attempt == n
        assert store.finish([Outcome(job.lease, "released")], now=t0 + n * 10 + 1) == []
        assert must_get(store, job_id).attempt == n, "handing back does not change attempt"


def test_claim_respects_limit(store: Store, t0: float) -> None:
    ids = store.enqueue([new_job() for _ in range(5)], now=t0)
    first = store.claim("w1", ["default"], 2, TTL, now=t0 + 1)
    assert len(first) == 2
    second = store.claim("w1", ["default"], 2, TTL, now=t0 + 1)
    assert len(second) == 2
    third = store.claim("w1", ["default"], 2, TTL, now=t0 + 1)
    assert len(third) == 1
    claimed = [j.id for j in first + second + third]
    assert sorted(claimed) == ids
    assert all(must_get(store, i).status == "running" for i in ids)
    assert store.claim("w1", ["default"], 2, TTL, now=t0 + 1) == []


def test_claim_only_from_the_given_queues(store: Store, t0: float) -> None:
    a = enqueue_one(store, t0, queue="a")
    b = enqueue_one(store, t0, queue="b")
    c = enqueue_one(store, t0, queue="c")
    assert [j.id for j in store.claim("w1", ["a"], 10, TTL, now=t0 + 1)] == [a]
    assert must_get(store, b).status == "pending"
    assert must_get(store, c).status == "pending"
    both = store.claim("w1", ["b", "c", "nothing-here"], 10, TTL, now=t0 + 1)
    assert sorted(j.id for j in both) == [b, c]
    assert store.claim("w1", ["a", "b", "c"], 10, TTL, now=t0 + 1) == []


def test_claim_order_priority_then_run_at_then_id(store: Store, t0: float) -> None:
    late_urgent = enqueue_one(store, t0, priority=-5, run_at=t0 - 1)
    normal_late = enqueue_one(store, t0, priority=0, run_at=t0 - 10)
    normal_early = enqueue_one(store, t0, priority=0, run_at=t0 - 20)
    low = enqueue_one(store, t0, priority=10, run_at=t0 - 100)
    tie_1 = enqueue_one(store, t0, priority=0, run_at=t0 - 5)
    tie_2 = enqueue_one(store, t0, priority=0, run_at=t0 - 5)
    urgent = enqueue_one(store, t0, priority=-5, run_at=t0 - 2)
    not_due = enqueue_one(store, t0, priority=-100, run_at=t0 + 100)

    order = []
    for _ in range(8):
        order += [j.id for j in store.claim("w1", ["default"], 1, TTL, now=t0)]
    assert order == [urgent, late_urgent, normal_early, normal_late, tie_1, tie_2, low]
    assert must_get(store, not_due).status == "pending"


def test_claim_with_limit_takes_the_first_in_order(store: Store, t0: float) -> None:
    low = store.enqueue([new_job(priority=5) for _ in range(3)], now=t0)
    high = store.enqueue([new_job(priority=-1) for _ in range(2)], now=t0)
    claimed = store.claim("w1", ["default"], 3, TTL, now=t0)
    assert sorted(j.id for j in claimed) == sorted([*high, low[0]])
    assert [must_get(store, i).status for i in low] == ["running", "pending", "pending"]


def test_claim_skips_not_yet_due_jobs(store: Store, t0: float) -> None:
    later = enqueue_one(store, t0, run_at=t0 + 10)
    now_id = enqueue_one(store, t0)
    assert [j.id for j in store.claim("w1", ["default"], 10, TTL, now=t0 + 5)] == [now_id]
    assert must_get(store, later).status == "pending"
    assert [j.id for j in store.claim("w1", ["default"], 10, TTL, now=t0 + 11)] == [later]


def test_claim_ignores_terminal_and_running_jobs(store: Store, t0: float) -> None:
    cancelled, done, running = store.enqueue([new_job() for _ in range(3)], now=t0)
    assert store.cancel(cancelled, now=t0) == "cancelled"
    (first,) = store.claim("w1", ["default"], 1, TTL, now=t0)
    assert first.id == done
    assert store.finish([Outcome(first.lease, "done", result="null")], now=t0 + 1) == []
    (second,) = store.claim("w1", ["default"], 1, TTL, now=t0 + 1)
    assert second.id == running
    assert store.claim("w1", ["default"], 10, TTL, now=t0 + 2) == []
    assert [must_get(store, i).status for i in (cancelled, done, running)] == [
        "cancelled",
        "done",
        "running",
    ]


def test_claim_limit_zero_claims_nothing(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0)
    assert store.claim("w1", ["default"], 0, TTL, now=t0) == []
    assert must_get(store, job_id).status == "pending"


def test_expired_lease_is_not_claimable_until_reaped(store: Store, t0: float) -> None:
    job_id = enqueue_one(store, t0)
    store.claim("w1", ["default"], 1, 10, now=t0)
    before = must_get(store, job_id)
    assert store.claim("w2", ["default"], 1, 10, now=t0 + 100) == [], "only pending is claimed"
    assert must_get(store, job_id) == before
    store.reap_expired(now=t0 + 100)
    (again,) = store.claim("w2", ["default"], 1, 10, now=t0 + 100)
    assert (again.id, again.attempt, again.locked_by) == (job_id, 2, "w2")


def test_a_cancel_request_during_an_attempt_ends_the_job_not_the_next_attempt(
    store: Store, t0: float
) -> None:
    # A request made during attempt 1 sticks (base.py): when attempt 1 stalls and is reaped,
    # the job ends cancelled instead of being claimed again with the request forgotten.
    # (A dead-letter retry clears the request: tests/contract/test_rules.py.)
    job_id = enqueue_one(store, t0, queue="c")
    assert [j.id for j in store.claim("w1", ["c"], 1, 10, now=t0)] == [job_id]
    assert store.cancel(job_id, now=t0 + 1) == "requested"
    assert [r.job_id for r in store.reap_expired(now=t0 + 20)] == [job_id]
    assert store.claim("w2", ["c"], 1, 10, now=t0 + 21) == []
    assert must_get(store, job_id).status == "cancelled"


@pytest.mark.parametrize("connections", ["own", "shared"])
def test_concurrent_claimers_never_share_a_job(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]], connections: str
) -> None:
    """8 threads, each with its own connection (or all sharing the one thread-safe store)."""
    ids = store.enqueue([new_job(payload=f"[[{i}], {{}}]") for i in range(200)], now=t0)
    workers = other_stores(8) if connections == "own" else [store] * 8

    def claimer(n: int, s: Store) -> list[JobRecord]:
        got: list[JobRecord] = []
        while True:
            batch = transient(lambda: s.claim(f"w{n}", ["default"], 3, TTL, now=t0 + 1))
            if not batch:
                return got
            got += batch

    results = run_concurrently([partial(claimer, n, s) for n, s in enumerate(workers)])
    claimed = [job.id for got in results for job in got]
    dupes = [i for i, c in Counter(claimed).items() if c > 1]
    assert dupes == [], f"jobs claimed more than once: {dupes}"
    assert sorted(claimed) == ids, "together the claimers took every job"
    for n, got in enumerate(results):
        for job in got:
            assert job.locked_by == f"w{n}"
            assert job.attempt == 1
    for job in store.list_jobs(limit=1000):
        assert job.status == "running"
        assert job.attempt == 1
    owners = {job.id: job.locked_by for got in results for job in got}
    assert {j.id: j.locked_by for j in store.list_jobs(limit=1000)} == owners
