"""The Liveness role (issue #22): tokens, the check for dead owners, the reap of their jobs.

"The process died" is played by ``release_liveness`` (the store then sees what it sees when a
process dies: a file lock dropped, a session or a connection closed). What needs a real
process to die is in tests/crash/test_liveness_crash.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.contract.helpers import errors_of, fresh_queue, lacks, must_get, running_job
from tests.remote import REMOTE_KINDS
from tether.stores import REAPED_ERROR, NewJob, Outcome, Reaped, Store

HOLD = 3600.0  # leases far longer than any test: only death can bring a job back


def _worker() -> str:
    return f"host:{uuid.uuid4().hex[:6]}:{uuid.uuid4().hex[:12]}"


def _until(check: Callable[[], bool]) -> None:
    """Wait for a condition the store reaches on its own (Redis learns of a closed
    connection when its event loop reads the close); the bound is a safety net only."""
    give_up = time.monotonic() + 30.0
    while not check():
        assert time.monotonic() < give_up, "condition never reached"
        time.sleep(0.01)


@pytest.fixture
def tokens(store: Store) -> Iterator[Callable[[], str]]:
    """``take()``: a fresh worker id whose token this process holds (released after)."""
    taken: list[str] = []

    def take() -> str:
        worker = _worker()
        assert store.take_liveness(worker) is True
        taken.append(worker)
        return worker

    yield take
    for worker in taken:
        store.release_liveness(worker)


#: What holds through tether:// too: a worker without a token is never dead, nothing asked
#: reaps nothing, and a paused process is not dead. Everything else needs a token, which a
#: remote store never takes (the "no liveness" answer; seed 003: a cut stream is no death).
_HOLDS_REMOTELY = ("test_a_worker_without_a_token_is_never_dead",
                   "test_nothing_asked_nothing_reaped", "SIGSTOP",
                   "test_a_remote_store_gives_the_no_liveness_answer")
_REMOTE = "through tether:// the lease alone decides: a remote store takes no token"


@pytest.fixture(autouse=True)
def _remote_has_no_tokens(request: pytest.FixtureRequest, store_kind: str) -> None:
    if store_kind.startswith("remote-") and not any(
            name in request.node.name for name in _HOLDS_REMOTELY):
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{store_kind}: {_REMOTE}"))


@pytest.mark.parametrize("store_kind", REMOTE_KINDS)
def test_a_remote_store_gives_the_no_liveness_answer(store: Store, t0: float) -> None:
    """Through tether:// (issue #21) a worker takes no token and nobody is found dead: the
    lease decides, so a dropped stream never takes a live worker's jobs away."""
    assert store.capabilities.detects_death is False
    assert "lease alone" in store.capabilities.liveness_why_not
    assert store.take_liveness("w1") is False
    job = running_job(store, t0, owner="w1", ttl=HOLD)
    store.release_liveness("w1")
    assert store.dead_owners().workers == ()
    assert store.dead_workers(["w1"]) == frozenset()
    assert store.reap_dead(["w1"]) == []
    assert must_get(store, job.id).status == "running"


def _dead(store: Store, worker: str) -> bool:
    return worker in store.dead_owners().workers


def test_the_store_declares_it_detects_death(store: Store) -> None:
    assert store.capabilities.detects_death is True
    assert store.capabilities.liveness_why_not == ""


def test_a_live_holder_is_not_dead(store: Store, t0: float, tokens: Callable[[], str]) -> None:
    worker = tokens()
    assert store.take_liveness(worker) is True, "a repeat is a no-op"
    job = running_job(store, t0, owner=worker, ttl=HOLD)
    assert worker not in store.dead_owners().workers
    assert store.dead_workers([worker]) == frozenset()
    assert must_get(store, job.id).status == "running"


def test_a_worker_without_a_token_is_never_dead(store: Store, t0: float) -> None:
    """An older release, or a worker behind the remote-worker server: the lease decides."""
    job = running_job(store, t0, owner="old-release", ttl=HOLD)
    assert "old-release" not in store.dead_owners().workers
    assert store.dead_workers(["old-release"]) == frozenset()
    assert must_get(store, job.id).status == "running"


