"""Flow limits at claim (issue #19): concurrency and rate per task, per key and per queue.

The rules are :meth:`tether.stores._roles.Leases.claim`'s: a slot is a ``running`` row (a live
lease) and nothing else, rate windows are the store's recorded starts, ineligible jobs never
block the jobs behind them, and keys rotate. Time is driven through ``now=`` only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial

from tests.contract.helpers import TTL, at, fresh_queue, must_get, new_job, run_concurrently
from tether.stores import FlowLimit, JobRecord, Lease, Outcome, Store

T = "tests.flow"
U = "tests.other"


def enqueue(store: Store, now: float, n: int, task: str = T, **fields: object) -> list[int]:
    return store.enqueue([new_job(task, **fields) for _ in range(n)], now=now)


def keys(jobs: list[JobRecord]) -> Counter[str | None]:
    return Counter(j.limit_key for j in jobs)


def test_limit_key_is_stored_with_the_job(store: Store, t0: float) -> None:
    keyed, plain, empty = store.enqueue(
        [new_job(T, limit_key="customer-7"), new_job(T), new_job(T, limit_key="")], now=t0)
    assert must_get(store, keyed).limit_key == "customer-7"
    assert must_get(store, plain).limit_key is None
    assert must_get(store, empty).limit_key == ""
    claimed = store.claim("w", ["default"], 10, TTL, now=t0)
    assert {j.id: j.limit_key for j in claimed} == {keyed: "customer-7", plain: None, empty: ""}


def test_no_flow_claims_as_before(store: Store, t0: float) -> None:
    enqueue(store, t0, 5, limit_key="a")
    assert len(store.claim("w", ["default"], 10, TTL, now=t0)) == 5


def test_concurrency_caps_running_jobs_of_a_task(store: Store, t0: float) -> None:
    enqueue(store, t0, 10)
    flow = [FlowLimit("task", T, concurrency=3)]
    first = store.claim("w1", ["default"], 10, TTL, now=t0, flow=flow)
    assert len(first) == 3
    assert store.claim("w2", ["default"], 10, TTL, now=t0 + 1, flow=flow) == []
    assert store.finish([Outcome(first[0].lease, "done", result="1")], now=t0 + 2) == []
    again = store.claim("w2", ["default"], 10, TTL, now=t0 + 3, flow=flow)
    assert len(again) == 1, "a finished job frees exactly its slot"
    assert store.claim("w2", ["default"], 10, TTL, now=t0 + 3, flow=flow) == []


def test_other_tasks_are_not_limited(store: Store, t0: float) -> None:
    enqueue(store, t0, 5)
    others = enqueue(store, t0 + 1, 4, task=U)
    got = store.claim("w", ["default"], 10, TTL, now=t0 + 2,
                      flow=[FlowLimit("task", T, concurrency=1)])
    assert Counter(j.task for j in got) == {T: 1, U: 4}
    assert {j.id for j in got} >= set(others)


def test_an_expired_lease_holds_its_slot_until_the_reap(store: Store, t0: float) -> None:
    enqueue(store, t0, 4)
    flow = [FlowLimit("task", T, concurrency=2)]
    held = store.claim("dead", ["default"], 10, 10.0, now=t0, flow=flow)
    assert len(held) == 2
    # The leases expired at t0 + 10, but nobody reaped them yet: the slots are still taken.
    assert store.claim("w", ["default"], 10, TTL, now=t0 + 100, flow=flow) == []
    reaped = store.reap_expired(now=t0 + 100)
    assert {r.job_id for r in reaped} == {j.id for j in held}
    back = store.claim("w", ["default"], 10, TTL, now=t0 + 101, flow=flow)
    assert len(back) == 2, "the reap frees the slots"
    assert store.claim("w", ["default"], 10, TTL, now=t0 + 101, flow=flow) == []


def test_a_zombie_finish_frees_no_slot(store: Store, t0: float) -> None:
    enqueue(store, t0, 3)
    flow = [FlowLimit("task", T, concurrency=1)]
    (zombie,) = store.claim("zombie", ["default"], 10, 10.0, now=t0, flow=flow)
    store.reap_expired(now=t0 + 50)
    (live,) = store.claim("live", ["default"], 10, TTL, now=t0 + 51, flow=flow)
    assert live.id == zombie.id and live.attempt == 2
    rejected = store.finish([Outcome(zombie.lease, "done", result="1")], now=t0 + 52)
    assert rejected == [zombie.lease]
    assert store.claim("other", ["default"], 10, TTL, now=t0 + 53, flow=flow) == [], (
        "the zombie's late completion must not free the live job's slot")
    assert must_get(store, live.id).status == "running"


def test_per_key_concurrency(store: Store, t0: float) -> None:
    enqueue(store, t0, 5, limit_key="a")
    enqueue(store, t0, 5, limit_key="b")
    enqueue(store, t0, 2)  # no key: a group of its own
    flow = [FlowLimit("task", T, concurrency=2, per_key=True)]
    got = store.claim("w", ["default"], 20, TTL, now=t0 + 1, flow=flow)
    assert keys(got) == {"a": 2, "b": 2, None: 2}
    assert store.claim("w", ["default"], 20, TTL, now=t0 + 2, flow=flow) == []
    done = next(j for j in got if j.limit_key == "b")
    store.finish([Outcome(done.lease, "done", result="1")], now=t0 + 3)
    assert keys(store.claim("w", ["default"], 20, TTL, now=t0 + 4, flow=flow)) == {"b": 1}


def test_a_key_at_its_limit_never_blocks_the_jobs_behind_it(store: Store, t0: float) -> None:
    enqueue(store, t0, 300, limit_key="big")
    small = enqueue(store, t0 + 1, 3, limit_key="small")
    other = enqueue(store, t0 + 2, 3, task=U)
    flow = [FlowLimit("task", T, concurrency=1, per_key=True)]
    got = store.claim("w", ["default"], 10, TTL, now=t0 + 3, flow=flow)
    assert keys(got) == {"big": 1, "small": 1, None: 3}
    assert small[0] in {j.id for j in got}, "a key's jobs are taken in order"
    assert set(other) <= {j.id for j in got}


def test_keys_rotate_fairly(store: Store, t0: float) -> None:
    big = enqueue(store, t0, 300, limit_key="big")
    small = enqueue(store, t0 + 1, 3, limit_key="small")
    flow = [FlowLimit("task", T, concurrency=100, per_key=True)]
    got = store.claim("w", ["default"], 6, TTL, now=t0 + 2, flow=flow)
    assert keys(got) == {"big": 3, "small": 3}, "every key's first job before any key's second"
    assert {j.id for j in got} == set(big[:3]) | set(small)


def test_rotation_keeps_priority_first(store: Store, t0: float) -> None:
    enqueue(store, t0, 5, limit_key="a", priority=1)
    urgent = enqueue(store, t0 + 1, 3, limit_key="b", priority=0)
    flow = [FlowLimit("task", T, concurrency=100, per_key=True)]
    got = store.claim("w", ["default"], 3, TTL, now=t0 + 2, flow=flow)
    assert sorted(j.id for j in got) == sorted(urgent)


def test_queue_concurrency(store: Store, t0: float) -> None:
    q = fresh_queue()
    enqueue(store, t0, 3, queue=q)
    enqueue(store, t0, 3, task=U, queue=q)
    flow = [FlowLimit("queue", q, concurrency=4)]
    got = store.claim("w", [q, "default"], 20, TTL, now=t0 + 1, flow=flow)
    assert len(got) == 4
    assert store.claim("w", [q], 20, TTL, now=t0 + 1, flow=flow) == []


def test_task_and_queue_limits_both_hold(store: Store, t0: float) -> None:
    q = fresh_queue()
    enqueue(store, t0, 5, queue=q)
    enqueue(store, t0, 5, task=U, queue=q)
    flow = [FlowLimit("queue", q, concurrency=4), FlowLimit("task", T, concurrency=1)]
    got = store.claim("w", [q], 20, TTL, now=t0 + 1, flow=flow)
    assert Counter(j.task for j in got) == {T: 1, U: 3}


def test_rate_limits_starts_in_a_sliding_window(store: Store, t0: float) -> None:
    enqueue(store, t0, 20)
    flow = [FlowLimit("task", T, rate=5, per=60.0)]
    assert len(store.claim("w", ["default"], 20, TTL, now=t0, flow=flow)) == 5
    assert store.claim("w", ["default"], 20, TTL, now=t0 + 30, flow=flow) == []
    assert store.claim("w", ["default"], 20, TTL, now=t0 + 59, flow=flow) == []
    assert len(store.claim("w", ["default"], 20, TTL, now=t0 + 61, flow=flow)) == 5


def test_rate_counts_starts_not_running_jobs(store: Store, t0: float) -> None:
    enqueue(store, t0, 4)
    flow = [FlowLimit("task", T, rate=2, per=60.0)]
    got = store.claim("w", ["default"], 20, TTL, now=t0, flow=flow)
    assert len(got) == 2
    # Finishing frees no start: the window still holds two.
    store.finish([Outcome(j.lease, "done", result="1") for j in got], now=t0 + 1)
    assert store.claim("w", ["default"], 20, TTL, now=t0 + 2, flow=flow) == []


def test_a_retry_counts_as_a_start_again(store: Store, t0: float) -> None:
    (job_id,) = enqueue(store, t0, 1)
    flow = [FlowLimit("task", T, rate=2, per=60.0)]
    (first,) = store.claim("w", ["default"], 1, TTL, now=t0, flow=flow)
    store.finish([Outcome(first.lease, "error", error="boom")], now=t0 + 1)
    (second,) = store.claim("w", ["default"], 1, TTL, now=t0 + 2, flow=flow)
    assert second.id == job_id and second.attempt == 2
    store.finish([Outcome(second.lease, "error", error="boom")], now=t0 + 3)
    assert store.claim("w", ["default"], 1, TTL, now=t0 + 4, flow=flow) == []
    assert [j.id for j in store.claim("w", ["default"], 1, TTL, now=t0 + 61, flow=flow)] == [
        job_id]


def test_per_key_rate(store: Store, t0: float) -> None:
    enqueue(store, t0, 5, limit_key="a")
    enqueue(store, t0, 5, limit_key="b")
    flow = [FlowLimit("task", T, rate=2, per=3600.0, per_key=True)]
    assert keys(store.claim("w", ["default"], 20, TTL, now=t0, flow=flow)) == {"a": 2, "b": 2}
    assert store.claim("w", ["default"], 20, TTL, now=t0 + 60, flow=flow) == []


def test_concurrency_and_rate_together(store: Store, t0: float) -> None:
    enqueue(store, t0, 10)
    flow = [FlowLimit("task", T, concurrency=2, rate=3, per=60.0)]
    got = store.claim("w", ["default"], 20, TTL, now=t0, flow=flow)
    assert len(got) == 2
    store.finish([Outcome(j.lease, "done", result="1") for j in got], now=t0 + 1)
    assert len(store.claim("w", ["default"], 20, TTL, now=t0 + 2, flow=flow)) == 1
    assert store.claim("w", ["default"], 20, TTL, now=t0 + 3, flow=flow) == []


def test_concurrent_claimers_never_exceed_and_reach_the_limit(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]],
) -> None:
    enqueue(store, t0, 40)
    flow = [FlowLimit("task", T, concurrency=5)]
    claimers = other_stores(4)

    def claim(s: Store, n: int) -> list[JobRecord]:
        got: list[JobRecord] = []
        for i in range(5):
            got += s.claim(f"w{n}", ["default"], 3, TTL, now=t0 + i * 0.001, flow=flow)
        return got

    results = run_concurrently([partial(claim, s, n) for n, s in enumerate(claimers)])
    claimed = [j for got in results for j in got]
    assert len(claimed) == 5, "the limit is reached, and never exceeded"
    assert len({j.id for j in claimed}) == 5


def test_a_limited_claim_keeps_its_replay(store: Store, t0: float) -> None:
    enqueue(store, t0, 6)
    flow = [FlowLimit("task", T, concurrency=2)]
    rid = "f" * 32
    first = store.claim("w", ["default"], 10, TTL, now=t0, request_id=rid, flow=flow)
    again = store.claim("w", ["default"], 10, TTL, now=t0 + 1, request_id=rid, flow=flow)
    assert len(first) == 2 and {j.id for j in again} == {j.id for j in first}


# -- snooze -----------------------------------------------------------------------------------

def test_snooze_puts_the_job_back_without_using_an_attempt(store: Store, t0: float) -> None:
    (job_id,) = enqueue(store, t0, 1, max_attempts=1)
    (job,) = store.claim("w", ["default"], 1, TTL, now=t0)
    assert store.finish([Outcome(job.lease, "snoozed", error="snoozed for 30 s",
                                 retry_delay=30.0)], now=t0 + 1) == []
    after = must_get(store, job_id)
    assert after.status == "pending"
    assert after.run_at == at(t0 + 31)
    assert (after.snoozes, after.failures, after.stall_count, after.interruptions) == (1, 0, 0, 0)
    assert after.attempt == 1 and after.tries == 0
    assert after.locked_by is None and after.lease_until is None
    assert after.last_error is None, "a snooze is not an error"
    (record,) = after.error_history
    assert record["reason"] == "snoozed" and record["error"] == "snoozed for 30 s"
    assert set(record) == {"attempt", "error", "reason", "at", "owner"}
    assert store.claim("w", ["default"], 1, TTL, now=t0 + 29) == []
    (again,) = store.claim("w", ["default"], 1, TTL, now=t0 + 32)
    assert again.attempt == 2 and again.tries == 1
    # max_attempts=1 and the first try was snoozed: an error now is the first failure.
    store.finish([Outcome(again.lease, "error", error="boom")], now=t0 + 33)
    assert must_get(store, job_id).status == "failed"


def test_a_stale_snooze_is_rejected(store: Store, t0: float) -> None:
    (job_id,) = enqueue(store, t0, 1)
    (job,) = store.claim("w", ["default"], 1, 10.0, now=t0)
    store.reap_expired(now=t0 + 50)
    stale = Lease(job.id, job.attempt, job.lease.owner, job.lease.token)
    assert store.finish([Outcome(stale, "snoozed", retry_delay=5.0)], now=t0 + 51) == [stale]
    assert must_get(store, job_id).snoozes == 0


def test_a_cancel_request_sticks_through_a_snooze(store: Store, t0: float) -> None:
    (job_id,) = enqueue(store, t0, 1)
    (job,) = store.claim("w", ["default"], 1, TTL, now=t0)
    assert store.cancel(job_id, now=t0 + 1) == "requested"
    store.finish([Outcome(job.lease, "snoozed", retry_delay=5.0)], now=t0 + 2)
    assert must_get(store, job_id).status == "cancelled"


def test_snoozes_add_up(store: Store, t0: float) -> None:
    (job_id,) = enqueue(store, t0, 1)
    for n in range(3):
        (job,) = store.claim("w", ["default"], 1, TTL, now=t0 + n * 10)
        store.finish([Outcome(job.lease, "snoozed", retry_delay=1.0)], now=t0 + n * 10 + 1)
    after = must_get(store, job_id)
    assert (after.snoozes, after.attempt, after.tries) == (3, 3, 0)
    assert [r["reason"] for r in after.error_history] == ["snoozed"] * 3


# -- the rules, literally ----------------------------------------------------------------------

def literal_claim(jobs: list[JobRecord], queues: list[str], limit: int, now: float,
                  flow: list[FlowLimit]) -> list[int]:
    """The claim's concurrency rules of ``Leases.claim`` written out as plainly as they read:
    rank within (queue, task, limit_key), order (priority, rank, run_at, id), take while every
    applying limit has a slot. What each store's optimised claim must agree with."""
    due = sorted((j for j in jobs if j.status == "pending" and j.queue in queues
                  and j.run_at <= now), key=lambda j: (j.priority, j.run_at, j.id))
    running = [j for j in jobs if j.status == "running"]
    seen: Counter[tuple[str, str, str]] = Counter()
    rank: dict[int, int] = {}
    for j in due:
        if j.limit_key is None:
            rank[j.id] = 1
        else:
            seen[(j.queue, j.task, j.limit_key)] += 1
            rank[j.id] = seen[(j.queue, j.task, j.limit_key)]
    taken: Counter[tuple[int, str]] = Counter()
    out: list[int] = []
    for j in sorted(due, key=lambda j: (j.priority, rank[j.id], j.run_at, j.id)):
        if len(out) == limit:
            break
        applying = [(i, lim) for i, lim in enumerate(flow) if lim.applies(j.task, j.queue)]
        if all(lim.concurrency is None or taken[(i, lim.group(j.limit_key))] + sum(
                1 for r in running if lim.applies(r.task, r.queue)
                and lim.group(r.limit_key) == lim.group(j.limit_key)) < lim.concurrency
               for i, lim in applying):
            for i, lim in applying:
                taken[(i, lim.group(j.limit_key))] += 1
            out.append(j.id)
    return sorted(out)


