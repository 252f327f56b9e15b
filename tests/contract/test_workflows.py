"""Workflows (issue #20): jobs enqueued with ``after`` wait for their parents (invariant 6 of
:mod:`tether.stores._contract`), on every store.

What is proved here: the initial status a child gets from its parents' statuses, bad input
refused before anything of the batch is written, the release to ``pending`` in the very write
that finishes the last parent (``run_at = max(run_at, now)``), the cancellation of waiting
descendants (``dependency_failed``) by every way a parent can end failed or cancelled, each
(parent, child) link resolving exactly once (replayed and stale finishes, a retried dead letter,
two parents ending together or concurrently, an enqueue racing its parent's finish), prune
keeping parents a child still needs, and the readers (``job_links``, ``get_jobs``, counts and
listings with ``waiting``). Time is driven through ``now=`` only, except ``purge`` (which has no
``now``: what it writes is checked against the store's clock loosely).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.contract.helpers import (
    TTL,
    at,
    claim_one,
    enqueue_one,
    errors_of,
    fresh_queue,
    must_get,
    new_job,
    run_concurrently,
    running_job,
    stale,
    transient,
)
from tether._errors import JobNotFound
from tether._limits import MAX_PAGE
from tether.stores import JobFilter, JobLinks, JobRecord, Outcome, Store

DEP = "dependency_failed"


# -- helpers ---------------------------------------------------------------------------------
def child(store: Store, now: float, *parents: int, **fields: Any) -> int:
    """Enqueue one job after ``parents`` (in a queue of its own unless given)."""
    fields.setdefault("queue", fresh_queue())
    return enqueue_one(store, now, after=tuple(parents), **fields)


def done(store: Store, job: JobRecord, now: float, result: str = "1") -> None:
    assert store.finish([Outcome(job.lease, "done", result=result)], now=now) == []


def dead(store: Store, job: JobRecord, now: float) -> None:
    out = Outcome(job.lease, "dead", error="boom", reason="error")
    assert store.finish([out], now=now) == []


def status(store: Store, job_id: int) -> str:
    return must_get(store, job_id).status


def assert_waiting(store: Store, job_id: int, n: int) -> None:
    job = must_get(store, job_id)
    assert (job.status, store.job_links(job_id).waiting_on) == ("waiting", n)
    assert job.attempt == 0 and job.finished_at is None


def assert_released(store: Store, job_id: int, run_at: float | None) -> None:
    job = must_get(store, job_id)
    assert job.status == "pending"
    assert store.job_links(job_id).waiting_on == 0
    if run_at is not None:
        assert job.run_at == at(run_at)
    assert job.attempt == 0 and job.finished_at is None and job.failure_reason is None
    assert errors_of(job) == []


def assert_dep_cancelled(
    store: Store, job_id: int, parent: int, word: str | None, now: float | None
) -> None:
    """Cancelled because ``parent`` ended ``word`` (None: the parent was deleted, the wording
    is the store's) at ``now`` (None: at the store's clock, for purge)."""
    job = must_get(store, job_id)
    assert job.status == "cancelled"
    assert job.failure_reason == DEP
    assert job.attempt == 0 and job.locked_by is None and job.started_at is None
    assert store.job_links(job_id).waiting_on == 0
    (record,) = errors_of(job)
    assert job.last_error == record["error"]
    assert record["reason"] == DEP and record["attempt"] == 0 and record["owner"] is None
    if word is None:
        assert record["error"].startswith(f"dependency_failed: job {parent} ")
    else:
        assert record["error"] == f"dependency_failed: job {parent} ended {word}"
    assert job.finished_at is not None
    assert record["at"] == at(job.finished_at)
    if now is not None:
        assert job.finished_at == at(now)


# -- enqueue: the initial status -------------------------------------------------------------
def test_after_an_unfinished_parent_waits(store: Store, t0: float) -> None:
    pending = enqueue_one(store, t0, queue=fresh_queue())
    running = running_job(store, t0)
    waiting = child(store, t0, pending)
    for parent in (pending, running.id, waiting):
        kid = child(store, t0 + 1, parent)
        assert_waiting(store, kid, 1)
        assert must_get(store, kid).run_at == at(t0 + 1)
    assert status(store, running.id) == "running"


def test_after_a_done_parent_is_pending_at_once(store: Store, t0: float) -> None:
    parent = running_job(store, t0)
    done(store, parent, t0 + 1)
    queue = fresh_queue()
    kid = child(store, t0 + 5, parent.id, queue=queue)
    assert_released(store, kid, t0 + 5)
    later = child(store, t0 + 5, parent.id, delay=50)
    assert_released(store, later, t0 + 55)
    assert claim_one(store, "w", queue, t0 + 5).id == kid


@pytest.mark.parametrize("word", ["failed", "cancelled"])
def test_after_a_failed_or_cancelled_parent_is_cancelled_at_once(
    store: Store, t0: float, word: str
) -> None:
    if word == "failed":
        parent = running_job(store, t0).id
        dead(store, must_get(store, parent), t0 + 1)
    else:
        parent = enqueue_one(store, t0)
        assert store.cancel(parent, now=t0 + 1) == "cancelled"
    queue = fresh_queue()
    kid = child(store, t0 + 5, parent, queue=queue)
    assert_dep_cancelled(store, kid, parent, word, t0 + 5)
    assert store.claim("w", [queue], 10, TTL, now=t0 + 1000) == []
    tolerant = child(store, t0 + 6, parent, allow_failure=True)
    assert_released(store, tolerant, t0 + 6)
    assert store.job_links(tolerant).allow_failure is True


def test_mixed_parents(store: Store, t0: float) -> None:
    ok = running_job(store, t0)
    done(store, ok, t0 + 1)
    bad = running_job(store, t0)
    dead(store, bad, t0 + 1)
    live = running_job(store, t0)
    assert_waiting(store, child(store, t0 + 2, ok.id, live.id), 1)
    assert_waiting(store, child(store, t0 + 2, ok.id, bad.id, live.id, allow_failure=True), 1)
    assert_released(store, child(store, t0 + 2, ok.id, bad.id, allow_failure=True), t0 + 2)
    assert_dep_cancelled(store, child(store, t0 + 2, ok.id, bad.id, live.id), bad.id,
                         "failed", t0 + 2)


def test_duplicate_parents_count_once(store: Store, t0: float) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    kid = child(store, t0 + 1, a.id, b.id, a.id, b.id)
    assert_waiting(store, kid, 2)
    assert store.job_links(kid).parents == (a.id, b.id)
    assert store.job_links(a.id).children == (kid,)
    done(store, a, t0 + 2)
    assert_waiting(store, kid, 1)
    done(store, b, t0 + 3)
    assert_released(store, kid, t0 + 3)


def test_unknown_parent_refuses_the_whole_batch(store: Store, t0: float) -> None:
    parent = running_job(store, t0)
    before = store.list_jobs(limit=1000)
    unknown = parent.id + 1000
    batch = [new_job(queue="a"), new_job(queue="b", after=(parent.id,)),
             new_job(queue="c", after=(parent.id, unknown, unknown + 1)),
             new_job(queue="d", after=(unknown + 2,))]
    with pytest.raises(JobNotFound) as info:
        store.enqueue(batch, now=t0 + 1)
    assert info.value.job_id == unknown, "the first unknown id, in batch then after order"
    assert store.list_jobs(limit=1000) == before, "nothing of the batch is written"
    assert store.job_links(parent.id).children == ()
    # An id the same batch would give out is not a parent yet: refused the same way.
    last = store.enqueue([new_job()], now=t0 + 2)[0]
    before = store.list_jobs(limit=1000)
    with pytest.raises(JobNotFound) as info:
        store.enqueue([new_job(), new_job(after=(last + 1,))], now=t0 + 3)
    assert info.value.job_id == last + 1
    assert store.list_jobs(limit=1000) == before


def test_a_unique_key_hit_links_nothing_new(store: Store, t0: float) -> None:
    p = running_job(store, t0)
    q = running_job(store, t0)
    kid = child(store, t0 + 1, p.id, unique_key="k")
    assert child(store, t0 + 2, q.id, unique_key="k") == kid
    assert enqueue_one(store, t0 + 2, unique_key="k") == kid, "a waiting job holds its key"
    assert store.job_links(kid).parents == (p.id,)
    assert store.job_links(q.id).children == ()
    assert_waiting(store, kid, 1)
    done(store, q, t0 + 3)
    assert_waiting(store, kid, 1)
    done(store, p, t0 + 4)
    assert_released(store, kid, t0 + 4)


def test_a_replayed_enqueue_links_once(store: Store, t0: float) -> None:
    p = running_job(store, t0)
    batch = [new_job(after=(p.id,)), new_job(after=(p.id,), allow_failure=True)]
    ids = store.enqueue(batch, now=t0 + 1, request_id="wf-1")
    assert store.enqueue(batch, now=t0 + 2, request_id="wf-1") == ids
    assert store.job_links(p.id).children == tuple(sorted(ids))
    assert len(store.list_jobs(status="waiting", limit=1000)) == 2
    done(store, p, t0 + 3)
    for kid in ids:
        assert_released(store, kid, t0 + 3)


# -- release ---------------------------------------------------------------------------------
def test_release_in_the_finish_of_the_last_parent(store: Store, t0: float) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    queue = fresh_queue()
    kid = child(store, t0 + 1, a.id, b.id, queue=queue)
    late = child(store, t0 + 1, a.id, b.id, delay=100)
    assert store.claim("w", [queue], 10, TTL, now=t0 + 1000) == [], "waiting is never claimed"
    done(store, a, t0 + 5)
    assert_waiting(store, kid, 1)
    done(store, b, t0 + 7)
    assert_released(store, kid, t0 + 7)
    assert_released(store, late, t0 + 101)
    assert store.claim("w", [queue], 10, TTL, now=t0 + 6.9) == []
    assert claim_one(store, "w", queue, t0 + 7).id == kid


@pytest.mark.parametrize("second", ["done", "dead"])
def test_two_parents_in_one_finish(store: Store, t0: float, second: str) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    kid = child(store, t0 + 1, a.id, b.id)
    tolerant = child(store, t0 + 1, a.id, b.id, allow_failure=True)
    outcomes = [Outcome(a.lease, "done", result="1"),
                Outcome(b.lease, "done", result="2") if second == "done"
                else Outcome(b.lease, "dead", error="boom", reason="error")]
    assert store.finish(outcomes, now=t0 + 5) == []
    if second == "done":
        assert_released(store, kid, t0 + 5)
    else:
        assert_dep_cancelled(store, kid, b.id, "failed", t0 + 5)
    assert_released(store, tolerant, t0 + 5)


@pytest.mark.parametrize("kind", ["done", "dead"])
def test_a_parent_of_many_children(store: Store, t0: float, kind: str) -> None:
    parent = running_job(store, t0)
    queue = fresh_queue()
    kids = store.enqueue([new_job(queue=queue, after=(parent.id,)) for _ in range(500)],
                         now=t0 + 1)
    grandkids = store.enqueue([new_job(queue=queue, after=(k,)) for k in kids[:50]], now=t0 + 1)
    assert store.job_links(parent.id).children == tuple(sorted(kids))
    (done if kind == "done" else dead)(store, parent, t0 + 5)
    counts = {c.status: c.count for c in store.counts() if c.queue == queue and c.count}
    if kind == "done":
        assert counts == {"pending": 500, "waiting": 50}
        assert {j.id for j in store.list_jobs(status="pending", queue=queue, limit=1000)} \
            == set(kids)
    else:
        assert counts == {"cancelled": 550}
        for job in store.get_jobs(kids + grandkids):
            assert (job.failure_reason, job.finished_at) == (DEP, at(t0 + 5))


def test_a_long_chain_is_cancelled_in_one_write(store: Store, t0: float) -> None:
    root = running_job(store, t0)
    chain = [root.id]
    for _ in range(100):
        chain.append(child(store, t0 + 1, chain[-1]))
    dead(store, root, t0 + 5)
    for parent, kid in itertools.pairwise(chain):
        assert_dep_cancelled(store, kid, parent, "failed" if parent == root.id else "cancelled",
                             t0 + 5)


# -- failure propagation ---------------------------------------------------------------------
End = Callable[[float], None]


def ending_parent(store: Store, t0: float, how: str) -> tuple[int, str, End]:
    """A parent and the way it ends: (its id, the word the child's error names its end with
    ("" when it is deleted: the wording is the store's), a call that ends it at a time)."""
    queue = fresh_queue()
    if how in ("cancel_pending", "purge"):
        pid = enqueue_one(store, t0, queue=queue)
        if how == "purge":
            return pid, "", lambda now: _expect(store.purge(queue, ["pending"]), 1)
        return pid, "cancelled", lambda now: _expect(store.cancel(pid, now=now), "cancelled")
    if how in ("cancel_waiting", "purge_waiting"):
        root = enqueue_one(store, t0, queue=fresh_queue())
        pid = child(store, t0, root, queue=queue)
        if how == "purge_waiting":
            return pid, "", lambda now: _expect(store.purge(queue, ["waiting"]), 1)
        return pid, "cancelled", lambda now: _expect(store.cancel(pid, now=now), "cancelled")
    job = running_job(store, t0, queue=queue, ttl=5.0, max_attempts=1, max_stalls=1)
    outcome = {
        "error": Outcome(job.lease, "error", error="boom", reason="error", retry_delay=1),
        "dead": Outcome(job.lease, "dead", error="boom", reason="error"),
        "cancelled_outcome": Outcome(job.lease, "cancelled"),
        "stalled_outcome": Outcome(job.lease, "stalled", error="lost", reason="stalled"),
    }.get(how)
    if outcome is not None:
        word = "cancelled" if how == "cancelled_outcome" else "failed"
        return job.id, word, lambda now: _expect(store.finish([outcome], now=now), [])
    assert how == "reaped"
    return job.id, "failed", lambda now: _expect(
        [(r.job_id, r.status) for r in store.reap_expired(now=now)], [(job.id, "failed")])


def _expect(got: object, wanted: object) -> None:
    assert got == wanted


HOWS = ["error", "dead", "cancelled_outcome", "stalled_outcome", "reaped", "cancel_pending",
        "cancel_waiting", "purge", "purge_waiting"]


@pytest.mark.parametrize("how", HOWS)
def test_failure_propagates_through_three_levels(store: Store, t0: float, how: str) -> None:
    parent, word, end = ending_parent(store, t0, how)
    other = running_job(store, t0, ttl=1000)
    c = child(store, t0 + 1, parent)
    g = child(store, t0 + 1, c)
    h = child(store, t0 + 1, g)
    g2 = child(store, t0 + 1, c, other.id)
    tolerant_queue = fresh_queue()
    tolerant = child(store, t0 + 1, parent, allow_failure=True, queue=tolerant_queue)
    tolerant_kid = child(store, t0 + 1, tolerant)
    bystander = child(store, t0 + 1, other.id)
    end(t0 + 10)
    purged = how.startswith("purge")
    now = None if purged else t0 + 10
    assert_dep_cancelled(store, c, parent, None if purged else word, now)
    for kid, its_parent in ((g, c), (h, g), (g2, c)):
        assert_dep_cancelled(store, kid, its_parent, "cancelled", now)
    assert_released(store, tolerant, None if purged else t0 + 10)
    assert_waiting(store, tolerant_kid, 1)
    assert_waiting(store, bystander, 1)
    assert must_get(store, other.id).status == "running"
    claim_one(store, "w", tolerant_queue, t0 + 11)
    # The other parent of g2 ending later changes nothing on g2: it is no longer waiting.
    before = must_get(store, g2)
    done(store, other, t0 + 20)
    assert must_get(store, g2) == before
    assert_released(store, bystander, t0 + 20)


@pytest.mark.parametrize("how", ["error_with_retries", "released", "snoozed", "stalled",
                                 "reaped_pending", "cancel_requested"])
def test_an_attempt_that_does_not_end_the_parent_touches_nothing(
    store: Store, t0: float, how: str
) -> None:
    parent = running_job(store, t0, ttl=5.0, max_attempts=5, max_stalls=5)
    kid = child(store, t0 + 1, parent.id)
    lease = parent.lease
    outcome = {
        "error_with_retries": Outcome(lease, "error", error="e", reason="error", retry_delay=1),
        "released": Outcome(lease, "released"),
        "snoozed": Outcome(lease, "snoozed", retry_delay=1),
        "stalled": Outcome(lease, "stalled", error="lost", reason="stalled"),
    }.get(how)
    if outcome is not None:
        assert store.finish([outcome], now=t0 + 2) == []
    elif how == "reaped_pending":
        assert [r.status for r in store.reap_expired(now=t0 + 10)] == ["pending"]
    else:
        assert store.cancel(parent.id, now=t0 + 2) == "requested"
    assert status(store, parent.id) in ("pending", "running")
    assert_waiting(store, kid, 1)


def test_an_explicitly_cancelled_child_stays_cancelled(store: Store, t0: float) -> None:
    parent = running_job(store, t0)
    kid = child(store, t0 + 1, parent.id)
    grandkid = child(store, t0 + 1, kid)
    assert store.cancel(kid, now=t0 + 2) == "cancelled"
    cancelled = must_get(store, kid)
    assert (cancelled.status, cancelled.failure_reason) == ("cancelled", None)
    assert cancelled.finished_at == at(t0 + 2)
    assert store.job_links(kid).waiting_on == 0
    assert_dep_cancelled(store, grandkid, kid, "cancelled", t0 + 2)
    done(store, parent, t0 + 3)
    assert must_get(store, kid) == cancelled


# -- each link resolves once -----------------------------------------------------------------
def test_replayed_finishes_resolve_nothing_more(store: Store, t0: float) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    kid = child(store, t0 + 1, a.id, b.id, queue=(queue := fresh_queue()))
    out_a = Outcome(a.lease, "done", result="1")
    assert store.finish([out_a, out_a], now=t0 + 2) == []
    assert_waiting(store, kid, 1)
    assert store.finish([out_a], now=t0 + 3) == [], "a replay is not rejected..."
    assert_waiting(store, kid, 1)  # ...and resolves nothing
    out_b = Outcome(b.lease, "done", result="2")
    assert store.finish([out_b], now=t0 + 4) == []
    assert_released(store, kid, t0 + 4)
    running = claim_one(store, "w", queue, t0 + 5)
    assert store.finish([out_b, out_a], now=t0 + 6) == []
    assert must_get(store, kid) == running


def test_a_stale_finish_resolves_nothing(store: Store, t0: float) -> None:
    parent = running_job(store, t0, ttl=10, max_stalls=5)
    kid = child(store, t0 + 1, parent.id)
    store.reap_expired(now=t0 + 20)
    again = claim_one(store, "w2", parent.queue, t0 + 21)
    for zombie in (parent.lease, stale(again.lease, token="forged")):
        out = Outcome(zombie, "done", result="late")
        assert store.finish([out], now=t0 + 22) == [zombie]
        dead_out = Outcome(zombie, "dead", error="x", reason="error")
        assert store.finish([dead_out], now=t0 + 22) == [zombie]
        assert_waiting(store, kid, 1)
    done(store, again, t0 + 23)
    assert_released(store, kid, t0 + 23)


def test_a_zombie_of_a_reaped_parent_resolves_nothing(store: Store, t0: float) -> None:
    parent = running_job(store, t0, ttl=10, max_stalls=1)
    tolerant = child(store, t0 + 1, parent.id, allow_failure=True)
    strict = child(store, t0 + 1, parent.id)
    store.reap_expired(now=t0 + 20)
    assert_released(store, tolerant, t0 + 20)
    assert_dep_cancelled(store, strict, parent.id, "failed", t0 + 20)
    before = [must_get(store, tolerant), must_get(store, strict)]
    out = Outcome(parent.lease, "done", result="late")
    assert store.finish([out], now=t0 + 21) == [parent.lease]
    assert [must_get(store, tolerant), must_get(store, strict)] == before


def test_a_retried_dead_letter_ending_again_touches_no_child(store: Store, t0: float) -> None:
    a = running_job(store, t0)
    b = running_job(store, t0)
    strict = child(store, t0 + 1, a.id)
    tolerant = child(store, t0 + 1, a.id, b.id, allow_failure=True)
    dead(store, a, t0 + 2)
    assert_dep_cancelled(store, strict, a.id, "failed", t0 + 2)
    assert_waiting(store, tolerant, 1)
    cancelled = must_get(store, strict)
    # Dead-lettered again, then retried once more and done: neither end touches a child.
    for n, end in enumerate((dead, done)):
        assert store.retry_failed([a.id], now=t0 + 10 * n + 3).retried == 1
        end(store, claim_one(store, "w", a.queue, t0 + 10 * n + 4), t0 + 10 * n + 5)
        assert_waiting(store, tolerant, 1)
        assert must_get(store, strict) == cancelled
    assert status(store, a.id) == "done"
    done(store, b, t0 + 50)
    assert_released(store, tolerant, t0 + 50)


# -- concurrency -----------------------------------------------------------------------------
ROUNDS = 25


def test_parents_finishing_at_once_release_the_child_once(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]]
) -> None:
    """Two parents of one child (and of one allow_failure child, one failing), each finished
    on its own connection at the same moment, round after round: every child is resolved,
    never left waiting."""
    mine = other_stores(2)
    for n in range(ROUNDS):
        now = t0 + n
        queue = fresh_queue()
        store.enqueue([new_job(queue=queue), new_job(queue=queue)], now=now)
        a, b = store.claim("w", [queue], 2, TTL, now=now)
        kid = child(store, now, a.id, b.id)
        tolerant = child(store, now, a.id, b.id, allow_failure=True)
        outs = [Outcome(a.lease, "done", result="1"),
                Outcome(b.lease, "done", result="2") if n % 2 else
                Outcome(b.lease, "dead", error="boom", reason="error")]
        run_concurrently([
            partial(transient, partial(s.finish, [o], now=now + 0.5))
            for s, o in zip(mine, outs, strict=True)
        ])
        if n % 2:
            assert_released(store, kid, now + 0.5)
        else:
            assert_dep_cancelled(store, kid, b.id, "failed", now + 0.5)
        assert_released(store, tolerant, now + 0.5)


