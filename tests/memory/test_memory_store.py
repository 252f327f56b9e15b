"""What only the memory store has: names shared in one process, private ``memory://``, a clock
tests may move, and its #12 methods until the shared contract tests for them land."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from tether._errors import ConfigError, SchemaError, StoreError
from tether.stores import AsyncProducer, NewJob, Outcome, Store, open_store
from tether.stores._memory import MemoryStore


@pytest.fixture
def name() -> str:
    return f"m{uuid.uuid4().hex[:12]}"


@pytest.fixture
def mem(name: str) -> Iterator[MemoryStore]:
    store = open_store(f"memory://{name}")
    assert isinstance(store, MemoryStore)
    store.migrate()
    yield store
    store.close()


def test_the_url_picks_the_memory_store_and_satisfies_the_protocol(mem: MemoryStore) -> None:
    assert isinstance(mem, Store)
    assert mem.kind == "memory" and mem.info().kind == "memory"


def test_stores_of_one_name_share_their_jobs(mem: MemoryStore, name: str) -> None:
    other = open_store(f"memory://{name}")
    try:
        other.check_schema()  # migrated through the first one
        [job_id] = other.enqueue([NewJob("t")])
        assert mem.get_job(job_id) is not None
        [claimed] = mem.claim("w", ["default"], 1, 30)
        assert other.get_job(job_id).status == "running"  # type: ignore[union-attr]
        assert other.finish([Outcome(claimed.lease, "done", result="1")]) == []
    finally:
        other.close()


def test_memory_without_a_name_is_private(mem: MemoryStore) -> None:
    a, b = open_store("memory://"), open_store("memory://")
    try:
        a.migrate()
        with pytest.raises(SchemaError):
            b.check_schema()
        b.migrate()
        a.enqueue([NewJob("t")])
        assert b.list_jobs() == [] and mem.list_jobs() == []
    finally:
        a.close()
        b.close()


def test_other_names_are_other_stores(mem: MemoryStore) -> None:
    mem.enqueue([NewJob("t")])
    other = open_store(f"memory://{uuid.uuid4().hex}")
    try:
        other.migrate()
        assert other.list_jobs() == []
    finally:
        other.close()


def test_a_closed_store_refuses_calls_and_ends_its_waits(name: str) -> None:
    store = open_store(f"memory://{name}")
    store.migrate()
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(
        store.wait_for_jobs(["default"], 30)))
    waiter.start()
    time.sleep(0.05)
    store.close()
    waiter.join(5)
    assert not waiter.is_alive(), "close ends a wait at once"
    with pytest.raises(StoreError, match="closed"):
        store.enqueue([NewJob("t")])


def test_the_data_lives_while_a_store_of_the_name_is_open(name: str) -> None:
    first = open_store(f"memory://{name}")
    first.migrate()
    first.enqueue([NewJob("t")])
    second = open_store(f"memory://{name}")
    first.close()
    assert len(second.list_jobs()) == 1
    second.close()
    third = open_store(f"memory://{name}")
    with pytest.raises(SchemaError):  # nobody held it: a fresh, empty store
        third.check_schema()
    third.close()


def test_a_bad_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        MemoryStore("sqlite:///x.db")


def test_advance_moves_the_clock_of_every_store_of_the_name(
    mem: MemoryStore, name: str
) -> None:
    [job_id] = mem.enqueue([NewJob("t", delay=3600)])
    assert mem.claim("w", ["default"], 1, 30) == []
    other = open_store(f"memory://{name}")
    try:
        before = other.now()
        assert mem.advance(3600) >= before + 3600
        assert other.now() >= before + 3600
        [job] = other.claim("w", ["default"], 1, 30)
        assert job.id == job_id
    finally:
        other.close()
    with pytest.raises(ValueError):
        mem.advance(-1)


def test_schedule_tick_enqueues_once_per_tick(mem: MemoryStore) -> None:
    t0 = mem.now()
    first = mem.schedule_tick("s", t0, NewJob("t"), now=t0)
    assert first is not None
    assert mem.schedule_tick("s", t0, NewJob("t"), now=t0 + 1) is None, "a replay"
    assert mem.schedule_tick("s", t0 - 10, NewJob("t"), now=t0 + 1) is None, "an older tick"
    assert mem.schedule_tick("s", t0 + 10, None, now=t0 + 10) is None, "a skipped tick"
    second = mem.schedule_tick("s", t0 + 20, NewJob("t"), now=t0 + 20)
    assert second is not None and second != first
    [state] = mem.schedules()
    assert (state.name, state.last_tick, state.last_job_id) == ("s", t0 + 20, second)
    mem.schedule_tick("a", t0, None, now=t0)
    assert [s.name for s in mem.schedules()] == ["a", "s"]
    assert mem.schedules()[0].last_job_id is None
    with pytest.raises(ValueError, match="priority"):
        mem.schedule_tick("s", t0 + 30, NewJob("t", priority=2**40))
    assert mem.schedules()[1].last_tick == t0 + 20, "a refused job records no tick"


def test_wait_for_finish_is_woken_by_the_finish(mem: MemoryStore) -> None:
    [job_id] = mem.enqueue([NewJob("t")])
    assert mem.wait_for_finish([job_id], 0.05) is False
    [job] = mem.claim("w", ["default"], 1, 30)
    threading.Timer(0.1, lambda: mem.finish([Outcome(job.lease, "done", result="1")])).start()
    started = time.monotonic()
    assert mem.wait_for_finish([job_id], 10) is True
    assert time.monotonic() - started < 5
    assert mem.wait_for_finish([job_id], 10) is True, "already finished: at once"


def test_the_async_producer_never_blocks_the_loop(mem: MemoryStore) -> None:
    producer = mem.async_producer()
    assert isinstance(producer, AsyncProducer)
    assert mem.async_producer() is producer, "made once and kept"

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.slow_callback_duration = 0.05
        [job_id] = await producer.enqueue([NewJob("t")], request_id="r1")
        assert await producer.enqueue([NewJob("t")], request_id="r1") == [job_id]
        got = await producer.get_job(job_id)
        assert got is not None and got.status == "pending"
        waiting = asyncio.ensure_future(producer.wait_for_finish([job_id], 10))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        [job] = await asyncio.to_thread(mem.claim, "w", ["default"], 1, 30)
        await asyncio.to_thread(mem.finish, [Outcome(job.lease, "done", result="2")])
        assert await asyncio.wait_for(waiting, 5) is True
        [other] = await producer.enqueue([NewJob("t")])
        assert await producer.cancel(other) == "cancelled"
        assert await producer.wait_for_finish([other], 0) is True
        assert await producer.wait_for_finish([job_id + 100], 0) is True, "gone counts"
        with pytest.raises(TypeError, match="conn"):
            await producer.enqueue([NewJob("t")], conn=object())
        await producer.aclose()

    asyncio.run(scenario(), debug=True)


def test_a_worker_heartbeats_and_producers_at_once_run_every_job_once(name: str) -> None:
    """The lock keeps every call atomic with everything running together: a worker's eight
    handler threads and fetcher, its heartbeater (every 0.05 s, so beats overlap claims and
    finishes), three producer threads enqueueing while it works, and a reader listing."""
    import tether
    from tether.testing import drain

    app = tether.App(f"memory://{name}", heartbeat_interval=0.05, lease_ttl=5)
    runs: dict[int, int] = {}
    lock = threading.Lock()

    @app.task(name="count")
    def count(i: int) -> int:
        job_id = tether.current_job().id
        with lock:
            runs[job_id] = runs.get(job_id, 0) + 1
        return i

    per_producer, producers = 300, 3
    errors: list[BaseException] = []
    stop_reading = threading.Event()

    def produce(base: int) -> None:
        try:
            for i in range(per_producer):
                count.enqueue(base + i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read() -> None:
        try:
            while not stop_reading.is_set():
                app.store.list_jobs(limit=100)
                app.store.counts()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        count.enqueue(-1)  # the worker starts with work in hand
        threads = [threading.Thread(target=produce, args=(k * per_producer,))
                   for k in range(producers)] + [threading.Thread(target=read)]
        for t in threads:
            t.start()
        ran = drain(app, concurrency=8, timeout=120)
        for t in threads[:-1]:
            t.join(60)
        ran += drain(app, concurrency=8, timeout=120)  # whatever landed after the first idle
        stop_reading.set()
        threads[-1].join(60)
        assert errors == []
        total = per_producer * producers + 1
        assert len(ran) == total and len({j.id for j in ran}) == total
        assert all(j.status == "done" and j.attempt == 1 for j in ran)
        assert set(runs.values()) == {1}, "no job ran twice"
        assert sorted(j.result for j in ran) == sorted([-1, *range(total - 1)])
    finally:
        stop_reading.set()
        app.close()


def test_link_tables_are_emptied_as_jobs_go(mem: MemoryStore) -> None:
    """Links live as long as their child (issue #20): once every job of a workflow is pruned or
    purged, nothing of it is left in the link tables (a long-lived process does not leak)."""
    t = mem.now()
    (root,) = mem.enqueue([NewJob("t", queue="r")], now=t)
    (held,) = mem.claim("w", ["r"], 1, 30, now=t)
    kids = mem.enqueue([NewJob("t", queue="k", after=(root,)) for _ in range(3)], now=t)
    mem.enqueue([NewJob("t", queue="g", after=(kids[0], kids[1]), allow_failure=True)], now=t)
    mem.enqueue([NewJob("t", queue="g", after=(kids[2],))], now=t)
    assert mem.finish([Outcome(held.lease, "done", result="1")], now=t + 1) == []
    assert mem.purge("g", ["waiting"]) == 2
    assert mem.purge("k", ["pending"]) == 3
    assert mem.prune("done", 0, now=t + 10) == 1
    assert mem.list_jobs() == []
    links = mem._db.links
    assert (links.parents, links.children, links.unresolved, links.waiting_on,
            links.allow_failure) == ({}, {}, {}, {}, set())
