"""heartbeat: renews held leases, reports lost ones and cancel requests, touches the worker."""

from __future__ import annotations

from tests.contract.helpers import TTL, at, claim_one, must_get, running_job, stale
from tether.stores import HeartbeatResult, Outcome, Store, WorkerInfo


def test_heartbeat_renews_a_held_lease(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=30)
    assert job.lease_until == at(t0 + 30)
    result = store.heartbeat("w1", [job.lease], 60.0, now=t0 + 20)
    assert result.lost == frozenset()
    assert result.cancel_requested == frozenset()
    after = must_get(store, job.id)
    assert after.lease_until == at(t0 + 80)
    assert after.status == "running"
    assert after.locked_by == "w1"
    assert after.attempt == 1


def test_heartbeat_keeps_a_job_from_being_reaped(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10)
    store.heartbeat("w1", [job.lease], 10.0, now=t0 + 8)
    assert store.reap_expired(now=t0 + 15) == []
    assert must_get(store, job.id).status == "running"
    assert [r.job_id for r in store.reap_expired(now=t0 + 19)] == [job.id]


def test_stale_attempt_lease_is_lost_and_changes_nothing(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10)
    assert [r.job_id for r in store.reap_expired(now=t0 + 20)] == [job.id]
    again = claim_one(store, "w1", job.queue, t0 + 21, ttl=10)
    assert again.attempt == 2
    before = must_get(store, job.id)

    old = job.lease  # attempt 1, same owner: a self-zombie
    result = store.heartbeat("w1", [old], 100.0, now=t0 + 25)
    assert result.lost == frozenset({old})
    assert result.cancel_requested == frozenset()
    assert must_get(store, job.id) == before


def test_wrong_owner_lease_is_lost(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10)
    before = must_get(store, job.id)
    intruder = stale(job.lease, owner="w2")
    result = store.heartbeat("w2", [intruder], 100.0, now=t0 + 5)
    assert result.lost == frozenset({intruder})
    assert must_get(store, job.id) == before


def test_lease_of_a_finished_job_is_lost(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    assert store.finish([Outcome(job.lease, "done", result='"ok"')], now=t0 + 1) == []
    before = must_get(store, job.id)
    result = store.heartbeat("w1", [job.lease], TTL, now=t0 + 2)
    assert result.lost == frozenset({job.lease})
    assert must_get(store, job.id) == before
    assert before.lease_until is None


def test_lease_of_a_released_job_is_lost(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    assert store.finish([Outcome(job.lease, "released")], now=t0 + 1) == []
    before = must_get(store, job.id)
    result = store.heartbeat("w1", [job.lease], TTL, now=t0 + 2)
    assert result.lost == frozenset({job.lease})
    assert must_get(store, job.id) == before


def test_cancel_request_shows_up_in_heartbeat(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=30)
    assert store.cancel(job.id, now=t0 + 1) == "requested"
    result = store.heartbeat("w1", [job.lease], 30.0, now=t0 + 5)
    assert result.cancel_requested == frozenset({job.lease})
    assert result.lost == frozenset(), "a cancel request does not take the lease away"
    after = must_get(store, job.id)
    assert after.status == "running"
    assert after.cancel_requested is True
    assert after.lease_until == at(t0 + 35), "the lease is still renewed"


def test_mixed_heartbeat_batch(store: Store, t0: float) -> None:
    ok = running_job(store, t0, owner="w1", ttl=10)
    cancelled = running_job(store, t0, owner="w1", ttl=10)
    finished = running_job(store, t0, owner="w1", ttl=10)
    zombie = running_job(store, t0, owner="w1", ttl=10)
    others = running_job(store, t0, owner="w2", ttl=10)

    assert store.cancel(cancelled.id, now=t0 + 1) == "requested"
    assert store.finish([Outcome(finished.lease, "done", result="1")], now=t0 + 1) == []
    # zombie: reaped (everything expired at t0+10 is; renew the others first) and re-claimed
    store.heartbeat("w1", [ok.lease, cancelled.lease], 10.0, now=t0 + 9)
    store.heartbeat("w2", [others.lease], 10.0, now=t0 + 9)
    reaped = store.reap_expired(now=t0 + 12)
    assert [r.job_id for r in reaped] == [zombie.id]
    reclaimed = claim_one(store, "w1", zombie.queue, t0 + 13, ttl=10)

    snapshot_finished = must_get(store, finished.id)
    snapshot_zombie = must_get(store, zombie.id)
    snapshot_others = must_get(store, others.id)
    stolen = stale(others.lease, owner="w1")
    result = store.heartbeat(
        "w1",
        [ok.lease, cancelled.lease, finished.lease, zombie.lease, stolen],
        50.0,
        now=t0 + 15,
    )
    assert result == HeartbeatResult(
        lost=frozenset({finished.lease, zombie.lease, stolen}),
        cancel_requested=frozenset({cancelled.lease}),
    )
    assert must_get(store, ok.id).lease_until == at(t0 + 65)
    assert must_get(store, cancelled.id).lease_until == at(t0 + 65)
    assert must_get(store, finished.id) == snapshot_finished
    assert must_get(store, zombie.id) == snapshot_zombie
    assert must_get(store, zombie.id).lease_until == at(reclaimed.lease_until or 0)
    assert must_get(store, others.id) == snapshot_others


def test_empty_heartbeat_is_fine(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    before = must_get(store, job.id)
    assert store.heartbeat("w1", [], TTL, now=t0 + 1) == HeartbeatResult()
    assert must_get(store, job.id) == before


def test_heartbeat_touches_the_worker_row(store: Store, t0: float) -> None:
    info = WorkerInfo(id="w1", host="h", pid=1, queues=("default",), concurrency=2)
    store.register_worker(info, now=t0)
    job = running_job(store, t0 + 1, owner="w1")

    store.heartbeat("w1", [job.lease], TTL, now=t0 + 10)
    (seen,) = store.list_workers()
    assert seen.last_seen == at(t0 + 10)
    assert seen.started_at == at(t0)

    store.heartbeat("w1", [], TTL, now=t0 + 20)
    (seen,) = store.list_workers()
    assert seen.last_seen == at(t0 + 20), "an empty heartbeat still touches the worker row"
    assert seen.started_at == at(t0)