def test_an_enqueue_racing_its_parents_finish_never_waits_forever(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]]
) -> None:
    """The child is enqueued while its parent's finish runs on another connection: whichever
    goes first, the child ends pending (released, or inserted pending), never waiting."""
    producer, worker = other_stores(2)
    for n in range(ROUNDS):
        now = t0 + n
        parent = running_job(store, now)
        finish = partial(worker.finish, [Outcome(parent.lease, "done", result="1")], now=now + 0.5)
        enqueue = partial(producer.enqueue, [new_job(after=(parent.id,))], now=now + 0.5)
        calls: list[Callable[[], list[Any]]] = [partial(transient, finish),
                                                 partial(transient, enqueue)]
        rejected, (kid,) = run_concurrently(calls)
        assert rejected == []
        assert_released(store, kid, now + 0.5)


# -- prune and purge -------------------------------------------------------------------------
def test_prune_keeps_a_parent_a_child_still_needs(store: Store, t0: float) -> None:
    needed = running_job(store, t0)
    other = running_job(store, t0)
    free = [running_job(store, t0) for _ in range(2)]
    tolerant_parent = running_job(store, t0)
    queue, tolerant_queue = fresh_queue(), fresh_queue()
    kid = child(store, t0 + 1, needed.id, queue=queue)
    waiter = child(store, t0 + 1, needed.id, other.id)
    tolerant = child(store, t0 + 1, tolerant_parent.id, allow_failure=True, queue=tolerant_queue)
    done(store, needed, t0 + 2)
    for job in free:
        done(store, job, t0 + 3)
    dead(store, tolerant_parent, t0 + 2)
    # needed has a pending child (kid) and a waiting one (waiter): only the two free go,
    # and the kept parent does not use up the limit.
    assert store.prune("done", 10, now=t0 + 100, limit=2) == 2
    assert store.prune("done", 10, now=t0 + 100) == 0
    assert store.prune("failed", 10, now=t0 + 100) == 0, "its child is pending"
    must_get(store, needed.id)
    must_get(store, tolerant_parent.id)
    assert_released(store, tolerant, t0 + 2)
    # kid runs and ends at t0 + 50; waiter still needs the parent (cutoff t0 + 40).
    done(store, claim_one(store, "w", queue, t0 + 4), t0 + 50)
    assert store.prune("done", 60, now=t0 + 100) == 0
    assert_waiting(store, waiter, 1)
    assert store.cancel(waiter, now=t0 + 6) == "cancelled"
    assert store.prune("done", 60, now=t0 + 100) == 1
    assert store.get_job(needed.id) is None
    # A pruned parent is still listed as its children's parent; a pruned child is no one's.
    assert store.job_links(kid).parents == (needed.id,)
    assert store.job_links(waiter).parents == (needed.id, other.id)
    assert store.prune("done", 10, now=t0 + 100) == 1  # kid
    with pytest.raises(JobNotFound):
        store.job_links(kid)
    assert store.prune("cancelled", 10, now=t0 + 100) == 1  # waiter
    assert store.job_links(other.id).children == ()
    running = claim_one(store, "w", tolerant_queue, t0 + 7)
    assert store.prune("failed", 10, now=t0 + 100) == 0, "its child is running"
    done(store, running, t0 + 8)
    assert store.prune("failed", 10, now=t0 + 100) == 1


