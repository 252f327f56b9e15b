"""Redis-only behaviour: key layout, URLs, errors, schema marker, scripts surviving a flush."""

from __future__ import annotations

import re
import threading
import uuid
from importlib import resources
from pathlib import Path

import pytest
import redis

from tests.redis.conftest import keys_under
from tests.servers import isolated_url
from tests.throwaway.redis import throwaway_redis
from tether._errors import SchemaError, StoreUnavailable
from tether.stores import FlowLimit, Lease, NewJob, Outcome, Store, WorkerInfo, open_store
from tether.stores._redis.store import RedisStore

# Every key the store may create, relative to its prefix (see the store module docstring).
LAYOUT = re.compile(
    r"^(schema_version|epoch|incidents|ids|queues|running|unique|workers|workers:seen"
    r"|req:(enqueue|claim|cancel|retry):[0-9a-f]{32}"
    r"|job:\d+|prios:.+|pending:.+:-?\d+"
    r"|idx:.+:(waiting|pending|running|done|failed|cancelled)"
    r"|finished:(done|failed|cancelled)|leader:.+|leader_term:.+|flow:starts:.+"
    r"|(parents|children|waiters):\d+)$"
)


def test_satisfies_the_store_protocol(rstore: RedisStore) -> None:
    store: Store = rstore  # mypy --strict checks the structural match
    assert isinstance(store, Store)
    assert store.kind == "redis"


def test_open_store_strips_the_prefix_from_the_url(redis_url: str, prefix: str) -> None:
    store = open_store(redis_url)
    try:
        assert isinstance(store, RedisStore)
        assert store.prefix == prefix
        assert "prefix" not in store.info().url
    finally:
        store.close()


def test_default_prefix_and_rediss_urls_are_accepted() -> None:
    # Constructing connects nothing, so these touch no keys.
    plain = RedisStore("redis://127.0.0.1:6379/0")
    secure = RedisStore("rediss://user:secret@127.0.0.1:6380/2?prefix=app")
    try:
        assert plain.prefix == "tether"
        assert secure.prefix == "app"
        assert "secret" not in secure._url
    finally:
        plain.close()
        secure.close()


def test_every_key_stays_under_the_prefix(
    rstore: RedisStore, prefix: str, raw: redis.Redis, tmp_path: Path
) -> None:
    with isolated_url("redis", tmp_path) as other_url:
        neighbour = RedisStore(other_url)
        other_prefix = neighbour.prefix
        try:
            neighbour.migrate()
            neighbour.enqueue([NewJob("n", unique_key="u")])
            before_neighbour = {k: raw.dump(k) for k in keys_under(raw, other_prefix)}

            t0 = rstore.now()
            ids = rstore.enqueue(
                [
                    NewJob("a", queue="q:with:colons", priority=-2, unique_key="u"),
                    NewJob("b", delay=60),
                    NewJob("c"),
                    NewJob("d"),
                    NewJob("e", queue="flow", limit_key="k:1"),
                ],
                now=t0,
            )
            flow = [FlowLimit("task", "e", concurrency=1, rate=1, per=60.0, per_key=True)]
            assert len(rstore.claim("w", ["flow"], 1, 5, now=t0, flow=flow)) == 1
            jobs = rstore.claim("w", ["q:with:colons", "default"], 10, 5, now=t0)
            leases = [j.lease for j in jobs]
            rstore.register_worker(WorkerInfo("w", "h", 1, ("default",), 4), now=t0)
            rstore.heartbeat("w", leases, 5, now=t0 + 1)
            assert rstore.save_checkpoint(leases[0], '{"at": 1}', now=t0 + 1)
            rstore.finish([Outcome(leases[0], "done", result="1")], now=t0 + 2)
            rstore.finish([Outcome(leases[1], "dead", error="boom")], now=t0 + 2)
            rstore.retry_failed(None, now=t0 + 3)
            rstore.cancel(ids[1], now=t0 + 3)
            rstore.reap_expired(now=t0 + 100)
            rstore.leader_acquire("reaper", "w", 10, now=t0)
            rstore.notify(["default"])
            rstore.prune("done", 0, now=t0 + 1000)
            rstore.list_jobs(status="pending")
            rstore.counts()
            (parent,) = rstore.enqueue([NewJob("p", queue="wf")], now=t0)
            rstore.enqueue([NewJob("c", queue="wf", after=(parent,))], now=t0)  # link keys

            mine = {k[len(prefix) + 1 :] for k in keys_under(raw, prefix)}
            assert mine, "the store wrote nothing?"
            assert {k for k in mine if not LAYOUT.match(k)} == set()
            # nothing anywhere else mentions this prefix, and the neighbour is untouched
            stray = {str(k) for k in raw.scan_iter(match=f"*{prefix}*", count=1000)}
            assert all(k.startswith(prefix + ":") for k in stray)
            after_neighbour = {k: raw.dump(k) for k in keys_under(raw, other_prefix)}
            assert after_neighbour == before_neighbour
        finally:
            neighbour.close()


