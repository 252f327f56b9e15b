"""Process pool crash tests: real ``tether worker --pool process`` subprocesses, every store.

The handlers (tests/crash/apps.py) busy-loop in pure Python, block in C, segfault, call
``os._exit``, allocate without bound, or are cancelled and fenced. Each test proves from the
outside what happened to the child process running them: the worker's ``child_exited`` events
(pid, why, exit status, wall time), the handlers' side-effect files (one line every 20 ms while
a handler runs) and ``/proc``. Workers use lease_ttl = 2 s (heartbeat every 0.67 s) unless a
test says otherwise.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import tether
from tests.crash.conftest import MakeCluster
from tests.crash.harness import Cluster, all_in, enqueue, get, result_of, wait_for
from tether.stores import Store

POOL = ("--pool", "process")
# "Stopped within one second of the worker learning it", plus noise on a loaded 2-core machine.
STOP_BOUND = 1.0
MARGIN = 0.5


def runs(cluster: Cluster, job_id: int, attempt: int, event: str) -> list[dict[str, Any]]:
    return [r for r in cluster.records("runs")
            if r["job"] == job_id and r["attempt"] == attempt and r["event"] == event]


def started(cluster: Cluster, job_id: int, attempt: int) -> dict[str, Any]:
    return wait_for(lambda: runs(cluster, job_id, attempt, "start"), 20,
                    f"job {job_id} attempt {attempt} to start")[0]


def exits(cluster: Cluster, job_id: int | None = None,
          attempt: int | None = None) -> list[dict[str, Any]]:
    return [r for r in cluster.records("events") if r["event"] == "child_exited"
            and (job_id is None or r["job"] == job_id)
            and (attempt is None or r["attempt"] == attempt)]


def exit_of(cluster: Cluster, job_id: int, attempt: int) -> dict[str, Any]:
    found = wait_for(lambda: exits(cluster, job_id, attempt), 10,
                     f"the child of job {job_id} attempt {attempt} to exit")
    assert len(found) == 1, found
    return found[0]


def spin_path(cluster: Cluster, job_id: int, attempt: int) -> Path:
    return cluster.folder / f"spin-{job_id}-{attempt}.log"


def spin_times(cluster: Cluster, job_id: int, attempt: int) -> list[float]:
    """Wall times the busy handler wrote (whole lines only)."""
    try:
        text = spin_path(cluster, job_id, attempt).read_text()
    except FileNotFoundError:
        return []
    return [float(line) for line in text.split("\n")[:-1]]


def take_lease_back(store: Store, job_id: int) -> float:
    """Reap with a ``now`` an hour ahead, as if the lease had expired, until the job's lease is
    taken (PostgreSQL's reaper skips a row another transaction holds, e.g. a checkpoint write
    in flight, as it should). Returns the wall time of the reap that took it."""
    def reap() -> float | None:
        at = time.time()
        reaped = store.reap_expired(now=store.now() + 3600)
        return at if [(r.job_id, r.attempt) for r in reaped] == [(job_id, 1)] else None

    return wait_for(reap, 10, f"the reap to take job {job_id}'s lease back")


def stopped_for(cluster: Cluster, job_id: int, attempt: int) -> list[str]:
    """The stop reasons the handler saw in its ``finally`` (current_job().stop_reason)."""
    return [r["reason"] for r in runs(cluster, job_id, attempt, "stopped")]


def assert_dead_and_quiet(cluster: Cluster, job_id: int, attempt: int, pid: int,
                          exited_at: float) -> None:
    """The child is gone and its side-effect file stopped growing when it exited."""
    assert not Path(f"/proc/{pid}").exists(), f"child {pid} still exists"
    lines = spin_times(cluster, job_id, attempt)
    assert lines, "the busy handler never wrote its side effect"
    assert lines[-1] <= exited_at + 0.05, (lines[-1], exited_at)
    size = spin_path(cluster, job_id, attempt).stat().st_size
    time.sleep(0.3)  # a negative condition: nothing may be written meanwhile
    assert spin_path(cluster, job_id, attempt).stat().st_size == size


@pytest.mark.crash
@pytest.mark.timeout(60)
@pytest.mark.parametrize("task", ["crash.spin", "crash.csleep"])
def test_handler_past_its_timeout_is_killed_and_retried(
    cluster: Cluster, store: Store, task: str
) -> None:
    # crash.spin busy-loops in pure Python; crash.csleep blocks in libc's sleep().
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, task, 30.0, max_attempts=2) if task == "crash.spin" else \
        enqueue(store, task, 30, max_attempts=2)
    done = wait_for(lambda: all_in(store, [job_id], "done"), 20, "the retry to finish")[0]

    first, second = started(cluster, job_id, 1), started(cluster, job_id, 2)
    deadline = first["t"] + 1.0  # the timeout counts from the child's start, just before this
    gone = exit_of(cluster, job_id, 1)
    assert gone["detail"]["why"] == "timeout"
    assert gone["detail"]["child"] == first["pid"] != worker.pid
    assert "SIGTERM" in gone["detail"]["status"] or "SIGKILL" in gone["detail"]["status"]
    assert gone["t"] <= deadline + STOP_BOUND + MARGIN, gone["t"] - deadline
    assert second["t"] <= deadline + STOP_BOUND + MARGIN + 0.2, second["t"] - deadline
    assert second["pid"] not in (first["pid"], worker.pid)
    assert (done.attempt, done.failures, done.stall_count) == (2, 1, 0)
    assert [(e["attempt"], e["reason"]) for e in done.error_history] == [(1, "timeout")]
    assert result_of(done) == {"job": job_id, "attempt": 2, "pid": second["pid"]}
    assert not runs(cluster, job_id, 1, "end")
    if task == "crash.spin":
        assert spin_times(cluster, job_id, 1)[-1] >= deadline - 0.3, "it spun until stopped"
        assert stopped_for(cluster, job_id, 1) == ["LeaseInterrupted"]
        assert_dead_and_quiet(cluster, job_id, 1, first["pid"], gone["t"])
    else:
        assert not Path(f"/proc/{first['pid']}").exists()
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_thread_pool_busy_loop_is_only_fenced_after_its_timeout(
    cluster: Cluster, store: Store
) -> None:
    # The documented limitation of --pool thread: the attempt is failed and retried at the
    # deadline, but the handler itself runs on (in the worker process) until it returns.
    worker = cluster.spawn(2)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.spin", 4.0, max_attempts=2)
    done = wait_for(lambda: all_in(store, [job_id], "done"), 20, "the retry to finish")[0]
    first, second = started(cluster, job_id, 1), started(cluster, job_id, 2)
    assert first["pid"] == second["pid"] == worker.pid
    assert second["t"] < first["t"] + 4.0, "the retry ran while attempt 1 still spun"
    wait_for(lambda: runs(cluster, job_id, 1, "end"), 15, "the fenced handler to return")
    lines = spin_times(cluster, job_id, 1)
    assert lines[-1] >= first["t"] + 3.5, "it kept running long after its 1 s timeout"
    assert [(e["attempt"], e["reason"]) for e in done.error_history] == [(1, "timeout")]
    final = get(store, job_id)
    assert (final.status, final.attempt) == ("done", 2)
    assert result_of(final) == {"job": job_id, "attempt": 2, "pid": worker.pid}
    assert not exits(cluster)
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_cancelling_a_busy_job_kills_its_child(cluster: Cluster, store: Store) -> None:
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.spin_once", 30.0)
    first = started(cluster, job_id, 1)
    wait_for(lambda: spin_times(cluster, job_id, 1), 10, "the side effect to start")
    app = tether.App(cluster.url)
    try:
        asked = time.time()
        assert app.cancel(job_id) == "requested"
    finally:
        app.close()

    final = wait_for(lambda: all_in(store, [job_id], "cancelled"), 10, "cancelled")[0]
    gone = exit_of(cluster, job_id, 1)
    assert gone["detail"]["why"] == "cancel requested"
    assert gone["detail"]["child"] == first["pid"]
    # The worker learns of the cancel at its next heartbeat, then stops the child.
    assert gone["t"] - asked <= cluster.settings.heartbeat_every + STOP_BOUND + MARGIN
    assert_dead_and_quiet(cluster, job_id, 1, first["pid"], gone["t"])
    assert stopped_for(cluster, job_id, 1) == ["JobCancelled"]
    assert (final.attempt, final.failures, final.stall_count) == (1, 0, 0)
    assert final.last_error == "cancelled on request"
    [after] = enqueue(store, "crash.pid")
    ran = wait_for(lambda: all_in(store, [after], "done"), 15, "the next job")[0]
    assert result_of(ran)["pid"] != first["pid"]
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(90)
def test_paused_worker_kills_its_zombie_child_when_it_resumes(
    cluster: Cluster, store: Store
) -> None:
    zombie = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, zombie)
    [job_id] = enqueue(store, "crash.spin_once", 60.0, announce=True)
    first = started(cluster, job_id, 1)
    wait_for(lambda: spin_times(cluster, job_id, 1), 10, "the side effect to start")
    # The child's start and the worker's reading of it are two moments: paused in between,
    # the worker would wake to a lost lease for a job it thinks only sent ahead, withdraw it,
    # and kill the child when the start arrives, a path this test is not about. The progress
    # the worker wrote for the child shows it has read the start first.
    wait_for(lambda: get(store, job_id).progress, 10, "the worker to know the child started it")
    zombie.pause(store)  # the worker freezes; its child spins on, unaware

    live = cluster.spawn(2, *POOL)
    done = wait_for(lambda: all_in(store, [job_id], "done"),
                    cluster.settings.recovery_bound + 15, "the live worker to re-run it")[0]
    assert result_of(done)["attempt"] == 2
    assert result_of(done)["pid"] not in (first["pid"], zombie.pid, live.pid)
    wait_for(lambda: spin_times(cluster, job_id, 1)[-1] > (done.started_at or 0.0) + 0.1, 5,
             "the zombie's child to go on running after the job was re-run elsewhere")

    resumed = zombie.send(signal.SIGCONT)
    gone = exit_of(cluster, job_id, 1)
    assert gone["detail"]["why"] == "lease lost"
    assert gone["detail"]["child"] == first["pid"]
    assert gone["t"] - resumed <= STOP_BOUND + MARGIN, gone["t"] - resumed
    assert_dead_and_quiet(cluster, job_id, 1, first["pid"], gone["t"])
    final = get(store, job_id)
    assert (final.status, final.attempt, final.stall_count) == ("done", 2, 1)
    assert result_of(final) == result_of(done)
    assert [r["attempt"] for r in cluster.records("runs")
            if r["job"] == job_id and r["event"] == "end"] == [2], "completed once"
    assert zombie.alive() and live.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_lease_taken_back_by_the_store_kills_the_child(cluster: Cluster, store: Store) -> None:
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.spin_once", 60.0)
    first = started(cluster, job_id, 1)
    wait_for(lambda: spin_times(cluster, job_id, 1), 10, "the side effect to start")
    taken = take_lease_back(store, job_id)

    gone = exit_of(cluster, job_id, 1)
    assert gone["detail"]["why"] == "lease lost"
    assert gone["t"] - taken <= cluster.settings.heartbeat_every + STOP_BOUND + MARGIN
    assert_dead_and_quiet(cluster, job_id, 1, first["pid"], gone["t"])
    assert stopped_for(cluster, job_id, 1) == ["LeaseInterrupted"]
    done = wait_for(lambda: all_in(store, [job_id], "done"), 15, "the re-run")[0]
    assert (done.attempt, done.stall_count, done.failures) == (2, 1, 0)
    assert result_of(done)["pid"] != first["pid"]
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_a_crashing_child_costs_only_its_attempt(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    # A long lease: a retry within a fraction of it cannot have waited for the reaper.
    cluster = make_cluster(store_url, lease_ttl=10.0)
    # A child each for the first attempts. A retry may be sent ahead to a child that crashes
    # before starting it: it comes back released (tests/crash/test_pool_ahead.py), not stalled.
    worker = cluster.spawn(4, *POOL, "--max-memory-per-child", "150")
    cluster.wait_registered(store, worker)
    ids = {how: enqueue(store, "crash.die", how)[0] for how in ("segv", "exit", "hog")}
    [plain] = enqueue(store, "crash.pid")
    wait_for(lambda: all_in(store, [*ids.values(), plain], "done"), 40, "every job done")

    expect = {"segv": "killed by signal SIGSEGV", "exit": "exited with code 3",
              "hog": "passed max_memory_per_child (150 MiB)"}
    for how, job_id in ids.items():
        job = get(store, job_id)
        assert (job.attempt, job.stall_count, job.failures) == (2 + job.interruptions, 1, 0), how
        [record] = job.error_history
        assert record["reason"] == "stalled"
        assert expect[how] in record["error"], record["error"]
        first, second = started(cluster, job_id, 1), started(cluster, job_id, job.attempt)
        assert str(first["pid"]) in record["error"]
        assert second["t"] - first["t"] < cluster.lease_ttl / 2, "re-run at once, not reaped"
        assert first["pid"] not in (second["pid"], worker.pid)
        assert not runs(cluster, job_id, 1, "end"), f"{how}: attempt 1 must not have returned"
        gone = exit_of(cluster, job_id, 1)
        assert gone["detail"]["child"] == first["pid"]
        if how == "hog":
            assert "passed max_memory_per_child" in gone["detail"]["why"]
        else:
            assert gone["detail"]["why"] == "crashed"
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_a_job_that_always_crashes_its_child_is_dead_lettered_as_stalled(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    cluster = make_cluster(store_url, lease_ttl=10.0)
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.die", "exit", always=True, max_attempts=10, max_stalls=2)
    failed = wait_for(lambda: all_in(store, [job_id], "failed"), 30, "dead-lettered")[0]
    assert failed.failure_reason == "stalled"
    assert (failed.stall_count, failed.attempt, failed.failures) == (2, 2, 0)
    assert [e["reason"] for e in failed.error_history] == ["stalled", "stalled"]
    assert all("exited with code 3" in e["error"] for e in failed.error_history)
    assert (failed.finished_at or 0.0) - failed.created_at < cluster.lease_ttl, (
        "two stalls without waiting for a lease to expire")
    pids = {started(cluster, job_id, a)["pid"] for a in (1, 2)}
    assert len(pids) == 2 and worker.pid not in pids
    [after] = enqueue(store, "crash.pid")
    ran = wait_for(lambda: all_in(store, [after], "done"), 15, "the next job")[0]
    assert result_of(ran)["ppid"] == worker.pid
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_max_tasks_per_child_recycles_children(cluster: Cluster, store: Store) -> None:
    worker = cluster.spawn(1, *POOL, "--max-tasks-per-child", "2")
    cluster.wait_registered(store, worker)
    ids = enqueue(store, "crash.pid", n=5)
    done = wait_for(lambda: all_in(store, ids, "done"), 30, "all done")
    in_order = sorted(done, key=lambda j: j.started_at or 0.0)  # -c 1: one at a time
    pids = [result_of(j)["pid"] for j in in_order]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4], pids
    assert len(set(pids)) == 3 and worker.pid not in pids
    assert all(result_of(j)["ppid"] == worker.pid for j in done)
    # A retired child's exit is recorded when the worker reaps it, which may come after the
    # next child already ran the last job (the retiree first ends its guard): wait for it.
    def retired() -> set[int]:
        return {e["detail"]["child"] for e in exits(cluster)
                if "max_tasks_per_child" in e["detail"]["why"]}

    wait_for(lambda: retired() >= {pids[0], pids[2]}, 30, "both retirements recorded")
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_async_and_sync_tasks_run_in_reused_children(cluster: Cluster, store: Store) -> None:
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    async_ids = enqueue(store, "crash.apid", n=4)
    sync_ids = enqueue(store, "crash.pid", n=4)
    done = wait_for(lambda: all_in(store, async_ids + sync_ids, "done"), 20, "all done")
    results = {j.id: result_of(j) for j in done}
    assert all(r["ppid"] == worker.pid and r["pid"] != worker.pid for r in results.values())
    assert all(results[i].get("loop") is True for i in async_ids)
    assert len({r["pid"] for r in results.values()}) <= 2, "children are started once, reused"
    assert not exits(cluster)


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_checkpoint_and_progress_from_a_child_are_fenced(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    # A long lease (heartbeat every 10 s): the stale write, not a heartbeat, finds the loss.
    cluster = make_cluster(store_url, lease_ttl=30.0)
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    [job_id] = enqueue(store, "crash.checkpoints")
    running = wait_for(lambda: (j := get(store, job_id)).checkpoint and int(j.checkpoint) >= 3
                       and j, 20, "checkpoints from the child")
    assert running.progress is not None
    assert running.status == "running"
    taken = take_lease_back(store, job_id)
    kept = get(store, job_id).checkpoint
    assert kept is not None

    gone = exit_of(cluster, job_id, 1)
    assert gone["detail"]["why"] == "lease lost"
    assert gone["t"] - taken <= STOP_BOUND + MARGIN
    [lost] = [r for r in cluster.records("events") if r["event"] == "lease_lost"
              and r["job"] == job_id and r["attempt"] == 1]
    what = lost["detail"]["rejected"]
    # Step i records "try" i, then saves checkpoint i and progress {"i": i}; the reap fell
    # before one of those writes, which was refused, and the child was stopped at once.
    last_try = max(r["value"] for r in runs(cluster, job_id, 1, "try"))
    # LeaseLost reaches the handler unless the SIGTERM that follows the refusal is faster.
    assert all(r["value"] == last_try for r in runs(cluster, job_id, 1, "rejected"))
    done = wait_for(lambda: all_in(store, [job_id], "done"), 15, "the re-run")[0]
    assert done.checkpoint == kept, "the stale child's later writes changed nothing"
    last_progress = json.loads(done.progress or "null")["i"]
    if what == "checkpoint":
        assert last_try == int(kept) + 1 and last_progress == int(kept)
    else:
        assert what == "progress"
        assert last_try == int(kept) and last_progress == int(kept) - 1
    result = result_of(done)
    assert (result["attempt"], result["checkpoint"]) == (2, int(kept))
    assert result["progress"] == {"i": last_progress}
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_sigterm_drains_children_and_the_second_hands_back_at_once(
    cluster: Cluster, store: Store
) -> None:
    worker = cluster.spawn(2, *POOL)
    cluster.wait_registered(store, worker)
    [busy] = enqueue(store, "crash.spin_once", 60.0)
    [short] = enqueue(store, "crash.work", 1.5, 1.5)
    spinning = started(cluster, busy, 1)
    started(cluster, short, 1)
    worker.send(signal.SIGTERM)
    wait_for(lambda: worker.logged("draining in-flight jobs"), 10, "the first SIGTERM")
    drained = wait_for(lambda: all_in(store, [short], "done"), 10, "the short job to drain")[0]
    assert drained.attempt == 1
    assert get(store, busy).status == "running"

    forced = worker.send(signal.SIGTERM)
    assert worker.proc.wait(15) == 0
    back = get(store, busy)
    assert (back.status, back.interruptions, back.failures, back.stall_count) == (
        "pending", 1, 0, 0)
    gone = exit_of(cluster, busy, 1)
    assert gone["detail"]["why"] == "worker shutting down"
    assert gone["t"] - forced <= STOP_BOUND + MARGIN
    assert_dead_and_quiet(cluster, busy, 1, spinning["pid"], gone["t"])
    assert stopped_for(cluster, busy, 1) == ["ShuttingDown"]


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_children_use_the_url_the_worker_was_given(
    cluster: Cluster, store: Store, tmp_path: Path
) -> None:
    # `tether worker --url X --pool process`: the children import the app, whose own URL
    # ($TETHER_URL here) is another store; a job a handler enqueues must still go to X.
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    [job_id] = enqueue(store, "crash.follow")
    worker = cluster.spawn(1, *POOL, "--url", cluster.url, env={"TETHER_URL": elsewhere})
    cluster.wait_registered(store, worker)
    wait_for(lambda: all_in(store, [job_id], "done"), 30, "the job done")
    follow_up = result_of(get(store, job_id))["next"]
    assert follow_up != job_id, "the follow-up went to another store (its id restarted at 1)"
    wait_for(lambda: all_in(store, [follow_up], "done"), 30, "the follow-up done in X")
    assert get(store, follow_up).task == "crash.pid"