def test_purge_waiting_jobs_and_of_a_done_parent(store: Store, t0: float) -> None:
    p = running_job(store, t0)
    q = running_job(store, t0)
    queue = fresh_queue()
    w1 = child(store, t0 + 1, p.id, q.id, queue=queue)
    w2 = child(store, t0 + 1, p.id, queue=queue)
    done(store, p, t0 + 2)
    assert status(store, w2) == "pending"
    assert store.purge(p.queue, ["done"]) == 1, "purge is the operator's: no parent is kept"
    assert_waiting(store, w1, 1)
    assert store.job_links(w1).parents == (p.id, q.id)
    assert store.purge(queue, ["waiting"]) == 1
    assert store.get_job(w1) is None
    assert store.job_links(q.id).children == ()
    done(store, q, t0 + 3)
    assert status(store, w2) == "pending"


# -- readers ---------------------------------------------------------------------------------
def test_job_links(store: Store, t0: float) -> None:
    p1 = running_job(store, t0)
    p2 = running_job(store, t0)
    c1 = child(store, t0 + 1, p2.id, p1.id)
    c2 = child(store, t0 + 1, p1.id)
    c3 = child(store, t0 + 1, p1.id, allow_failure=True)
    assert store.job_links(p1.id) == JobLinks(p1.id, (), (c1, c2, c3), 0, False)
    assert store.job_links(p2.id) == JobLinks(p2.id, (), (c1,), 0, False)
    assert store.job_links(c1) == JobLinks(c1, (p2.id, p1.id), (), 2, False)
    assert store.job_links(c3) == JobLinks(c3, (p1.id,), (), 1, True)
    lone = enqueue_one(store, t0)
    assert store.job_links(lone) == JobLinks(lone)
    done(store, p1, t0 + 2)
    assert store.job_links(c1) == JobLinks(c1, (p2.id, p1.id), (), 1, False)
    assert store.job_links(c2) == JobLinks(c2, (p1.id,), (), 0, False)
    with pytest.raises(JobNotFound) as info:
        store.job_links(c3 + 1000)
    assert info.value.job_id == c3 + 1000


