"""Redis at its ``maxmemory`` under ``noeviction`` (issue 18, C), on a throwaway server.

At the limit Redis refuses every command that may grow memory. A worker must then stop claiming
(a job claimed then can be neither finished nor renewed: the queue wedges), say why once at
WARNING, and resume by itself when memory frees; a write must be refused whole (Redis lets a
script whose first write only shrinks memory, as a claim's does, run on past the limit); and
``tether stats`` / ``tether health`` must work and say that the store is full.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest
import redis

import tether
from tests.throwaway.redis import ThrowawayRedis
from tests.worker.helpers import running, wait_until
from tether import _clock as clock
from tether._cli.main import main
from tether._errors import StoreFull, StoreUnavailable
from tether._worker.worker import Worker
from tether.stores import NewJob, Outcome
from tether.stores._redis.connection import io
from tether.stores._redis.store import RedisStore

pytestmark = [pytest.mark.timeout(120)]


def _store(server: ThrowawayRedis) -> RedisStore:
    store = RedisStore(f"{server.url}?prefix=mem")
    store.migrate()
    return store


def test_a_refused_claim_changes_nothing_and_says_the_store_is_full(
    server: ThrowawayRedis,
) -> None:
    store = _store(server)
    try:
        (job_id,) = store.enqueue([NewJob("t")])
        server.fill()
        with pytest.raises(StoreFull) as info:
            store.claim("w", ["default"], 1, 30)
        assert isinstance(info.value, StoreUnavailable), "callers that retry keep working"
        assert "maxmemory" in str(info.value)
        with pytest.raises(StoreFull):
            store.enqueue([NewJob("t")])
        server.unlimit()
        (job,) = store.claim("w", ["default"], 1, 30)  # nothing was stranded half-claimed
        assert job.id == job_id and job.attempt == 1
        assert store.finish([Outcome(job.lease, "done")]) == []
    finally:
        store.close()


def test_what_a_worker_holds_is_renewed_and_finished_at_the_limit(
    server: ThrowawayRedis,
) -> None:
    """Redis >= 7 runs flagged scripts at the limit: a worker keeps its leases and stores its
    outcomes (at most what it holds; it claims nothing more), so nothing is run twice."""
    store = _store(server)
    try:
        store.enqueue([NewJob("t") for _ in range(2)])
        first, second = store.claim("w", ["default"], 2, 30)
        server.fill()
        assert store.heartbeat("w", [first.lease, second.lease], 30).lost == frozenset()
        assert store.finish([Outcome(first.lease, "done", result='"ok"')]) == []
        assert store.finish([Outcome(second.lease, "error", error="boom")]) == []
        done, retried = store.get_job(first.id), store.get_job(second.id)
        assert done is not None and (done.status, done.attempt) == ("done", 1)
        assert retried is not None and retried.status == "pending"
        with pytest.raises(StoreFull):
            store.claim("w", ["default"], 1, 30)
    finally:
        store.close()


def test_the_maintenance_leader_stays_and_prunes_at_the_limit(server: ThrowawayRedis) -> None:
    """Pruning only deletes: the leader that runs it must not lose its term at the limit."""
    store = _store(server)
    try:
        store.enqueue([NewJob("t", payload=f'[["{"x" * 5000}"], {{}}]') for _ in range(50)])
        jobs = store.claim("w", ["default"], 50, 30)
        store.finish([Outcome(j.lease, "done") for j in jobs])
        lead = store.leader_acquire("maintenance:prune", "w", 30)
        assert lead is not None
        server.fill()
        assert store.leader_renew("maintenance:prune", "w", lead.term, 30) is not None
        before = server.used_memory()
        assert store.prune("done", 0, now=store.now() + 1) == 50
        assert server.used_memory() < before
    finally:
        store.close()


def test_after_a_refusal_claims_wait_for_room_not_for_a_gap(server: ThrowawayRedis) -> None:
    """Keys that expire free a little memory now and then; a claim slipping into that gap
    would take jobs the server cannot then let it renew or finish."""
    store = _store(server)
    try:
        store.enqueue([NewJob("t")])
        server.fill()
        with pytest.raises(StoreFull):
            store.reap_expired(now=store.now())  # e.g. the maintainer meets the limit first
        server.config("maxmemory", server.used_memory() + 64 * 1024)  # a gap
        store.enqueue([NewJob("t")])  # writes go through again...
        with pytest.raises(StoreFull, match="no new claims"):  # ...but no room to claim
            store.claim("w", ["default"], 2, 30)
        server.unlimit()
        assert len(store.claim("w", ["default"], 2, 30)) == 2
    finally:
        store.close()


def test_a_refused_reap_changes_nothing(server: ThrowawayRedis) -> None:
    store = _store(server)
    try:
        store.enqueue([NewJob("t")])
        (job,) = store.claim("w", ["default"], 1, 1)
        server.fill()
        with pytest.raises(StoreFull):
            store.reap_expired(stall_grace=0, now=store.now() + 60)
        server.unlimit()
        (reaped,) = store.reap_expired(stall_grace=0, now=store.now() + 60)
        assert reaped.job_id == job.id and reaped.status == "pending"
        (again,) = store.claim("w", ["default"], 1, 30)
        assert again.id == job.id and again.attempt == 2
    finally:
        store.close()


def test_stats_and_health_work_at_the_limit_and_say_so(
    server: ThrowawayRedis, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(server)
    store.enqueue([NewJob("t")])
    store.close()
    server.fill()
    url = f"{server.url}?prefix=mem"
    code = main(["stats", "--url", url, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["queues"]["default"]["pending"] == 1
    extra = data["store_info"]
    assert int(extra["maxmemory"]) > 0 and int(extra["used_memory"]) >= int(extra["maxmemory"])
    assert any("memory limit" in w for w in data["warnings"]), data["warnings"]
    code = main(["stats", "--url", url])
    out, err = capsys.readouterr()
    assert code == 0 and "memory limit" in out, err
    code = main(["health", "--url", url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "memory limit" in out + err


@pytest.mark.slow
def test_workers_stop_claiming_at_the_limit_say_so_once_and_resume(
    server: ThrowawayRedis, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    app = tether.App(f"{server.url}?prefix=mem", lease_ttl=2.0, poll_interval=0.05)
    gate = threading.Event()
    started: list[int] = []

    @app.task(queue="q")
    def hold(n: int) -> int:
        started.append(n)
        if n < 2:  # the two first jobs are held while the server fills up
            gate.wait(30)
        return n

    held = [hold.enqueue(n) for n in range(2)]
    with caplog.at_level(logging.INFO, logger="tether"), running(app, concurrency=2,
                                                                   queues=["q"]):
        wait_until(lambda: len(started) == 2, what="the two held jobs to start")
        server.fill()
        with pytest.raises(StoreFull):  # producers are refused with a clear StoreFull
            hold.enqueue(99)
        gate.set()  # the held jobs end while the server is full

        def warned() -> list[logging.LogRecord]:
            return [r for r in caplog.records if r.levelno == logging.WARNING
                    and "not claiming" in r.getMessage()]

        wait_until(warned, what="the WARNING that the worker stops claiming")
        wait_until(lambda: all(app.get_job(j).status == "done" for j in held), 30,
                   "the held jobs to finish at the limit")
        server.unlimit()
        later = [hold.enqueue(n) for n in range(10, 15)]
        wait_until(lambda: all(app.get_job(j).status == "done" for j in later), 30,
                   "new jobs to run after memory freed")
        resumed = [r for r in caplog.records if r.levelno == logging.INFO
                   and "claiming again" in r.getMessage()]
        assert resumed, "the resume is logged at INFO"
    assert len(warned()) == 1, [r.getMessage() for r in warned()]
    for job in (*held, *later):
        view = app.get_job(job)
        assert (view.status, view.attempt) == ("done", 1), (job, view.status, view.last_error)
    assert sorted(started) == [0, 1, 10, 11, 12, 13, 14], "no job ran twice, none was lost"
    app.close()


def test_the_refusal_as_redis_5_and_6_word_it_inside_a_script_is_store_full() -> None:
    """No Redis < 7 here to fill: its reply text, as those versions send it, is enough to
    check the translation (Redis 7's own reply is met by every test above)."""
    text = ("Error running script (call to f_0123): @user_script:26: -OOM command not allowed "
            "when used memory > 'maxmemory'.")
    with pytest.raises(StoreFull), io():
        raise redis.ResponseError(text)


@pytest.mark.slow
def test_jobs_claimed_after_a_long_refusal_get_a_whole_lease(
    server: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused claim changed nothing: the claim after it must not count its trust window
    from the first refused send (as a claim whose reply was lost must), or a refusal almost
    lease_ttl long hands the next jobs a lease the worker gives up before its first renewal."""
    lease_ttl = 3.0
    app = tether.App(f"{server.url}?prefix=mem", lease_ttl=lease_ttl, heartbeat_interval=2.5,
                     poll_interval=0.05)
    trusted_for: list[float] = []
    worker_of: list[Worker] = []

    @app.task(queue="q")
    def look(n: int) -> int:
        job_id = tether.current_job().id
        (entry,) = [e for e in worker_of[0].registry.entries() if e.ctx.id == job_id]
        trusted_for.append(entry.trusted_until - clock.monotonic())
        return n

    with caplog.at_level(logging.INFO, logger="tether"), running(app, concurrency=1,
                                                                   queues=["q"]) as worker:
        worker_of.append(worker)
        app.runtime.store.check_schema()  # the store is open before it fills up
        server.fill()

        def refused_for() -> float:
            warned = [r for r in caplog.records if "not claiming" in r.getMessage()]
            return time.time() - warned[0].created if warned else 0.0

        wait_until(lambda: refused_for() >= 0.8 * lease_ttl, 30, "a refusal of ~lease_ttl")
        server.config("maxmemory", server.used_memory() + 64 * 1024)  # writes, no claims yet
        job = look.enqueue(1)
        server.unlimit()  # the next claim takes it
        wait_until(lambda: app.get_job(job).status == "done", 30, "the job to finish")
    assert trusted_for and trusted_for[0] > lease_ttl / 2, trusted_for
    app.close()
