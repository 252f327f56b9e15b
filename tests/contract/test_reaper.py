"""reap_expired and next_lease_expiry: expired leases go back by the stall rule, once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial

from tests.contract.helpers import (
    at,
    claim_one,
    errors_of,
    must_get,
    new_job,
    run_concurrently,
    running_job,
    transient,
)
from tether.stores import REAPED_ERROR, JobRecord, Outcome, Reaped, Store


def test_only_leases_past_the_grace_are_reaped(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10)  # lease_until = t0 + 10
    before = must_get(store, job.id)
    assert store.reap_expired(stall_grace=5, now=t0 + 9) == []
    assert store.reap_expired(stall_grace=5, now=t0 + 14) == []
    assert store.reap_expired(stall_grace=0, now=t0 + 9.5) == []
    assert must_get(store, job.id) == before
    reaped = store.reap_expired(stall_grace=5, now=t0 + 16)
    assert reaped == [Reaped(job.id, 1, "w1", "pending", 1)]


def test_reaped_job_is_pending_and_keeps_its_run_at(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10, run_at=t0 - 5)
    assert store.reap_expired(now=t0 + 20) == [Reaped(job.id, 1, "w1", "pending", 1)]
    after = must_get(store, job.id)
    assert after.status == "pending"
    assert after.run_at == at(t0 - 5), "a reaped job keeps its run_at (base.py counting rules)"
    assert after.stall_count == 1
    assert after.failures == 0
    assert after.interruptions == 0
    assert after.attempt == 1, "attempt changes only when the job is claimed again"
    assert after.last_error == REAPED_ERROR
    assert after.failure_reason is None
    assert after.locked_by is None
    assert after.lease_until is None
    assert [(r["attempt"], r["error"]) for r in errors_of(after)] == [(1, REAPED_ERROR)]

    again = claim_one(store, "w2", job.queue, t0 + 20)
    assert again.attempt == 2
    assert again.stall_count == 1


def test_reaped_job_keeps_its_place_in_line(store: Store, t0: float) -> None:
    (stalled,) = store.enqueue([new_job(queue="line")], now=t0)
    store.claim("w1", ["line"], 1, 10, now=t0)
    backlog = store.enqueue([new_job(queue="line") for _ in range(3)], now=t0 + 5)
    assert [r.job_id for r in store.reap_expired(now=t0 + 50)] == [stalled]
    order = [j.id for j in store.claim("w2", ["line"], 1, 10, now=t0 + 50)]
    order += [j.id for j in store.claim("w2", ["line"], 1, 10, now=t0 + 50)]
    assert order == [stalled, backlog[0]], "the recovered job goes first, not to the back"


def test_reaper_leaves_live_and_non_running_jobs_alone(store: Store, t0: float) -> None:
    expired = running_job(store, t0, ttl=10)
    live = running_job(store, t0, ttl=100)
    pending = store.enqueue([new_job(queue="idle")], now=t0)[0]
    done = running_job(store, t0, ttl=10)
    store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 1)
    snapshots = {i: must_get(store, i) for i in (live.id, pending, done.id)}
    assert [r.job_id for r in store.reap_expired(now=t0 + 50)] == [expired.id]
    for job_id, snap in snapshots.items():
        assert must_get(store, job_id) == snap


def test_stalls_up_to_max_stalls_then_failed(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10, max_stalls=2, max_attempts=10)
    assert store.reap_expired(now=t0 + 20) == [Reaped(job.id, 1, "w1", "pending", 1)]
    claim_one(store, "w2", job.queue, t0 + 21, ttl=10)
    assert store.reap_expired(now=t0 + 40) == [Reaped(job.id, 2, "w2", "failed", 2)]
    after = must_get(store, job.id)
    assert after.status == "failed"
    assert after.failure_reason == "stalled"
    assert after.stall_count == 2
    assert after.failures == 0
    assert after.last_error == REAPED_ERROR
    assert after.finished_at == at(t0 + 40)
    assert after.locked_by is None
    assert after.lease_until is None
    assert [r["attempt"] for r in errors_of(after)] == [1, 2]
    assert store.claim("w3", [job.queue], 1, 10, now=t0 + 100) == []


def test_max_stalls_one_fails_on_the_first_stall(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10, max_stalls=1)
    assert store.reap_expired(now=t0 + 20) == [Reaped(job.id, 1, "w1", "failed", 1)]
    assert must_get(store, job.id).failure_reason == "stalled"


def test_stalls_count_toward_max_attempts(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10, max_attempts=2, max_stalls=5)
    out = Outcome(job.lease, "error", error="e", reason="error", retry_delay=0)
    assert store.finish([out], now=t0 + 1) == []
    claim_one(store, "w1", job.queue, t0 + 2, ttl=10)
    (reaped,) = store.reap_expired(now=t0 + 30)
    assert (reaped.status, reaped.stall_count) == ("failed", 1)
    after = must_get(store, job.id)
    assert after.status == "failed"
    assert after.failure_reason == "stalled"
    assert (after.failures, after.stall_count) == (1, 1)


def test_reaper_respects_limit(store: Store, t0: float) -> None:
    ids = store.enqueue([new_job() for _ in range(5)], now=t0)
    store.claim("w1", ["default"], 5, 10, now=t0)
    first = store.reap_expired(now=t0 + 20, limit=2)
    assert len(first) == 2
    statuses = Counter(must_get(store, i).status for i in ids)
    assert statuses == Counter({"running": 3, "pending": 2})
    rest = store.reap_expired(now=t0 + 20, limit=10)
    assert len(rest) == 3
    assert sorted(r.job_id for r in first + rest) == ids
    assert all(must_get(store, i).status == "pending" for i in ids)
    assert store.reap_expired(now=t0 + 20) == []


def test_reaped_rows_report_the_old_lease(store: Store, t0: float) -> None:
    a = running_job(store, t0, owner="wa", ttl=10)
    b = running_job(store, t0, owner="wb", ttl=10, max_stalls=1)
    reaped = sorted(store.reap_expired(now=t0 + 11), key=lambda r: r.job_id)
    assert reaped == [
        Reaped(a.id, 1, "wa", "pending", 1),
        Reaped(b.id, 1, "wb", "failed", 1),
    ]


def test_concurrent_reapers_reap_each_job_once(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]]
) -> None:
    ids = store.enqueue([new_job() for _ in range(50)], now=t0)
    assert len(store.claim("w1", ["default"], 50, 10, now=t0)) == 50
    reapers = other_stores(2)

    def reap(s: Store) -> list[Reaped]:
        got: list[Reaped] = []
        while True:
            batch = transient(lambda: s.reap_expired(now=t0 + 30, limit=7))
            if not batch:
                return got
            got += batch

    results = run_concurrently([partial(reap, s) for s in reapers])
    reaped = [r.job_id for got in results for r in got]
    dupes = [i for i, c in Counter(reaped).items() if c > 1]
    assert dupes == [], f"reaped more than once: {dupes}"
    assert sorted(reaped) == ids
    for job_id in ids:
        job: JobRecord = must_get(store, job_id)
        assert (job.status, job.stall_count, job.attempt) == ("pending", 1, 1)
        assert job.locked_by is None
        assert len(errors_of(job)) == 1
    assert store.reap_expired(now=t0 + 30) == []


def test_next_lease_expiry(store: Store, t0: float) -> None:
    assert store.next_lease_expiry() is None
    store.enqueue([new_job()], now=t0)
    assert store.next_lease_expiry() is None, "pending jobs hold no lease"
    a = running_job(store, t0, ttl=50)
    b = running_job(store, t0 + 1, ttl=20)  # expires at t0 + 21: the earliest
    running_job(store, t0 + 2, ttl=40)
    assert store.next_lease_expiry() == at(t0 + 21)
    store.finish([Outcome(b.lease, "done", result="1")], now=t0 + 3)
    assert store.next_lease_expiry() == at(t0 + 42)
    store.heartbeat("w1", [a.lease], 10, now=t0 + 4)
    assert store.next_lease_expiry() == at(t0 + 14)
    store.reap_expired(now=t0 + 1000)
    assert store.next_lease_expiry() is None


def _check_last_records(store: Store, reaped: list[Reaped]) -> None:
    stamps = set()
    for r in reaped:
        after = must_get(store, r.job_id)
        record = errors_of(after)[-1]
        assert set(record) == {"attempt", "error", "reason", "at", "owner"}
        assert (record["attempt"], record["owner"]) == (r.attempt, r.owner) == (
            after.attempt, r.owner)
        assert (record["error"], record["reason"]) == (REAPED_ERROR, "stalled")
        stamps.add(record["at"])
    assert len(stamps) == 1, "one reap, one clock reading"


def test_mass_reap_records_each_jobs_own_lease(store: Store, t0: float) -> None:
    """Every error record of a mass reap names its own job's attempt and owner, with one
    timestamp, whether the batch holds many distinct leases or a few (one dead worker): the
    PostgreSQL store builds a record once per distinct (attempt, owner) pair up to 64 pairs,
    and per row beyond that."""
    few = [running_job(store, t0, owner=f"dead-{i % 2}", ttl=10) for i in range(6)]
    many = [running_job(store, t0, owner=f"gone-{i}", ttl=10) for i in range(70)]
    first = store.reap_expired(now=t0 + 11, limit=1000)
    assert sorted(r.job_id for r in first) == sorted(j.id for j in few + many)
    _check_last_records(store, first)
    for job in few:  # attempt 2, all under one owner: one distinct pair
        assert [j.id for j in store.claim("dead-0", [job.queue], 1, 10, now=t0 + 12)] == [job.id]
    second = store.reap_expired(now=t0 + 40, limit=1000)
    assert sorted(r.job_id for r in second) == sorted(j.id for j in few)
    assert {(r.attempt, r.owner) for r in second} == {(2, "dead-0")}
    _check_last_records(store, second)
    assert [len(errors_of(must_get(store, j.id))) for j in few] == [2] * len(few)