def test_limited_claims_follow_the_rules_literally(store: Store, t0: float) -> None:
    """Random jobs (tasks, queues, keys, priorities, due times), random concurrency limits
    and claim sizes, jobs finished between claims: every claim takes exactly what the rules
    say. Each store chooses its own optimised way (index seeks, a Lua walk, a first-jobs fast
    path); this is where they must all agree."""
    import random

    rng = random.Random(19)
    jobs = [new_job(rng.choice(["a", "b", "c"]), queue=rng.choice(["q1", "q2"]),
                    priority=rng.choice([0, 0, 0, 1, -1]),
                    limit_key=rng.choice([None, "k1", "k2", "k3", "", "k5"]),
                    run_at=t0 - rng.random() * 10) for _ in range(150)]
    store.enqueue(jobs, now=t0)
    flows = [
        [FlowLimit("task", "a", concurrency=2, per_key=True)],
        [FlowLimit("task", "a", concurrency=3, per_key=True),
         FlowLimit("task", "b", concurrency=4), FlowLimit("queue", "q2", concurrency=9)],
        [FlowLimit("task", "c", concurrency=1, per_key=True), FlowLimit("task", "a", per_key=True)],
    ]
    for step in range(50):
        flow = rng.choice(flows)
        limit = rng.choice([1, 2, 3, 5, 8, 20])
        queues = rng.choice([["q1"], ["q2"], ["q1", "q2"]])
        now = t0 + step
        before = store.list_jobs(limit=1000)
        want = literal_claim(before, queues, limit, now, flow)
        got = store.claim("w", queues, limit, TTL * 100, now=now, flow=flow)
        assert sorted(j.id for j in got) == want, (step, queues, limit, flow)
        running = [j for j in store.list_jobs(status="running", limit=1000)]
        for job in rng.sample(running, rng.randint(0, len(running))):
            assert store.finish([Outcome(job.lease, "done", result="1")], now=now) == []
