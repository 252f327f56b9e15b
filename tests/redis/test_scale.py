"""Redis at scale: the reaper is a range read, and the hot loop is fast."""

from __future__ import annotations

import time

import pytest
import redis

from tether.stores import NewJob, Outcome
from tether.stores._redis.store import RedisStore


def _lfu(raw: redis.Redis) -> bool:
    policy = str(raw.info("memory").get("maxmemory_policy", ""))
    return "lfu" in policy


@pytest.mark.slow
def test_reap_touches_only_the_expired_leases(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    if _lfu(raw):
        pytest.skip("OBJECT IDLETIME needs an LRU (or no) eviction policy")
    t0 = 1_700_000_000.0
    ids = rstore.enqueue([NewJob("t") for _ in range(10_000)], now=t0)
    short = rstore.claim("w", ["default"], 1_000, 10, now=t0)  # the first 1,000: lease t0+10
    long = []
    while batch := rstore.claim("w", ["default"], 1_000, 1_000, now=t0):
        long += batch
    assert len(short) == 1_000 and len(long) == 9_000
    time.sleep(2.1)  # the LRU clock ticks in seconds: let every job key idle for 2 s

    reaped = rstore.reap_expired(now=t0 + 20, limit=5_000)
    assert sorted(r.job_id for r in reaped) == sorted(j.id for j in short)

    pipe = raw.pipeline(transaction=False)
    for job_id in ids:
        pipe.object("idletime", f"{prefix}:job:{job_id}")
    idle = dict(zip(ids, pipe.execute(), strict=True))
    short_ids = {j.id for j in short}
    touched = {i for i, secs in idle.items() if secs < 2}
    assert touched == short_ids, "the reaper read jobs whose lease had not expired"
    assert rstore.reap_expired(now=t0 + 20) == []  # nothing left expired


@pytest.mark.slow
def test_batched_drain_completes(rstore: RedisStore) -> None:
    """10,000 jobs through batched claim + finish, none rejected (speed: bench/, not here)."""
    n = 10_000
    for _ in range(0, n, 1_000):
        rstore.enqueue([NewJob("t") for _ in range(1_000)])
    done = 0
    while jobs := rstore.claim("w", ["default"], 100, 30):
        assert rstore.finish([Outcome(j.lease, "done", result="null") for j in jobs]) == []
        done += len(jobs)
    assert done == n
