"""Crash tests: real worker processes, real signals, every store.

Each test runs ``tether worker tests.crash.apps:app`` subprocesses on an isolated store
(SQLite file, PostgreSQL schema, Redis prefix), signals them, and asserts on the job rows it
reads back. Workers use lease_ttl = 2 s (heartbeat every 0.67 s, leader lease 1 s, leader retry
0.33 s), so the documented recovery bound is lease_ttl + stall_grace + 2 s = 4 s.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import (
    Cluster,
    all_in,
    check_zombie_fenced_out,
    enqueue,
    get,
    held_by,
    jobs,
    result_of,
    start_zombie,
    wait_for,
)
from tether._app import App
from tether._worker.worker import FORCED_EXIT_WAIT
from tether.stores import Store

# How far past a computed bound the tests tolerate scheduling noise on a loaded machine.
MARGIN = 1.0


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_sigkill_mid_job_is_rerun_within_the_bound(cluster: Cluster, store: Store) -> None:
    """The lease path alone (death detection off: issue #22's faster path is
    test_liveness_crash.py): the job comes back once the dead holder's lease ran out."""
    lease_only = {"TETHER_TEST_DEATH_CHECK_INTERVAL": "0"}
    a, b = cluster.spawn(2, env=lease_only), cluster.spawn(2, env=lease_only)
    cluster.wait_registered(store, a, b)
    [job_id] = enqueue(store, "crash.work", 30.0, 0.2)

    running = wait_for(lambda: all_in(store, [job_id], "running"), 15, "the job to be claimed")
    holder, survivor = (a, b) if held_by(store, a.pid) else (b, a)
    assert held_by(store, holder.pid), f"job held by neither worker: {running}"
    wait_for(lambda: any(r["job"] == job_id for r in cluster.records("runs")), 10,
             "the handler to start")
    before = get(store, job_id)
    kill_wall = holder.kill()

    done = wait_for(lambda: all_in(store, [job_id], "done"),
                    cluster.settings.recovery_bound + 10, "the job to be re-run and done")[0]
    took = (done.started_at or 0.0) - kill_wall
    assert done.attempt == 2
    assert done.stall_count == 1
    assert done.failures == 0
    assert done.interruptions == 0
    assert result_of(done) == {"job": job_id, "attempt": 2, "pid": survivor.pid}
    assert took <= cluster.settings.recovery_bound, (
        f"re-claimed {took:.2f}s after the kill; bound {cluster.settings.recovery_bound}s")
    # The fence: nobody got the job back before the dead holder's lease had run out.
    assert before.lease_until is not None
    assert (done.started_at or 0.0) >= before.lease_until - 0.05
    assert survivor.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_sigstopped_zombie_is_fenced_out_and_interrupted(cluster: Cluster, store: Store) -> None:
    # Attempt 1 of each job runs on the worker we pause: one handler blind (time.sleep), one
    # polling current_job().cancelled. Later attempts finish in 0.2 s.
    zombie, blind, polling = start_zombie(cluster, store)
    zombie.pause(store)
    # The leases the frozen worker holds now run out at their last renewal plus lease_ttl,
    # which came before the stop (by up to a heartbeat interval): that, not the stop, is the
    # moment before which no other worker may start the jobs.
    expiry = {}
    for job_id in (blind, polling):
        held = store.get_job(job_id)
        assert held is not None and held.status == "running" and held.lease_until is not None
        expiry[job_id] = held.lease_until

    live = cluster.spawn(2)
    done = wait_for(lambda: all_in(store, [blind, polling], "done"),
                    cluster.settings.recovery_bound + 15, "the live worker to finish both jobs")
    for job in done:
        assert result_of(job) == {"job": job.id, "attempt": 2, "pid": live.pid}
        assert job.stall_count == 1
    second = {r["job"]: r["t"] for r in cluster.records("runs")
              if r["event"] == "start" and r["attempt"] == 2}
    for job_id, until in expiry.items():  # paused past its lease, and not taken before
        assert second[job_id] >= until, (job_id, second[job_id], until)

    zombie.send(signal.SIGCONT)
    # The blind handler really did try to complete (it ended), and the store kept the live
    # worker's result anyway.
    check_zombie_fenced_out(cluster, store, zombie, live, blind, polling, 15)
    interrupted = [r for r in cluster.records("runs")
                   if r["pid"] == zombie.pid and r["event"] == "interrupted"]
    assert [(r["job"], r["reason"]) for r in interrupted] == [(polling, "LeaseInterrupted")]
    assert zombie.alive() and live.alive()