def test_get_jobs(store: Store, t0: float) -> None:
    a, b, c = store.enqueue([new_job("t.a"), new_job("t.b"), new_job("t.c")], now=t0)
    unknown = c + 1000
    got = store.get_jobs([c, a, unknown, c, b, a])
    assert [j.id for j in got] == [c, a, b]
    assert got == [must_get(store, i) for i in (c, a, b)]
    assert store.get_jobs([]) == []
    assert store.get_jobs([unknown]) == []
    full = [*range(unknown, unknown + MAX_PAGE - 3), a, b, c]
    assert [j.id for j in store.get_jobs(full)] == [a, b, c]
    with pytest.raises(ValueError):
        store.get_jobs([*full, unknown - 1])


def test_waiting_in_counts_listings_and_search(store: Store, t0: float) -> None:
    parent = running_job(store, t0)
    queue = fresh_queue()
    kids = store.enqueue([new_job("t.wf", queue=queue, after=(parent.id,)) for _ in range(3)],
                         now=t0 + 1)
    pending = enqueue_one(store, t0 + 1, queue=queue)
    counts = {c.status: c.count for c in store.counts() if c.queue == queue and c.count}
    assert counts == {"waiting": 3, "pending": 1}
    assert [j.id for j in store.list_jobs(status="waiting")] == kids
    assert [j.id for j in store.list_jobs(status="waiting", queue=queue, limit=2)] == kids[:2]
    found = store.search_jobs(JobFilter(status="waiting", queue=queue, newest_first=True))
    assert [j.id for j in found] == kids[::-1]
    oldest_first = JobFilter(status="waiting", task="t.wf", newest_first=False)
    assert [j.id for j in store.search_jobs(oldest_first)] == kids
    assert [j.id for j in store.claim("w", [queue], 10, TTL, now=t0 + 10_000)] == [pending]
    assert store.claim("w", [queue], 10, TTL, now=t0 + 10_000) == []
    assert all(j.status == "waiting" and j.run_at == at(t0 + 1) and j.lease_until is None
               for j in store.get_jobs(kids))
