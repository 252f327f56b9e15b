"""save_checkpoint / set_progress: fenced writes; the checkpoint outlives the attempt."""

from __future__ import annotations

from tests.contract.helpers import claim_one, must_get, running_job, stale
from tether.stores import Outcome, Store


def test_checkpoint_is_saved(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    assert store.save_checkpoint(job.lease, '{"step":  3}', now=t0 + 1) is True
    assert must_get(store, job.id).checkpoint == '{"step":  3}'
    assert store.save_checkpoint(job.lease, '{"step": 4}', now=t0 + 2) is True
    after = must_get(store, job.id)
    assert after.checkpoint == '{"step": 4}'
    assert after.status == "running"
    assert after.lease == job.lease


def test_progress_is_saved(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    assert store.set_progress(job.lease, '{"done": 10, "of": 100}', now=t0 + 1) is True
    after = must_get(store, job.id)
    assert after.progress == '{"done": 10, "of": 100}'
    assert after.checkpoint is None


def test_stale_checkpoint_and_progress_change_nothing(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1")
    assert store.save_checkpoint(job.lease, '"good"', now=t0 + 1) is True
    assert store.set_progress(job.lease, '"good"', now=t0 + 1) is True
    before = must_get(store, job.id)
    for bad in (stale(job.lease, attempt=2), stale(job.lease, owner="w2")):
        assert store.save_checkpoint(bad, '"bad"', now=t0 + 2) is False
        assert store.set_progress(bad, '"bad"', now=t0 + 2) is False
        assert must_get(store, job.id) == before


def test_checkpoint_of_a_reaped_attempt_is_fenced(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10)
    store.reap_expired(now=t0 + 20)
    claim_one(store, "w1", job.queue, t0 + 21)  # same owner, attempt 2
    before = must_get(store, job.id)
    assert store.save_checkpoint(job.lease, '"zombie"', now=t0 + 22) is False
    assert store.set_progress(job.lease, '"zombie"', now=t0 + 22) is False
    assert must_get(store, job.id) == before


def test_checkpoint_of_a_finished_job_is_fenced(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 1)
    before = must_get(store, job.id)
    assert store.save_checkpoint(job.lease, '"late"', now=t0 + 2) is False
    assert store.set_progress(job.lease, '"late"', now=t0 + 2) is False
    assert must_get(store, job.id) == before


def test_checkpoint_survives_into_the_next_attempt(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10)
    checkpoint = '{"cursor": "abc", "n": [1, 2]}'
    assert store.save_checkpoint(job.lease, checkpoint, now=t0 + 1) is True

    store.reap_expired(now=t0 + 20)  # after a stall
    second = claim_one(store, "w2", job.queue, t0 + 21)
    assert second.attempt == 2
    assert second.checkpoint == checkpoint

    out = Outcome(second.lease, "error", error="e", reason="error")
    store.finish([out], now=t0 + 22)  # after an error
    third = claim_one(store, "w3", job.queue, t0 + 23)
    assert third.checkpoint == checkpoint
    assert store.save_checkpoint(third.lease, '"newer"', now=t0 + 24) is True

    store.finish([Outcome(third.lease, "released")], now=t0 + 25)  # after a hand-back
    fourth = claim_one(store, "w4", job.queue, t0 + 26)
    assert fourth.checkpoint == '"newer"'
    assert must_get(store, job.id).checkpoint == '"newer"'
