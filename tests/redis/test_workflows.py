"""Workflows on Redis (issue 20, invariant 6): what the contract suite cannot see from outside.
The link keys (made only by workflows, gone with their jobs), replays of the scripts that
resolve links, the Lua-side input check, one script call releasing 10,000 children (and a
chord's callback over 10,000 parents), the purge order, prune's keep rule past a crowd of
kept parents, and the async producer."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from tests.redis.conftest import keys_under
from tether._errors import JobNotFound, StoreError
from tether.stores import NewJob, Outcome
from tether.stores._contract import Lease
from tether.stores._redis.store import RedisStore

TTL = 30.0
LINK_KEYS = ("parents:", "children:", "waiters:")
LINK_FIELDS = ("waiting_on", "allow_failure", "children", "waiters")


def _claim_all(store: RedisStore, now: float, queue: str = "default") -> dict[int, Lease]:
    jobs = store.claim("w", [queue], 1000, TTL, now=now)
    return {j.id: j.lease for j in jobs}


def _link_keys(raw: redis.Redis, prefix: str) -> set[str]:
    return {k for k in keys_under(raw, prefix) if k[len(prefix) + 1:].startswith(LINK_KEYS)}


def test_a_job_outside_any_workflow_writes_no_link_key_nor_field(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """The common path pays nothing: no link key is made, no workflow field is written, and
    the job's whole life (enqueue, claim, finish, prune) leaves none behind."""
    t0 = rstore.now()
    (job_id,) = rstore.enqueue([NewJob("t")], now=t0)
    leases = _claim_all(rstore, t0)
    assert rstore.finish([Outcome(leases[job_id], "done", result="1")], now=t0 + 1) == []
    fields = raw.hkeys(f"{prefix}:job:{job_id}")
    assert not set(fields) & set(LINK_FIELDS)
    assert _link_keys(raw, prefix) == set()
    assert rstore.prune("done", 0, now=t0 + 2) == 1


