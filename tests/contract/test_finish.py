"""finish: every outcome kind, the counting rules, and fencing of stale outcomes."""

from __future__ import annotations

import pytest

from tests.contract.helpers import (
    at,
    claim_one,
    errors_of,
    must_get,
    new_job,
    running_job,
    stale,
)
from tether.stores import Lease, Outcome, OutcomeKind, Store


def test_done_stores_result_and_clears_the_lease(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    result = '{"answer": 42,  "list": [1, 2]}'
    assert store.finish([Outcome(job.lease, "done", result=result)], now=t0 + 5) == []
    after = must_get(store, job.id)
    assert after.status == "done"
    assert after.result == result
    assert after.finished_at == at(t0 + 5)
    assert after.locked_by is None
    assert after.lease_until is None
    assert after.attempt == 1
    assert after.failures == 0
    assert after.failure_reason is None
    assert after.last_error is None
    assert errors_of(after) == []


def test_empty_finish(store: Store, t0: float) -> None:
    assert store.finish([], now=t0) == []


def test_error_retries_until_the_attempt_budget_is_spent(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=3)
    queue = job.queue
    lease = job.lease
    for n in (1, 2):
        now = t0 + n * 100
        outcome = Outcome(lease, "error", error=f"boom {n}", reason="error", retry_delay=30)
        assert store.finish([outcome], now=now) == []
        after = must_get(store, job.id)
        assert after.status == "pending"
        assert after.run_at == at(now + 30)
        assert after.failures == n
        assert after.stall_count == 0
        assert after.attempt == n
        assert after.last_error == f"boom {n}"
        assert after.failure_reason is None
        assert after.locked_by is None
        assert after.lease_until is None
        records = errors_of(after)
        assert [(r["attempt"], r["error"]) for r in records] == [
            (i, f"boom {i}") for i in range(1, n + 1)
        ]
        assert records[-1]["at"] == at(now)
        assert set(records[-1]) >= {"attempt", "error", "reason", "at"}
        assert records[-1]["reason"] == "error"

        assert store.claim("w1", [queue], 1, 30, now=now + 29) == [], "not due before run_at"
        lease = claim_one(store, "w1", queue, now + 31).lease
        assert lease.attempt == n + 1

    outcome = Outcome(lease, "error", error="boom 3", reason="timeout", retry_delay=30)
    assert store.finish([outcome], now=t0 + 300) == []
    after = must_get(store, job.id)
    assert after.status == "failed"
    assert after.failure_reason == "timeout"
    assert after.failures == 3
    assert after.attempt == 3
    assert after.last_error == "boom 3"
    assert after.finished_at == at(t0 + 300)
    assert after.locked_by is None
    assert after.lease_until is None
    assert [r["error"] for r in errors_of(after)] == ["boom 1", "boom 2", "boom 3"]
    assert store.claim("w1", [queue], 1, 30, now=t0 + 1000) == []


def test_max_attempts_one_fails_on_the_first_error(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=1)
    out = Outcome(job.lease, "error", error="e", reason="error", retry_delay=5)
    assert store.finish([out], now=t0 + 1) == []
    after = must_get(store, job.id)
    assert (after.status, after.failure_reason, after.failures) == ("failed", "error", 1)


def test_stalls_count_toward_max_attempts_on_error(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10, max_attempts=2, max_stalls=5)
    (reaped,) = store.reap_expired(now=t0 + 20)
    assert reaped.status == "pending"
    lease = claim_one(store, "w1", job.queue, t0 + 21).lease
    out = Outcome(lease, "error", error="e", reason="error", retry_delay=1)
    assert store.finish([out], now=t0 + 22) == []
    after = must_get(store, job.id)
    assert (after.failures, after.stall_count) == (1, 1)
    assert after.status == "failed"
    assert after.failure_reason == "error"


def test_dead_fails_at_once(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=10)
    out = Outcome(job.lease, "dead", error="no such task", reason="unknown_task")
    assert store.finish([out], now=t0 + 3) == []
    after = must_get(store, job.id)
    assert after.status == "failed"
    assert after.failure_reason == "unknown_task"
    assert after.failures == 1
    assert after.last_error == "no such task"
    assert after.finished_at == at(t0 + 3)
    assert after.locked_by is None
    assert after.lease_until is None
    assert [r["error"] for r in errors_of(after)] == ["no such task"]


def test_cancelled_outcome(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    assert store.finish([Outcome(job.lease, "cancelled")], now=t0 + 4) == []
    after = must_get(store, job.id)
    assert after.status == "cancelled"
    assert after.finished_at == at(t0 + 4)
    assert after.locked_by is None
    assert after.lease_until is None
    assert after.failures == 0


def test_released_hands_the_job_back(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=10, max_attempts=5)
    # give it a failure and a stall first, which a release must not touch
    store.reap_expired(now=t0 + 20)
    lease = claim_one(store, "w1", job.queue, t0 + 21).lease
    store.finish([Outcome(lease, "error", error="e", reason="error")], now=t0 + 22)
    lease = claim_one(store, "w1", job.queue, t0 + 23).lease
    before = must_get(store, job.id)
    assert (before.failures, before.stall_count, before.attempt) == (1, 1, 3)

    assert store.finish([Outcome(lease, "released")], now=t0 + 30) == []
    after = must_get(store, job.id)
    assert after.status == "pending"
    assert after.run_at == at(before.run_at), "a released job keeps its run_at"
    assert after.interruptions == 1
    assert (after.failures, after.stall_count, after.attempt) == (1, 1, 3)
    assert after.failure_reason is None
    assert after.locked_by is None
    assert after.lease_until is None
    again = claim_one(store, "w2", job.queue, t0 + 30)
    assert again.attempt == 4


def test_released_job_keeps_its_place_in_line(store: Store, t0: float) -> None:
    (first,) = store.enqueue([new_job(queue="line")], now=t0)
    (claimed,) = store.claim("w1", ["line"], 1, 30, now=t0)
    backlog = store.enqueue([new_job(queue="line") for _ in range(3)], now=t0 + 5)
    assert store.finish([Outcome(claimed.lease, "released")], now=t0 + 10) == []
    assert must_get(store, first).run_at == at(t0)
    order = [j.id for j in store.claim("w2", ["line"], 1, 30, now=t0 + 10)]
    order += [j.id for j in store.claim("w2", ["line"], 1, 30, now=t0 + 10)]
    assert order == [first, backlog[0]], "the handed-back job goes first, not to the back"


def test_released_and_cancelled_record_a_given_error(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    out = Outcome(job.lease, "released", error="worker shutting down")
    assert store.finish([out], now=t0 + 1) == []
    after = must_get(store, job.id)
    assert (after.status, after.failures, after.failure_reason) == ("pending", 0, None)
    assert after.last_error == "worker shutting down"
    assert [(r["attempt"], r["error"]) for r in errors_of(after)] == [(1, "worker shutting down")]

    lease = claim_one(store, "w1", job.queue, t0 + 2).lease
    assert store.finish([Outcome(lease, "cancelled", error="stopped")], now=t0 + 3) == []
    after = must_get(store, job.id)
    assert after.status == "cancelled"
    assert after.last_error == "stopped"
    assert [r["error"] for r in errors_of(after)] == ["worker shutting down", "stopped"]


def test_stale_outcomes_are_rejected_and_change_nothing(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1")
    before = must_get(store, job.id)
    wrong_attempt = stale(job.lease, attempt=2)
    wrong_owner = stale(job.lease, owner="w2")
    kinds: tuple[OutcomeKind, ...] = ("done", "error", "dead", "cancelled", "released",
                                      "stalled")
    for kind in kinds:
        outcomes = [
            Outcome(wrong_attempt, kind, result="1", error="x", reason="error"),
            Outcome(wrong_owner, kind, result="1", error="x", reason="error"),
        ]
        rejected = store.finish(outcomes, now=t0 + 1)
        assert sorted(rejected, key=repr) == sorted([wrong_attempt, wrong_owner], key=repr)
        assert must_get(store, job.id) == before, kind


def test_outcome_for_a_job_no_longer_running_is_rejected(store: Store, t0: float) -> None:
    job = running_job(store, t0)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 1) == []
    before = must_get(store, job.id)
    late_kinds: tuple[OutcomeKind, ...] = ("error", "released", "cancelled", "stalled")
    for kind in late_kinds:
        out = Outcome(job.lease, kind, result="2", error="late", reason="error")
        assert store.finish([out], now=t0 + 2) == [job.lease]
        assert must_get(store, job.id) == before
    # The holder's own "done" again is a replay of what landed (test_replay.py): reported as
    # accepted, and it changes nothing either.
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 3) == []
    assert must_get(store, job.id) == before


def test_mixed_finish_batch(store: Store, t0: float) -> None:
    good = running_job(store, t0, owner="w1")
    bad = running_job(store, t0, owner="w1")
    bad_before = must_get(store, bad.id)
    wrong = stale(bad.lease, attempt=7)
    rejected = store.finish(
        [Outcome(good.lease, "done", result="1"), Outcome(wrong, "done", result="2")],
        now=t0 + 1,
    )
    assert rejected == [wrong]
    assert must_get(store, good.id).status == "done"
    assert must_get(store, bad.id) == bad_before


def test_self_zombie_is_fenced_by_attempt(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="W", ttl=10)
    first = job.lease
    (reaped,) = store.reap_expired(now=t0 + 20)
    assert (reaped.job_id, reaped.attempt, reaped.owner) == (job.id, 1, "W")
    second = claim_one(store, "W", job.queue, t0 + 21, ttl=10).lease
    assert (second.job_id, second.attempt, second.owner) == (job.id, 2, "W")
    assert second.token != first.token, "every claim draws a new token"
    before = must_get(store, job.id)

    assert store.finish([Outcome(first, "done", result='"zombie"')], now=t0 + 22) == [first]
    assert must_get(store, job.id) == before, "the attempt-1 outcome must not touch the job"

    assert store.finish([Outcome(second, "done", result='"real"')], now=t0 + 23) == []
    after = must_get(store, job.id)
    assert after.status == "done"
    assert after.result == '"real"'


def test_complete_after_reap_and_reclaim_by_another_worker(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10)
    store.reap_expired(now=t0 + 20)
    theirs = claim_one(store, "w2", job.queue, t0 + 21).lease
    before = must_get(store, job.id)
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 22) == [job.lease]
    assert must_get(store, job.id) == before
    assert store.finish([Outcome(theirs, "done", result="2")], now=t0 + 23) == []
    assert must_get(store, job.id).result == "2"


def test_complete_after_reap_without_reclaim_is_rejected(store: Store, t0: float) -> None:
    job = running_job(store, t0, owner="w1", ttl=10)
    store.reap_expired(now=t0 + 20)
    before = must_get(store, job.id)
    assert before.status == "pending"
    assert store.finish([Outcome(job.lease, "done", result="1")], now=t0 + 22) == [job.lease]
    assert must_get(store, job.id) == before


# -- stalled: the holder reports the death of the process running the handler -----------------
def test_stalled_retries_at_once_by_the_stall_rule(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=5, max_stalls=3)
    before = must_get(store, job.id)
    out = Outcome(job.lease, "stalled", error="child 42 killed by signal SIGSEGV")
    assert store.finish([out], now=t0 + 7) == []
    after = must_get(store, job.id)
    assert after.status == "pending"
    assert after.run_at == at(before.run_at), "a stalled job keeps its run_at (due at once)"
    assert (after.stall_count, after.failures, after.interruptions) == (1, 0, 0)
    assert after.attempt == 1
    assert after.failure_reason is None
    assert after.finished_at is None
    assert after.locked_by is None
    assert after.lease_until is None
    assert after.last_error == "child 42 killed by signal SIGSEGV"
    (record,) = errors_of(after)
    assert set(record) == {"attempt", "error", "reason", "at", "owner"}
    assert (record["attempt"], record["reason"], record["owner"]) == (1, "stalled", "w1")
    assert record["error"] == "child 42 killed by signal SIGSEGV"
    assert record["at"] == at(t0 + 7)
    again = claim_one(store, "w2", job.queue, t0 + 7)
    assert (again.id, again.attempt, again.stall_count) == (job.id, 2, 1)


def test_stalled_keeps_its_place_in_line(store: Store, t0: float) -> None:
    (first,) = store.enqueue([new_job(queue="sline")], now=t0)
    (claimed,) = store.claim("w1", ["sline"], 1, 30, now=t0)
    backlog = store.enqueue([new_job(queue="sline") for _ in range(2)], now=t0 + 5)
    assert store.finish([Outcome(claimed.lease, "stalled", error="died")], now=t0 + 10) == []
    order = [j.id for j in store.claim("w2", ["sline"], 1, 30, now=t0 + 10)]
    order += [j.id for j in store.claim("w2", ["sline"], 1, 30, now=t0 + 10)]
    assert order == [first, backlog[0]]


def test_stalled_dead_letters_after_max_stalls(store: Store, t0: float) -> None:
    job = running_job(store, t0, max_attempts=10, max_stalls=2)
    lease = job.lease
    assert store.finish([Outcome(lease, "stalled", error="crash 1")], now=t0 + 1) == []
    assert must_get(store, job.id).status == "pending"
    lease = claim_one(store, "w1", job.queue, t0 + 2).lease
    assert store.finish([Outcome(lease, "stalled", error="crash 2")], now=t0 + 3) == []
    after = must_get(store, job.id)
    assert after.status == "failed"
    assert after.failure_reason == "stalled"
    assert (after.stall_count, after.failures, after.attempt) == (2, 0, 2)
    assert after.finished_at == at(t0 + 3)
    assert after.last_error == "crash 2"
    assert after.locked_by is None
    assert after.lease_until is None
    assert [(r["error"], r["reason"]) for r in errors_of(after)] == [
        ("crash 1", "stalled"), ("crash 2", "stalled")]
    assert store.claim("w1", [job.queue], 1, 30, now=t0 + 100) == []


def test_stalled_shares_the_budget_with_failures_and_reaps(store: Store, t0: float) -> None:
    # max_attempts 3: one error, one reaped stall, then a stalled outcome spends the budget
    # although max_stalls (5) is not reached.
    job = running_job(store, t0, ttl=10, max_attempts=3, max_stalls=5)
    out = Outcome(job.lease, "error", error="e", reason="error", retry_delay=0)
    assert store.finish([out], now=t0 + 1) == []
    claim_one(store, "w1", job.queue, t0 + 2, ttl=10)
    (reaped,) = store.reap_expired(now=t0 + 20)
    assert (reaped.status, reaped.stall_count) == ("pending", 1)
    lease = claim_one(store, "w1", job.queue, t0 + 21).lease
    assert store.finish([Outcome(lease, "stalled", error="boom")], now=t0 + 22) == []
    after = must_get(store, job.id)
    assert (after.status, after.failure_reason) == ("failed", "stalled")
    assert (after.failures, after.stall_count, after.attempt) == (1, 2, 3)


def test_stalled_without_error_text_and_in_a_mixed_batch(store: Store, t0: float) -> None:
    crashed = running_job(store, t0, owner="w1")
    fine = running_job(store, t0, owner="w1")
    other = running_job(store, t0, owner="w1")
    wrong = stale(other.lease, owner="w9")
    rejected = store.finish([Outcome(crashed.lease, "stalled"), Outcome(wrong, "stalled"),
                             Outcome(fine.lease, "done", result="1")], now=t0 + 1)
    assert rejected == [wrong]
    after = must_get(store, crashed.id)
    assert (after.status, after.stall_count, after.last_error) == ("pending", 1, None)
    assert errors_of(after) == []
    assert must_get(store, fine.id).status == "done"
    assert must_get(store, other.id).status == "running"


def test_stalled_with_a_cancel_request_ends_cancelled(store: Store, t0: float) -> None:
    # The cancel request sticks through a stalled outcome exactly as through a reap.
    job = running_job(store, t0, max_attempts=5, max_stalls=3)
    assert store.cancel(job.id, now=t0 + 1) == "requested"
    out = Outcome(job.lease, "stalled", error="child 42 exited with code 1")
    assert store.finish([out], now=t0 + 2) == []
    after = must_get(store, job.id)
    assert after.status == "cancelled", "the request was lost: the job would run again"
    assert (after.stall_count, after.failures) == (1, 0)
    assert after.failure_reason is None
    assert after.finished_at == at(t0 + 2)
    assert after.locked_by is None and after.lease_until is None
    assert after.last_error == "child 42 exited with code 1"
    assert [(r["reason"], r["owner"]) for r in errors_of(after)] == [("stalled", "w1")]
    assert store.claim("w2", [job.queue], 1, 30, now=t0 + 100) == []


@pytest.mark.parametrize("max_stalls", [3, 1], ids=["retried", "dead-lettered"])
def test_a_replayed_stalled_outcome_is_accepted_and_counts_once(
    store: Store, t0: float, max_stalls: int
) -> None:
    job = running_job(store, t0, max_attempts=5, max_stalls=max_stalls)
    out = Outcome(job.lease, "stalled", error="child 42 killed by signal SIGKILL")
    assert store.finish([out], now=t0 + 1) == []
    before = must_get(store, job.id)
    assert before.status == ("pending" if max_stalls > 1 else "failed")
    assert store.finish([out], now=t0 + 2) == [], "our own applied outcome, replayed"
    assert must_get(store, job.id) == before
    # A different late outcome of the same claim is still rejected.
    late = Outcome(job.lease, "done", result="1")
    assert store.finish([late], now=t0 + 3) == [job.lease]
    assert must_get(store, job.id) == before


DUPLICATES: dict[str, tuple[OutcomeKind, str | None, OutcomeKind, str | None]] = {
    "same outcome twice": ("done", "1", "done", "1"),
    "done then error": ("done", "1", "error", None),
    "error then done": ("error", None, "done", "1"),
    "done then done with another result": ("done", "1", "done", "2"),
    "released then cancelled": ("released", None, "cancelled", None),
}


def _outcome(lease: Lease, kind: OutcomeKind, result: str | None) -> Outcome:
    return Outcome(lease, kind, result=result, error=None if kind == "done" else "e",
                   reason="error", retry_delay=60)


@pytest.mark.parametrize("case", sorted(DUPLICATES))
def test_one_lease_twice_in_one_finish_answers_as_a_replay_would(
    store: Store, t0: float, case: str
) -> None:
    """One rule on every store: the first outcome for a lease in a call is the one fenced and
    applied; a later outcome for the same lease in the same call changes nothing and gets the
    answer it would get sent again in a later call (accepted as a replay of what landed, or
    rejected as stale). Redis used to reject an exact copy the others accepted, PostgreSQL to
    accept an outcome of another kind the others rejected."""
    first_kind, first_result, second_kind, second_result = DUPLICATES[case]
    one_call = running_job(store, t0, max_attempts=5)
    two_calls = running_job(store, t0, max_attempts=5)

    first = _outcome(one_call.lease, first_kind, first_result)
    second = _outcome(one_call.lease, second_kind, second_result)
    together = store.finish([first, second], now=t0 + 1)

    assert store.finish([_outcome(two_calls.lease, first_kind, first_result)], now=t0 + 1) == []
    apart = store.finish([_outcome(two_calls.lease, second_kind, second_result)], now=t0 + 1)

    assert together == [one_call.lease] * len(apart), "the answer a later call gets"
    after, reference = must_get(store, one_call.id), must_get(store, two_calls.id)
    assert (after.status, after.result, after.failures, after.interruptions) == (
        reference.status, reference.result, reference.failures, reference.interruptions)
    assert len(errors_of(after)) == len(errors_of(reference)), "applied once"