def test_schema_marker(rstore: RedisStore, prefix: str, raw: redis.Redis) -> None:
    assert rstore.migrate() == 1
    assert raw.get(f"{prefix}:schema_version") == "1"
    rstore.check_schema()
    raw.set(f"{prefix}:schema_version", "2")
    with pytest.raises(SchemaError):
        rstore.check_schema()
    raw.delete(f"{prefix}:schema_version")
    with pytest.raises(SchemaError):
        rstore.check_schema()


def test_scripts_survive_script_flush(tmp_path: Path) -> None:
    # On a throwaway server: SCRIPT FLUSH empties the script cache of the whole server, and the
    # shared one serves the other tests running at the same time.
    with throwaway_redis(tmp_path) as server:
        rstore = RedisStore(f"{server.url}?prefix=t{uuid.uuid4().hex[:8]}")
        raw = server.client()
        try:
            rstore.migrate()
            t0 = rstore.now()
            (job_id,) = rstore.enqueue([NewJob("t")], now=t0)
            raw.script_flush()
            (job,) = rstore.claim("w", ["default"], 1, 30, now=t0)  # NOSCRIPT -> reload -> run
            assert job.id == job_id
            raw.script_flush()
            assert rstore.finish([Outcome(job.lease, "done", result="1")], now=t0 + 1) == []
            assert rstore.get_job(job_id) is not None
        finally:
            raw.close()
            rstore.close()


def test_a_flush_between_reload_and_run_is_ridden_out(tmp_path: Path) -> None:
    """redis-py answers NOSCRIPT by loading the script and running it again; a second flush in
    between (a failover to a replica, another client's SCRIPT FLUSH) used to escape as a
    StoreError. Nothing ran, so the store loads and runs it again."""
    with throwaway_redis(tmp_path) as server:
        rstore = RedisStore(f"{server.url}?prefix=t{uuid.uuid4().hex[:8]}")
        rstore.migrate()
        stop = threading.Event()

        def flush_forever() -> None:
            client = server.client()
            try:
                while not stop.is_set():
                    client.script_flush()
            finally:
                client.close()

        flusher = threading.Thread(target=flush_forever, daemon=True)
        flusher.start()
        try:
            ids = [rstore.enqueue([NewJob("t")])[0] for _ in range(300)]
        finally:
            stop.set()
            flusher.join(10)
            rstore.close()
        assert len(set(ids)) == 300