def test_link_keys_live_exactly_as_long_as_their_jobs(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """parents:/children: stay while their job does, waiters: goes with the write that ends
    the parent, and pruning the whole workflow leaves no link key behind."""
    t0 = rstore.now()
    a, b = rstore.enqueue([NewJob("a"), NewJob("b")], now=t0)
    (c,) = rstore.enqueue([NewJob("c", after=(a, b))], now=t0)
    assert _link_keys(raw, prefix) == {
        f"{prefix}:parents:{c}", f"{prefix}:children:{a}", f"{prefix}:children:{b}",
        f"{prefix}:waiters:{a}", f"{prefix}:waiters:{b}"}
    leases = _claim_all(rstore, t0)
    assert rstore.finish([Outcome(leases[a], "done", result="1")], now=t0 + 1) == []
    assert f"{prefix}:waiters:{a}" not in _link_keys(raw, prefix)
    assert raw.hget(f"{prefix}:job:{a}", "waiters") is None
    assert raw.hget(f"{prefix}:job:{c}", "waiting_on") == "1"
    assert rstore.finish([Outcome(leases[b], "done", result="2")], now=t0 + 1) == []
    assert rstore.get_job(c).status == "pending"  # type: ignore[union-attr]
    assert rstore.prune("done", 0, now=t0 + 2) == 0, "c still to run: its parents stay"
    (lease_c,) = _claim_all(rstore, t0 + 3).values()
    assert rstore.finish([Outcome(lease_c, "done", result="3")], now=t0 + 3) == []
    assert rstore.prune("done", 0, now=t0 + 4) == 3
    assert _link_keys(raw, prefix) == set()


def test_a_replayed_enqueue_links_nothing_twice(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """The request record answers a repeat (a lost reply): no second link, no second count."""
    t0 = rstore.now()
    (a,) = rstore.enqueue([NewJob("a")], now=t0)
    first = rstore.enqueue([NewJob("c", after=(a,))], now=t0, request_id="r1")
    again = rstore.enqueue([NewJob("c", after=(a,))], now=t0, request_id="r1")
    assert first == again
    assert raw.zrange(f"{prefix}:children:{a}", 0, -1) == [str(first[0])]
    assert raw.smembers(f"{prefix}:waiters:{a}") == {str(first[0])}
    assert raw.lrange(f"{prefix}:parents:{first[0]}", 0, -1) == [str(a)]


def test_a_replayed_finish_resolves_nothing_twice(rstore: RedisStore) -> None:
    """finish.lua sent twice (redis-py's retry after a lost reply): the second is recognised as
    applied, so a child of two parents is not released by one parent counted twice."""
    t0 = rstore.now()
    a, b = rstore.enqueue([NewJob("a"), NewJob("b")], now=t0)
    (c,) = rstore.enqueue([NewJob("c", after=(a, b))], now=t0)
    leases = _claim_all(rstore, t0)
    done_a = Outcome(leases[a], "done", result="1")
    assert rstore.finish([done_a], now=t0 + 1) == []
    assert rstore.finish([done_a, done_a], now=t0 + 2) == []  # replays: not rejected
    links = rstore.job_links(c)
    assert (rstore.get_job(c).status, links.waiting_on) == ("waiting", 1)  # type: ignore[union-attr]
    assert rstore.finish([Outcome(leases[b], "done", result="2")], now=t0 + 3) == []
    assert rstore.get_job(c).status == "pending"  # type: ignore[union-attr]


def test_two_parents_ending_in_one_batch_release_their_child_once(rstore: RedisStore) -> None:
    t0 = rstore.now()
    a, b = rstore.enqueue([NewJob("a"), NewJob("b")], now=t0)
    (c,) = rstore.enqueue([NewJob("c", after=(a, b))], now=t0 + 5)  # run_at t0 + 5
    leases = _claim_all(rstore, t0)
    outcomes = [Outcome(leases[a], "done", result="1"), Outcome(leases[b], "done", result="2")]
    assert rstore.finish(outcomes, now=t0 + 1) == []
    child = rstore.get_job(c)
    assert child is not None and child.status == "pending"
    assert child.run_at == t0 + 5, "due at max(run_at, now): its own later run_at stays"
    assert rstore.job_links(c).waiting_on == 0
    assert list(_claim_all(rstore, t0 + 5)) == [c]


def test_the_reaper_cancels_descendants_in_its_own_script(rstore: RedisStore) -> None:
    """A parent reaped to failed: its child and grandchild cancelled in that reap call."""
    t0 = rstore.now()
    (a,) = rstore.enqueue([NewJob("a", max_stalls=1)], now=t0)
    (b,) = rstore.enqueue([NewJob("b", after=(a,))], now=t0)
    (c,) = rstore.enqueue([NewJob("c", after=(b,))], now=t0)
    _claim_all(rstore, t0)
    reaped = rstore.reap_expired(now=t0 + TTL + 1)
    assert [(r.job_id, r.status) for r in reaped] == [(a, "failed")]
    got = {j.id: (j.status, j.failure_reason, j.last_error) for j in rstore.get_jobs([b, c])}
    assert got == {
        b: ("cancelled", "dependency_failed", f"dependency_failed: job {a} ended failed"),
        c: ("cancelled", "dependency_failed", f"dependency_failed: job {b} ended cancelled"),
    }


def test_a_waiting_job_is_in_no_pending_zset(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """Never claimable by construction: only its status index knows it."""
    t0 = rstore.now()
    (a,) = rstore.enqueue([NewJob("a", priority=3)], now=t0)
    (c,) = rstore.enqueue([NewJob("c", after=(a,), priority=7)], now=t0)
    assert raw.zrange(f"{prefix}:idx:default:waiting", 0, -1) == [str(c)]
    assert raw.zrange(f"{prefix}:prios:default", 0, -1) == ["3"]
    assert not raw.exists(f"{prefix}:pending:default:7")
    assert list(_claim_all(rstore, t0 + 100)) == [a]


def test_the_lua_check_refuses_a_bad_after_field_before_writing(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """The last line, for a caller that bypasses tether._limits: nothing is written."""
    fields = ["t", "[[],{}]", "default", "0", "", "0.0", "3", "3", "0", "", "0", ""]
    before = keys_under(raw, prefix)
    with pytest.raises(StoreError, match="bad after"):
        rstore._run("enqueue", "", "rid-bad", "60000", *fields, "0", "1;2")
    with pytest.raises(StoreError, match="bad allow_failure"):
        rstore._run("enqueue", "", "rid-bad", "60000", *fields, "yes", "")
    assert keys_under(raw, prefix) == before


def test_an_unknown_parent_refuses_the_whole_batch(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    t0 = rstore.now()
    (a,) = rstore.enqueue([NewJob("a")], now=t0)
    before = keys_under(raw, prefix)
    with pytest.raises(JobNotFound) as caught:
        rstore.enqueue([NewJob("x", unique_key="u"), NewJob("y", after=(a, a + 1, a + 2))],
                       now=t0, request_id="r2")
    assert caught.value.job_id == a + 1
    assert keys_under(raw, prefix) == before, "no job, no link, no request record"
    assert raw.get(f"{prefix}:ids") == str(a)


def test_a_parent_with_10000_children_releases_them_in_one_finish(rstore: RedisStore) -> None:
    """One finish script releases every child (then all claimable); it prints what it cost."""
    n = 10_000
    t0 = rstore.now()
    (p,) = rstore.enqueue([NewJob("p")], now=t0)
    (lease,) = _claim_all(rstore, t0).values()
    kids = rstore.enqueue([NewJob("c", after=(p,), queue="kids") for _ in range(n)], now=t0)
    started = time.perf_counter()
    assert rstore.finish([Outcome(lease, "done", result="1")], now=t0 + 1) == []
    took = time.perf_counter() - started
    counts = {(c.queue, c.status): c.count for c in rstore.counts()}
    assert counts[("kids", "pending")] == n and ("kids", "waiting") not in counts
    assert list(_claim_all(rstore, t0 + 1, "kids"))[:3] == kids[:3]
    print(f"finish releasing {n} children: {took * 1000:.0f} ms")


def test_a_parent_with_10000_children_cancels_them_in_one_cancel(rstore: RedisStore) -> None:
    n = 10_000
    t0 = rstore.now()
    (p,) = rstore.enqueue([NewJob("p")], now=t0)
    rstore.enqueue([NewJob("c", after=(p,), queue="kids") for _ in range(n)], now=t0)
    started = time.perf_counter()
    assert rstore.cancel(p, now=t0 + 1) == "cancelled"
    took = time.perf_counter() - started
    counts = {(c.queue, c.status): c.count for c in rstore.counts()}
    assert counts[("kids", "cancelled")] == n
    print(f"cancel cancelling {n} children: {took * 1000:.0f} ms")


def test_a_chord_callback_over_10000_parents(rstore: RedisStore) -> None:
    """MAX_AFTER parents in one job's after (RPUSH in slices); released by the last one."""
    n = 10_000
    t0 = rstore.now()
    parents = rstore.enqueue([NewJob("p") for _ in range(n)], now=t0)
    (cb,) = rstore.enqueue([NewJob("cb", after=tuple(parents), queue="cb")], now=t0)
    links = rstore.job_links(cb)
    assert links.parents == tuple(parents) and links.waiting_on == n
    leases: dict[int, Lease] = {}
    while batch := _claim_all(rstore, t0):
        leases.update(batch)
    outcomes = [Outcome(leases[p], "done", result=str(p)) for p in parents]
    assert rstore.finish(outcomes[:-1], now=t0 + 1) == []
    assert rstore.get_job(cb).status == "waiting"  # type: ignore[union-attr]
    assert rstore.finish(outcomes[-1:], now=t0 + 1) == []
    assert rstore.get_job(cb).status == "pending"  # type: ignore[union-attr]
    results = [j.result for j in rstore.get_jobs(parents)]
    assert results == [str(p) for p in parents]


def test_purging_a_queue_deletes_its_workflow_children_first(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    """Waiting jobs go first and newest first (children have higher ids than their parents),
    so a purge of a workflow's own queue cancels nothing it then deletes anyway; a child in
    another queue is cancelled, naming the purged parent."""
    t0 = rstore.now()
    (a,) = rstore.enqueue([NewJob("a", queue="q")], now=t0)
    (b,) = rstore.enqueue([NewJob("b", queue="q", after=(a,))], now=t0)
    (c,) = rstore.enqueue([NewJob("c", queue="q", after=(b,))], now=t0)
    (d,) = rstore.enqueue([NewJob("d", queue="other", after=(a,))], now=t0)
    assert rstore.purge("q", ["pending", "waiting"]) == 3
    other = rstore.get_job(d)
    assert other is not None and other.status == "cancelled"
    assert other.last_error == f"dependency_failed: job {a} was purged"
    assert rstore.get_jobs([a, b, c]) == []
    assert rstore.job_links(d).parents == (a,), "a purged parent stays listed"
    assert _link_keys(raw, prefix) == {f"{prefix}:parents:{d}"}


def test_prune_steps_over_kept_parents(rstore: RedisStore) -> None:
    """Parents kept for their unfinished children stay at the front of the prune range; the
    jobs behind them are still pruned by the same call."""
    t0 = rstore.now()
    parents = rstore.enqueue([NewJob("p") for _ in range(5)], now=t0)
    rstore.enqueue([NewJob("c", after=(p,), queue="kids") for p in parents], now=t0)
    plain = rstore.enqueue([NewJob("x") for _ in range(5)], now=t0)
    leases = _claim_all(rstore, t0)
    order = [*parents, *plain]  # the parents finish first: the front of the range
    for i, job_id in enumerate(order):
        rstore.finish([Outcome(leases[job_id], "done", result="1")], now=t0 + 1 + i)
    assert rstore.prune("done", 0, now=t0 + 100, limit=5) == 5
    left = {j.id for j in rstore.list_jobs(status="done")}
    assert left == set(parents)


def test_the_async_producer_enqueues_with_after(rstore: RedisStore) -> None:
    t0 = rstore.now()
    (a,) = rstore.enqueue([NewJob("a")], now=t0)

    async def produce() -> tuple[list[int], int]:
        producer = rstore.async_producer()
        try:
            ids = await producer.enqueue([NewJob("c", after=(a,), allow_failure=True)])
            try:
                await producer.enqueue([NewJob("d", after=(a + 100,))])
            except JobNotFound as exc:
                return ids, exc.job_id
            return ids, 0
        finally:
            await producer.aclose()

    (c,), missing = asyncio.run(produce())
    assert missing == a + 100
    links = rstore.job_links(c)
    assert (links.parents, links.waiting_on, links.allow_failure) == ((a,), 1, True)
    assert rstore.get_job(c).status == "waiting"  # type: ignore[union-attr]