def test_a_released_token_is_dead_and_its_jobs_come_back_by_the_stall_rule(
    store: Store, t0: float, tokens: Callable[[], str]
) -> None:
    worker = tokens()
    job = running_job(store, t0, owner=worker, ttl=HOLD, run_at=t0 - 5)
    store.release_liveness(worker)
    _until(lambda: _dead(store, worker))
    assert store.dead_workers([worker, "someone-else"]) == {worker}
    reaped = store.reap_dead([worker], now=t0 + 1)
    assert reaped == [Reaped(job.id, 1, worker, "pending", 1)]
    after = must_get(store, job.id)
    assert (after.status, after.stall_count, after.failures, after.attempt) == (
        "pending", 1, 0, 1)
    assert after.locked_by is None and after.lease_until is None
    assert after.last_error == REAPED_ERROR
    assert after.run_at == pytest.approx(t0 - 5, abs=1e-3), "it keeps its place in line"
    (record,) = errors_of(after)
    assert (record["attempt"], record["reason"], record["owner"]) == (1, "stalled", worker)
    # the dead attempt's late finish is fenced out
    late = Outcome(job.lease, "done", result="null")
    assert store.finish([late], now=t0 + 2) == [job.lease]
    again = store.claim("w2", [job.queue], 1, HOLD, now=t0 + 2)
    assert [j.attempt for j in again] == [2]


def test_reap_dead_takes_only_what_the_dead_owner_still_holds(
    store: Store, t0: float, tokens: Callable[[], str]
) -> None:
    worker, other = tokens(), tokens()
    finished = running_job(store, t0, owner=worker, ttl=HOLD)
    held = running_job(store, t0, owner=worker, ttl=HOLD)
    others = running_job(store, t0, owner=other, ttl=HOLD)
    assert store.finish([Outcome(finished.lease, "done", result="1")], now=t0 + 1) == []
    store.release_liveness(worker)
    _until(lambda: _dead(store, worker))
    assert other not in store.dead_owners().workers
    assert [r.job_id for r in store.reap_dead([worker], now=t0 + 2)] == [held.id]
    assert must_get(store, finished.id).status == "done"
    assert must_get(store, others.id).status == "running"
    assert store.reap_dead([worker], now=t0 + 3) == [], "a second reap finds nothing"


def test_a_fully_reaped_owner_is_no_longer_checked_but_stays_dead(
    store: Store, t0: float, tokens: Callable[[], str]
) -> None:
    worker = tokens()
    running_job(store, t0, owner=worker, ttl=HOLD)
    store.release_liveness(worker)
    _until(lambda: _dead(store, worker))
    assert len(store.reap_dead([worker], now=t0 + 1)) == 1
    assert worker not in store.dead_owners().workers
    assert store.dead_workers([worker]) == {worker}


def test_the_stall_rule_and_a_sticking_cancel_hold(
    store: Store, t0: float, tokens: Callable[[], str]
) -> None:
    worker = tokens()
    last = running_job(store, t0, owner=worker, ttl=HOLD, max_stalls=1)
    cancelled = running_job(store, t0, owner=worker, ttl=HOLD)
    assert store.cancel(cancelled.id, now=t0) == "requested"
    store.release_liveness(worker)
    _until(lambda: _dead(store, worker))
    got = {r.job_id: r.status for r in store.reap_dead([worker], now=t0 + 1)}
    assert got == {last.id: "failed", cancelled.id: "cancelled"}
    assert must_get(store, last.id).failure_reason == "stalled"


def test_a_limit_bounds_the_reap(store: Store, t0: float, tokens: Callable[[], str]) -> None:
    worker = tokens()
    jobs = [running_job(store, t0, owner=worker, ttl=HOLD) for _ in range(3)]
    store.release_liveness(worker)
    _until(lambda: _dead(store, worker))
    first = store.reap_dead([worker], now=t0 + 1, limit=2)
    assert len(first) == 2
    assert worker in store.dead_owners().workers, "not all back yet: still checked"
    rest = store.reap_dead([worker], now=t0 + 1, limit=2)
    assert sorted(r.job_id for r in first + rest) == sorted(j.id for j in jobs)


def test_a_dead_leader_holder_is_named(store: Store, t0: float,
                                       tokens: Callable[[], str]) -> None:
    leader, follower = tokens(), tokens()
    lead = store.leader_acquire("maint", f"{leader} settings=abc", 3600, now=t0)
    assert lead is not None
    other = store.leader_acquire("prune", follower, 3600, now=t0)
    assert other is not None
    assert store.dead_owners(["maint", "prune", "nobody"]).leaders == ()
    store.release_liveness(leader)
    _until(lambda: bool(store.dead_owners(["maint"]).leaders))
    assert store.dead_owners(["maint", "prune"]).leaders == (lead,)
    # released through its own fence, leadership passes at once
    assert store.leader_release("maint", lead.holder, lead.term) is True
    taken = store.leader_acquire("maint", follower, 3600, now=t0 + 1)
    assert taken is not None and taken.term == lead.term + 1
    assert store.dead_owners(["maint"]).leaders == ()