def test_unreachable_server_is_store_unavailable() -> None:
    store = RedisStore(f"redis://127.0.0.1:1/0?prefix=t{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(StoreUnavailable) as info:
            store.claim("w", ["default"], 10, 30)
        assert isinstance(info.value.__cause__, redis.ConnectionError)
        with pytest.raises(StoreUnavailable):
            store.enqueue([NewJob("t")])
        assert store.wait_for_jobs(["default"], 0.05) is False
    finally:
        store.close()


def test_times_round_trip_exactly(rstore: RedisStore) -> None:
    t = 1_700_000_000.123456
    (job_id,) = rstore.enqueue([NewJob("t", run_at=t + 0.000001)], now=t)
    (job,) = rstore.claim("w", ["default"], 1, 0.25, now=t + 0.5)
    assert job.id == job_id
    assert job.run_at == t + 0.000001
    assert job.created_at == t
    assert job.started_at == t + 0.5
    assert job.lease_until == t + 0.5 + 0.25
    assert rstore.next_lease_expiry() == t + 0.5 + 0.25


def test_clock_going_backwards_never_claims_a_future_job(rstore: RedisStore) -> None:
    t0 = rstore.now()
    rstore.enqueue([NewJob("t", run_at=t0 + 10, priority=-1), NewJob("u", run_at=t0)])
    assert [j.task for j in rstore.claim("w", ["default"], 10, 30, now=t0 + 20)] == ["t", "u"]
    rstore.enqueue([NewJob("v", run_at=t0 + 10)], now=t0)
    assert rstore.claim("w", ["default"], 10, 30, now=t0 + 5) == []


def test_heartbeat_refreshes_the_workers_last_seen(rstore: RedisStore) -> None:
    t0 = 1_700_000_000.0
    rstore.register_worker(WorkerInfo("w1", "host", 42, (), 1), now=t0)
    rstore.heartbeat("w1", [], 30, now=t0 + 7)
    rstore.heartbeat("ghost", [Lease(999, 1, "ghost")], 30, now=t0 + 7)
    (worker,) = rstore.list_workers()
    assert (worker.id, worker.queues, worker.started_at, worker.last_seen) == (
        "w1",
        (),
        t0,
        t0 + 7,
    )


def test_every_script_opens_with_a_comment() -> None:
    package = resources.files("tether.stores._redis")
    files = [f for f in package.iterdir() if f.name.endswith(".lua")]
    assert len(files) >= 16
    for f in files:
        assert f.read_text(encoding="utf-8").startswith("-- "), f.name


def test_reaped_and_released_jobs_keep_their_place_in_line(rstore: RedisStore) -> None:
    t0 = 1_700_000_000.0
    first, second = rstore.enqueue([NewJob("a"), NewJob("b")], now=t0)
    (a,) = rstore.claim("w", ["default"], 1, 10, now=t0 + 1)
    assert a.id == first
    later = rstore.enqueue([NewJob("c")], now=t0 + 5)[0]
    assert [r.job_id for r in rstore.reap_expired(now=t0 + 20)] == [first]
    reaped = rstore.get_job(first)
    assert reaped is not None and reaped.run_at == t0  # run_at kept, not reset to now
    (b,) = rstore.claim("w", ["default"], 1, 10, now=t0 + 21)
    assert b.id == first, "the recovered job is first in line again"
    assert rstore.finish([Outcome(b.lease, "released")], now=t0 + 22) == []
    order = [j.id for j in rstore.claim("w", ["default"], 10, 10, now=t0 + 23)]
    assert order == [first, second, later]


def test_only_a_claim_that_granted_jobs_leaves_a_request_record(
    rstore: RedisStore, prefix: str, raw: redis.Redis
) -> None:
    """Idle workers claim empty on every wake-up and poll; a record of an empty claim (a key
    living >= 60 s) would serve nobody: replaying it may claim afresh (the contract)."""
    empty, full = uuid.uuid4().hex, uuid.uuid4().hex
    assert rstore.claim("w1", ["idle"], 10, 30, request_id=empty) == []
    assert raw.exists(f"{prefix}:req:claim:{empty}") == 0
    (job_id,) = rstore.enqueue([NewJob("t", queue="idle")])
    assert [j.id for j in rstore.claim("w1", ["idle"], 10, 30, request_id=full)] == [job_id]
    assert raw.get(f"{prefix}:req:claim:{full}") == str(job_id)
    assert raw.pttl(f"{prefix}:req:claim:{full}") > 30_000


def test_a_job_hash_written_before_uids_reads_with_a_stable_uid(
    rstore: RedisStore, prefix: str, raw: redis.Redis
) -> None:
    """Issue 18, B: a job enqueued by an older tether has no uid field; it reads (and is
    claimed) with one derived from its id and creation time, the same on every read."""
    old, new = rstore.enqueue([NewJob("t"), NewJob("t")])
    raw.hdel(f"{prefix}:job:{old}", "uid")
    first = rstore.get_job(old)
    assert first is not None and len(first.uid) == 32
    assert rstore.get_job(old).uid == first.uid  # type: ignore[union-attr]
    claimed = {j.id: j.uid for j in rstore.claim("w", ["default"], 5, 30)}
    assert claimed[old] == first.uid and claimed[new] != first.uid