@pytest.mark.crash
@pytest.mark.timeout(90)
def test_handler_that_kills_its_worker_is_dead_lettered_after_max_stalls(
    cluster: Cluster, store: Store
) -> None:
    max_stalls = 2
    [job_id] = enqueue(store, "crash.suicide", max_attempts=10, max_stalls=max_stalls)

    # A bounded supervisor: keep one worker alive, respawning it whenever it dies.
    current = cluster.spawn(2)
    deadline = time.monotonic() + 10 * cluster.settings.recovery_bound + 20
    while get(store, job_id).status not in ("failed", "done", "cancelled"):
        assert time.monotonic() < deadline, "job never reached a terminal state"
        assert len(cluster.workers) <= 2 * max_stalls + 2, "too many workers died"
        if not current.alive():
            current = cluster.spawn(2)
        time.sleep(0.05)

    job = get(store, job_id)
    assert job.status == "failed"
    assert job.failure_reason == "stalled"
    assert job.stall_count == max_stalls
    assert job.attempt == max_stalls
    assert job.failures == 0
    killed = [w for w in cluster.workers if w.proc.poll() == -signal.SIGKILL]
    assert len(killed) == max_stalls, cluster.workers
    starts = [r for r in cluster.records("runs") if r["event"] == "start"]
    assert [r["attempt"] for r in starts] == list(range(1, max_stalls + 1))
    assert json.loads(job.errors)[-1]["reason"] == "stalled"

    # Never claimed again: a live worker (the one that reaped it) gets a couple more leases.
    assert current.alive()
    time.sleep(2 * cluster.lease_ttl)  # a negative condition: nothing may happen meanwhile
    after = get(store, job_id)
    assert (after.status, after.attempt, after.stall_count) == ("failed", max_stalls, max_stalls)
    assert current.alive()
    assert len([r for r in cluster.records("runs") if r["event"] == "start"]) == max_stalls


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_sigterm_drains_in_flight_jobs_and_claims_nothing_more(
    cluster: Cluster, store: Store
) -> None:
    ids = enqueue(store, "crash.work", 1.5, 1.5, n=7)
    worker = cluster.spawn(3)
    wait_for(lambda: len(held_by(store, worker.pid)) == 3, 20, "the worker to hold 3 jobs")
    sig_wall = worker.send(signal.SIGTERM)
    sig_mono = time.monotonic()

    assert worker.proc.wait(20) == 0, "the drained worker must exit 0"
    exited_after = time.monotonic() - sig_mono
    final = jobs(store, ids)
    by_status = {s: [j for j in final if j.status == s] for s in ("done", "pending", "running")}
    assert not by_status["running"], "nothing may be left running after a drain"
    assert len(by_status["done"]) >= 3, [(j.id, j.status) for j in final]
    assert len(by_status["done"]) + len(by_status["pending"]) == len(ids)
    for job in by_status["done"]:
        # Claimed before the signal, finished after it: drained, not abandoned.
        assert (job.started_at or 0.0) <= sig_wall, f"job {job.id} claimed after SIGTERM"
        assert (job.finished_at or 0.0) > sig_wall
        assert (job.attempt, job.failures, job.interruptions) == (1, 0, 0)
    for job in by_status["pending"]:
        assert (job.attempt, job.started_at, job.locked_by) == (0, None, None)
    started = {r["job"] for r in cluster.records("runs") if r["event"] == "start"}
    assert started == {j.id for j in by_status["done"]}
    assert exited_after < 1.5 + cluster.shutdown_timeout / 2


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_second_sigterm_hands_the_lease_back_at_once(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    # A long lease makes the difference between "handed back" and "reaped" unmistakable.
    cluster = make_cluster(store_url, lease_ttl=6.0)
    # The pick-up worker starts only once this one has gone. (It used to be started first and
    # SIGSTOPped, but a stop landing inside one of its store transactions, a heartbeat or a
    # leader renewal, left it holding SQLite's write lock or a PostgreSQL row lock, and the
    # worker's claim or hand-back waited on a process that could not run.)
    worker = cluster.spawn(2)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.work", 30.0, 0.2, interruptible=True)
    wait_for(lambda: held_by(store, worker.pid), 15, "the worker to claim the job")
    wait_for(lambda: any(r["event"] == "start" for r in cluster.records("runs")), 10,
             "the handler to start")

    worker.send(signal.SIGTERM)
    wait_for(lambda: worker.logged("draining in-flight jobs"), 10, "the first SIGTERM to land")
    worker.send(signal.SIGTERM)
    second_mono = time.monotonic()
    assert worker.proc.wait(10) == 0
    # Promptly: the worker's own stop (hand-back, flush, unregister) is bounded by
    # FORCED_EXIT_WAIT; read from its log, so the interpreter's exit on a loaded machine (2.7 s
    # seen under CI-like load) does not count. The process exit must still beat the drain
    # (shutdown_timeout, the job runs 30 s) by far.
    forced = worker.logged_at("handing leases back now")
    stopped = worker.logged_at(r"tether\.worker: worker \S+ stopped$")
    assert stopped - forced < FORCED_EXIT_WAIT + MARGIN, worker.log_text()
    exited = time.monotonic() - second_mono
    assert exited < cluster.shutdown_timeout / 2, f"exited {exited:.2f}s after the second SIGTERM"
    assert worker.logged("handed back 1 lease(s)"), worker.log_text()
    assert not worker.logged("could not hand back"), worker.log_text()

    job = get(store, job_id)
    assert job.status == "pending"
    assert (job.attempt, job.interruptions, job.failures, job.stall_count) == (1, 1, 0, 0)
    assert job.locked_by is None and job.lease_until is None
    interrupted = [r for r in cluster.records("runs") if r["event"] == "interrupted"]
    assert [(r["job"], r["reason"]) for r in interrupted] == [(job_id, "ShuttingDown")]

    # Timed from the spare's registration, the first moment it can claim (its start-up on a
    # loaded machine says nothing about the hand-back): the job is due at once.
    spare = cluster.spawn(2)
    cluster.wait_registered(store, spare)
    ready = time.time()
    done = wait_for(lambda: all_in(store, [job_id], "done"), 15, "the spare to run it")[0]
    took = (done.started_at or 0.0) - ready
    assert took < cluster.lease_ttl / 2, (
        f"picked up {took:.2f}s after the spare was ready: it waited for the lease to expire")
    assert (done.attempt, done.interruptions, done.failures, done.stall_count) == (2, 1, 0, 0)
    assert result_of(done)["pid"] == spare.pid


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_timeout_fails_the_attempt_and_dead_letters_after_max_attempts(
    cluster: Cluster, store: Store
) -> None:
    [job_id] = enqueue(store, "crash.slow", 5.0, max_attempts=2)
    worker = cluster.spawn(2)

    def first_attempt_timed_out() -> bool:
        errors = json.loads(get(store, job_id).errors)
        return bool(errors) and errors[0]["attempt"] == 1

    wait_for(first_attempt_timed_out, 15, "attempt 1 to time out")
    first = json.loads(get(store, job_id).errors)[0]
    assert first["reason"] == "timeout" and "timed out" in first["error"]

    job = wait_for(lambda: all_in(store, [job_id], "failed"), 20, "the job to fail")[0]
    assert job.failure_reason == "timeout"
    assert (job.attempt, job.failures, job.stall_count) == (2, 2, 0)
    assert job.last_error is not None and "timed out after 1" in job.last_error
    assert [e["reason"] for e in json.loads(job.errors)] == ["timeout", "timeout"]
    assert job.result is None

    # Attempt 1's handler returns late (it sleeps 5 s through its timeout): that late return
    # must not write anything.
    wait_for(lambda: any(r["event"] == "end" and r["attempt"] == 1
                         for r in cluster.records("runs")), 15, "attempt 1 to return late")
    after = get(store, job_id)
    assert (after.status, after.attempt, after.failures, after.result) == ("failed", 2, 2, None)
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_cancel_a_running_job(cluster: Cluster, store: Store, store_url: str) -> None:
    [job_id] = enqueue(store, "crash.until_cancelled", 60.0)
    worker = cluster.spawn(2)
    wait_for(lambda: any(r["event"] == "start" for r in cluster.records("runs")), 20,
             "the handler to start")
    assert get(store, job_id).status == "running"

    with App(store_url) as app:
        asked = time.time()
        assert app.cancel(job_id) == "requested"
    limit = cluster.settings.heartbeat_every + MARGIN
    job = wait_for(lambda: all_in(store, [job_id], "cancelled"), limit + 10,
                   "the job to be cancelled")[0]
    took = (job.finished_at or 0.0) - asked
    assert took <= limit, f"cancelled {took:.2f}s after the request (limit {limit:.2f}s)"
    assert (job.attempt, job.failures, job.stall_count) == (1, 0, 0)
    assert job.locked_by is None
    interrupted = [r for r in cluster.records("runs") if r["event"] == "interrupted"]
    assert [(r["job"], r["reason"]) for r in interrupted] == [(job_id, "JobCancelled")]
    assert worker.alive()


def _leader(cluster: Cluster, pids: set[int]) -> tuple[int, float] | None:
    """(pid, acquired wall time) of the current reaper leader (election ``maintenance``)
    among ``pids``, from the leadership events the workers recorded; None while nobody (or
    more than one) holds it. (Pruning has its own election, ``maintenance:prune``.)"""
    holding: dict[int, float] = {}
    for r in cluster.records("events"):
        if r["pid"] not in pids or r["detail"].get("name") != "maintenance":
            continue
        if r["event"] == "leadership_acquired":
            holding[r["pid"]] = r["t"]
        elif r["event"] == "leadership_lost":
            holding.pop(r["pid"], None)
    return next(iter(holding.items())) if len(holding) == 1 else None


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_leader_failover_still_recovers_an_abandoned_job(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    cluster = make_cluster(store_url)
    trio = [cluster.spawn(4) for _ in range(3)]
    cluster.wait_registered(store, *trio)
    pids = {w.pid for w in trio}
    leader_pid, _ = wait_for(lambda: _leader(cluster, pids), 10, "a maintenance leader")

    ids = enqueue(store, "crash.work", 6.0, 0.2, n=3)
    wait_for(lambda: all_in(store, ids, "running"), 15, "all three jobs to be claimed")
    by_pid = {w.pid: [j.id for j in held_by(store, w.pid)] for w in trio}
    leader = next(w for w in trio if w.pid == leader_pid)
    # Abandon a job held by a non-leader when there is one, else one the leader holds.
    holder = next((w for w in trio if w is not leader and by_pid[w.pid]), leader)
    victims = [leader] if holder is leader else [leader, holder]
    abandoned = sorted(j for w in victims for j in by_pid[w.pid])
    assert abandoned, by_pid

    kill_wall = time.time()
    for w in victims:
        w.send(signal.SIGKILL)
    for w in victims:
        w.proc.wait(10)
    survivors = {w.pid for w in trio if w not in victims}

    s = cluster.settings
    new_pid, acquired = wait_for(lambda: _leader(cluster, survivors), 10, "a new leader")
    elected_in = acquired - kill_wall
    assert elected_in <= s.leader_lease + s.leader_retry_every + MARGIN, (
        f"new leader {new_pid} after {elected_in:.2f}s")

    done = wait_for(lambda: all_in(store, ids, "done"), s.recovery_bound + 15, "all jobs done")
    for job in done:
        if job.id in abandoned:
            took = (job.started_at or 0.0) - kill_wall
            assert (job.attempt, job.stall_count) == (2, 1), job
            assert result_of(job)["pid"] in survivors
            assert took <= s.recovery_bound, f"job {job.id} re-claimed {took:.2f}s after kill"
        else:
            assert (job.attempt, job.stall_count) == (1, 0), job
    assert all(w.alive() for w in trio if w not in victims)