def test_nothing_asked_nothing_reaped(store: Store, t0: float) -> None:
    assert store.reap_dead([], now=t0) == []
    assert store.dead_workers([]) == frozenset()


HOLDER = '''
import sys, time
from tether.stores import open_store

store = open_store(sys.argv[1])
store.take_liveness(sys.argv[2])
jobs = store.claim(sys.argv[2], [sys.argv[3]], 1, 3600.0)
print(len(jobs), flush=True)
while True:
    time.sleep(1)
'''
ONE_PROCESS = "one process: memory://NAME in another process is a store of its own, empty"


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGSTOP"])
def test_another_process_dies_or_pauses(
    store: Store, store_url: str, store_kind: str, request: pytest.FixtureRequest,
    t0: float, signal_name: str,
) -> None:
    """A process that dies is dead at once; one that is paused is not (it keeps its token)."""
    lacks(request, store_kind, memory=ONE_PROCESS)
    worker, queue = _worker(), fresh_queue()
    (job_id,) = store.enqueue([NewJob("t", queue=queue)])
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, store_url, worker, queue],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "1"
        assert must_get(store, job_id).locked_by == worker
        assert worker not in store.dead_owners().workers
        os.kill(proc.pid, getattr(signal, signal_name))
        if signal_name == "SIGKILL":
            proc.wait(30)
            _until(lambda: _dead(store, worker))
            assert [r.job_id for r in store.reap_dead([worker])] == [job_id]
        else:
            for _ in range(10):  # a while: a paused process never looks dead
                assert worker not in store.dead_owners().workers
                assert store.dead_workers([worker]) == frozenset()
                time.sleep(0.1)
            assert must_get(store, job_id).status == "running"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)


NO_CONNECTION = "the token is not a connection: nothing can cut it while the process lives"


def _record(store: Store, worker: str) -> str:
    """The store's record of ``worker``'s token (PostgreSQL: its lock key; Redis: its
    connection's run and client id)."""
    if store.kind == "postgres":
        import psycopg

        from tests.servers import PG_DSN

        schema = store.schema  # type: ignore[attr-defined]
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            row = conn.execute(f'SELECT lock_key FROM "{schema}".live_tokens '
                               "WHERE worker_id = %s", (worker,)).fetchone()
        assert row is not None
        return str(row[0])
    prefix = store.prefix  # type: ignore[attr-defined]
    return str(store._client.hget(f"{prefix}:live", worker))  # type: ignore[attr-defined]


def _cut(store: Store, record: str) -> None:
    """End the token's connection from the server side, as an administrator or a proxy
    would (pg_terminate_backend, CLIENT KILL)."""
    if store.kind == "postgres":
        import psycopg

        from tests.servers import PG_DSN

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            (ended,) = conn.execute(
                "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l WHERE l.locktype = "
                "'advisory' AND l.objsubid = 1 AND "
                "((l.classid::bigint << 32) | l.objid::bigint) = %s", (int(record),)).fetchone()
        assert ended == 1
    else:
        killed = store._client.execute_command(  # type: ignore[attr-defined]
            "CLIENT", "KILL", "ID", record.split()[1])
        assert killed == 1


def test_a_cut_token_is_taken_again(
    store: Store, store_kind: str, request: pytest.FixtureRequest, t0: float,
    tokens: Callable[[], str],
) -> None:
    """The false-death window is the re-take: the watcher takes a new token at once, and
    from then on the worker is alive again (tests/crash/test_outages.py: with the death
    watch's confirmation, an outage that cut every connection re-runs nothing)."""
    lacks(request, store_kind, sqlite=NO_CONNECTION, memory=NO_CONNECTION)
    worker = tokens()
    job = running_job(store, t0, owner=worker, ttl=HOLD)
    before = _record(store, worker)
    _cut(store, before)
    _until(lambda: _record(store, worker) != before)
    assert worker not in store.dead_owners().workers
    assert store.dead_workers([worker]) == frozenset()
    assert must_get(store, job.id).status == "running"
