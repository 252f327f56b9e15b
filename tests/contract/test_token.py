"""The per-claim token: part of every fence, random per claim, so reused ids cannot forge it.

A store that loses its data (Redis without persistence) hands out job ids again. Without a
token, a worker still holding attempt 1 of old job 1 would match attempt 1 of a *new* job 1
claimed by the same worker. The token makes each claim's fence unique across incarnations.
"""

from __future__ import annotations

from tests.contract.helpers import TTL, claim_one, must_get, running_job, stale
from tether.stores import Outcome, Store


def test_claim_grants_a_random_token_in_the_lease(store: Store, t0: float) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    assert a.lease_token and b.lease_token
    assert len(a.lease_token) >= 32, "128 random bits at least"
    assert a.lease.token == a.lease_token
    assert a.lease_token != b.lease_token
    assert must_get(store, a.id).lease_token == a.lease_token


def test_each_claim_of_a_job_gets_a_new_token(store: Store, t0: float) -> None:
    first = running_job(store, t0, ttl=10)
    store.reap_expired(now=t0 + 20)
    second = claim_one(store, "w1", first.queue, t0 + 21)
    assert (second.id, second.attempt, second.locked_by) == (first.id, 2, "w1")
    assert second.lease_token and second.lease_token != first.lease_token


def test_a_wrong_token_is_fenced_everywhere(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    forged = stale(job.lease, token="0" * 32 + f":{job.id}")
    assert forged != job.lease
    beat = store.heartbeat("w1", [forged], TTL, now=t0 + 1)
    assert beat.lost == frozenset({forged})
    assert store.save_checkpoint(forged, '"c"', now=t0 + 1) is False
    assert store.set_progress(forged, '"p"', now=t0 + 1) is False
    assert store.finish([Outcome(forged, "done", result="1")], now=t0 + 2) == [forged]
    after = must_get(store, job.id)
    assert (after.status, after.checkpoint, after.progress) == ("running", None, None)
    assert after.lease_until == job.lease_until, "a forged heartbeat renewed nothing"
    # The real holder is untouched by all of that.
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 3) == []
    assert must_get(store, job.id).status == "done"


def test_an_empty_token_does_not_match(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    bare = stale(job.lease, token="")
    assert store.heartbeat("w1", [bare], TTL, now=t0 + 1).lost == frozenset({bare})
    assert store.finish([Outcome(bare, "done", result="1")], now=t0 + 2) == [bare]


def test_token_kept_after_finish_and_cleared_by_reap(store: Store, t0: float) -> None:
    done = running_job(store, t0)
    store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 1)
    assert must_get(store, done.id).lease_token == done.lease_token
    reaped = running_job(store, t0, ttl=5)
    store.reap_expired(now=t0 + 10)
    assert must_get(store, reaped.id).lease_token is None
