"""prune: deletes old terminal jobs of one status, up to a limit."""

from __future__ import annotations

import pytest

from tests.contract.helpers import enqueue_one, must_get, running_job
from tether.stores import JobStatus, Outcome, Store


def _done(store: Store, now: float) -> int:
    job = running_job(store, now)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=now) == []
    return job.id


def _failed(store: Store, now: float) -> int:
    job = running_job(store, now)
    assert store.finish([Outcome(job.lease, "dead", error="x", reason="error")], now=now) == []
    return job.id


def _cancelled(store: Store, now: float) -> int:
    job_id = enqueue_one(store, now)
    assert store.cancel(job_id, now=now) == "cancelled"
    return job_id


def test_prune_deletes_only_old_jobs_of_the_status(store: Store, t0: float) -> None:
    old_done = _done(store, t0 + 10)
    new_done = _done(store, t0 + 20)
    old_failed = _failed(store, t0 + 10)
    old_cancelled = _cancelled(store, t0 + 10)
    pending = enqueue_one(store, t0)
    running = running_job(store, t0, ttl=1000).id

    # cutoff = now - older_than = t0 + 15
    assert store.prune("done", 100, now=t0 + 115) == 1
    assert store.get_job(old_done) is None
    for job_id in (new_done, old_failed, old_cancelled, pending, running):
        must_get(store, job_id)

    assert store.prune("failed", 100, now=t0 + 115) == 1
    assert store.get_job(old_failed) is None
    assert store.prune("cancelled", 100, now=t0 + 115) == 1
    assert store.get_job(old_cancelled) is None

    assert store.prune("done", 100, now=t0 + 115) == 0
    must_get(store, new_done)
    assert store.prune("done", 100, now=t0 + 125) == 1
    assert store.get_job(new_done) is None
    assert sorted(j.id for j in store.list_jobs()) == sorted([pending, running])


def test_prune_never_deletes_live_jobs(store: Store, t0: float) -> None:
    pending = enqueue_one(store, t0)
    running = running_job(store, t0, ttl=10_000).id
    statuses: tuple[JobStatus, ...] = ("done", "failed", "cancelled")
    for status in statuses:
        assert store.prune(status, 0, now=t0 + 5000) == 0
    must_get(store, pending)
    must_get(store, running)


def test_prune_respects_limit(store: Store, t0: float) -> None:
    ids = [_done(store, t0 + i) for i in range(5)]
    assert store.prune("done", 10, now=t0 + 100, limit=2) == 2
    assert sum(store.get_job(i) is None for i in ids) == 2
    assert store.prune("done", 10, now=t0 + 100, limit=10) == 3
    assert all(store.get_job(i) is None for i in ids)
    assert store.prune("done", 10, now=t0 + 100) == 0


def test_prune_refuses_a_live_or_unknown_status_on_every_store(store: Store, t0: float) -> None:
    """One rule: a status prune cannot delete is bad input, the same ValueError everywhere
    (it was a ValueError on SQLite, a ConfigError on PostgreSQL and a silent 0 on Redis)."""
    pending = enqueue_one(store, t0)
    running = running_job(store, t0, ttl=10_000).id
    done = _done(store, t0)
    for status in ("pending", "running", "bogus", ""):
        with pytest.raises(ValueError, match=r"prune deletes only done, failed or cancelled "
                                             r"jobs, not '.*'") as info:
            store.prune(status, 0, now=t0 + 5000)  # type: ignore[arg-type]
        assert type(info.value) is ValueError, "bad input, not a setting to change"
    for job_id in (pending, running, done):
        must_get(store, job_id)
