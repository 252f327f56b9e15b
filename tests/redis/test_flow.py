"""Flow limits and snooze on Redis (issue 19): what the contract suite cannot see from outside:
hashes written before limit_key/snoozes existed, the scan bound, strays, the rate log's keys,
and the limited claim at the memory limit and after a script flush."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
import redis

from tests.throwaway.redis import throwaway_redis
from tether._errors import StoreFull
from tether.stores import FlowLimit, NewJob, Outcome
from tether.stores._redis.lease import FLOW_SCAN
from tether.stores._redis.store import RedisStore

TTL = 30.0


def test_a_hash_written_before_issue_19_reads_and_is_flow_claimed(
    rstore: RedisStore, prefix: str, raw: redis.Redis
) -> None:
    t0 = rstore.now()
    (job_id,) = rstore.enqueue([NewJob("t", limit_key="k")], now=t0)
    raw.hdel(f"{prefix}:job:{job_id}", "limit_key", "snoozes")
    old = rstore.get_job(job_id)
    assert old is not None and (old.limit_key, old.snoozes) == (None, 0)
    flow = [FlowLimit("task", "t", concurrency=1, per_key=True)]
    (job,) = rstore.claim("w", ["default"], 5, TTL, now=t0, flow=flow)
    assert rstore.finish([Outcome(job.lease, "snoozed", retry_delay=1.0)], now=t0 + 1) == []
    assert rstore.get_job(job_id).snoozes == 1  # type: ignore[union-attr]


def test_jobs_behind_a_long_blocked_backlog_are_found_within_the_bound(
    rstore: RedisStore,
) -> None:
    """10,000 due jobs of a key at its limit ahead of 10 of another: one limited claim takes
    the 10 (the walk's bound, FLOW_SCAN, covers them) and prints what it cost."""
    t0 = rstore.now()
    big = 10_000
    assert big + 10 <= FLOW_SCAN
    for n in range(0, big, 1000):
        rstore.enqueue([NewJob("t", limit_key="big") for _ in range(1000)], now=t0 + n / big)
    small = rstore.enqueue([NewJob("t", limit_key="small") for _ in range(10)], now=t0 + 2)
    flow = [FlowLimit("task", "t", concurrency=1, per_key=True)]
    (first,) = rstore.claim("w", ["default"], 1, TTL, now=t0 + 3, flow=flow)
    assert first.limit_key == "big"  # the key is now at its limit
    started = time.perf_counter()
    got = rstore.claim("w", ["default"], 10, TTL, now=t0 + 3, flow=flow)
    took = time.perf_counter() - started
    assert [j.id for j in got] == small[:1], "one slot per key: small's first job"
    print(f"flow claim past {big} blocked jobs: {took * 1000:.1f} ms")


def test_the_walk_stops_at_its_bound(rstore: RedisStore) -> None:
    """Beyond FLOW_SCAN due jobs of a queue a limited claim does not look (documented)."""
    t0 = rstore.now()
    for _ in range(0, FLOW_SCAN, 2000):
        rstore.enqueue([NewJob("t", limit_key="big") for _ in range(2000)], now=t0)
    rstore.enqueue([NewJob("t", limit_key="big")], now=t0)
    (behind,) = rstore.enqueue([NewJob("t", limit_key="small")], now=t0 + 1)
    flow = [FlowLimit("task", "t", concurrency=1, per_key=True)]
    assert rstore.claim("w", ["default"], 1, TTL, now=t0 + 2, flow=flow)[0].limit_key == "big"
    # FLOW_SCAN blocked jobs of "big" are ahead of `behind`, which is one past the bound
    assert rstore.claim("w", ["default"], 1, TTL, now=t0 + 2, flow=flow) == []
    assert rstore.get_job(behind).status == "pending"  # type: ignore[union-attr]


def test_a_stray_pending_entry_is_dropped_and_a_stray_running_one_holds_no_slot(
    rstore: RedisStore, prefix: str, raw: redis.Redis
) -> None:
    t0 = rstore.now()
    ids = rstore.enqueue([NewJob("t") for _ in range(3)], now=t0)
    flow = [FlowLimit("task", "t", concurrency=1)]
    (running,) = rstore.claim("w", ["default"], 1, TTL, now=t0, flow=flow)
    raw.delete(f"{prefix}:job:{running.id}")  # its P:running entry is now a stray
    raw.delete(f"{prefix}:job:{ids[1]}")  # a pending entry whose hash is gone
    (got,) = rstore.claim("w", ["default"], 5, TTL, now=t0 + 1, flow=flow)
    assert got.id == ids[2]
    assert raw.zscore(f"{prefix}:pending:default:0", f"{ids[1]:016d}") is None
    assert raw.hget(f"{prefix}:incidents", "missing_jobs") == "1"
    assert not raw.exists(f"{prefix}:job:{ids[1]}")


def test_the_rate_log_drops_old_starts_and_expires(
    rstore: RedisStore, prefix: str, raw: redis.Redis
) -> None:
    t0 = rstore.now()
    rstore.enqueue([NewJob("t", limit_key="k") for _ in range(4)], now=t0)
    limit = FlowLimit("task", "t", rate=10, per=60.0, per_key=True)
    key = f"{prefix}:flow:starts:{limit.group('k')}"
    assert len(rstore.claim("w", ["default"], 2, TTL, now=t0, flow=[limit])) == 2
    assert raw.zcard(key) == 2 and 0 < raw.pttl(key) <= 61_000
    assert len(rstore.claim("w", ["default"], 1, TTL, now=t0 + 61, flow=[limit])) == 1
    assert raw.zcard(key) == 1, "the starts out of the window went"


def test_a_limited_claim_at_the_memory_limit_and_after_a_script_flush(tmp_path: Path) -> None:
    with throwaway_redis(tmp_path) as server:
        store = RedisStore(f"{server.url}?prefix=f{uuid.uuid4().hex[:8]}")
        raw = server.client()
        flow = [FlowLimit("task", "t", concurrency=1, rate=5, per=60.0)]
        try:
            store.migrate()
            (job_id,) = store.enqueue([NewJob("t")])
            raw.script_flush()
            server.fill()
            with pytest.raises(StoreFull):
                store.claim("w", ["default"], 1, TTL, flow=flow)
            server.unlimit()
            raw.script_flush()
            (job,) = store.claim("w", ["default"], 1, TTL, flow=flow)  # nothing half-claimed
            assert job.id == job_id and job.attempt == 1
        finally:
            raw.close()
            store.close()


def test_every_enqueue_path_stores_the_limit_key(rstore: RedisStore) -> None:
    """The async producer and a schedule tick go through the same enqueue fields."""

    async def produce() -> list[int]:
        producer = rstore.async_producer()
        try:
            return await producer.enqueue([NewJob("t", limit_key=""), NewJob("t")])
        finally:
            await producer.aclose()

    empty, none = asyncio.run(produce())
    ticked = rstore.schedule_tick("s", 1.0, NewJob("t", limit_key="k"))
    assert ticked is not None
    got = {j: rstore.get_job(j).limit_key for j in (empty, none, ticked)}  # type: ignore[union-attr]
    assert got == {empty: "", none: None, ticked: "k"}
