"""Jobs sent ahead to a process-pool child, with real ``tether worker --pool process``
subprocesses on every store: a child that crashes ends only the attempt it was running (a
stall); the jobs waiting in it never ran and go back as released, not as stalls; a job waiting
behind a slow handler goes back to the store and an idle worker runs it.
"""

from __future__ import annotations

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import Cluster, all_in, enqueue, get, result_of, wait_for
from tests.crash.test_pool import POOL, exit_of, runs, started
from tether.stores import Store


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_jobs_waiting_in_a_crashed_child_go_back_released_not_stalled(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    # A long lease: what comes back at once did not wait for the reaper. Queued before the
    # worker starts, the jobs come in one claim. Jobs go ahead only behind a task known to be
    # quick, so a calm crash.die runs first; then the crasher and the two jobs behind it go to
    # the only child, unless it has crashed already when one is sent (that one then waits for
    # the replacement).
    cluster = make_cluster(store_url, lease_ttl=10.0)
    [calm] = enqueue(store, "crash.die", "exit", calm=True)
    [crasher] = enqueue(store, "crash.die", "exit")
    waiting = enqueue(store, "crash.work", 0.0, n=2)
    worker = cluster.spawn(1, *POOL)
    cluster.wait_registered(store, worker)
    wait_for(lambda: all_in(store, [calm, crasher, *waiting], "done"), 30, "every job done")

    gone = exit_of(cluster, crasher, 1)
    assert gone["detail"]["why"] == "crashed"
    released = sorted(k[0] for k in gone["detail"]["released"])
    assert released and set(released) <= set(waiting), released
    # Exactly one stall (the crash) and no failure. A job claimed ahead that cannot start within
    # HAND_BACK_AFTER is handed back (an interruption, +1 attempt): on a loaded machine the
    # replacement child may start that late, so interruptions beyond the release are allowed,
    # and every attempt must be accounted for by a stall, a failure or an interruption.
    crashed = get(store, crasher)
    assert (crashed.stall_count, crashed.failures) == (1, 0)
    assert crashed.attempt == 2 + crashed.interruptions
    assert [e["reason"] for e in crashed.error_history] == ["stalled"]
    for job_id in waiting:
        job = get(store, job_id)
        assert (job.stall_count, job.failures) == (0, 0)
        assert job.attempt == 1 + job.interruptions
        if job_id not in released:
            continue
        assert job.interruptions >= 1, "released from the crashed child"
        assert not runs(cluster, job_id, 1, "start"), "it never started in the crashed child"
        assert result_of(job)["attempt"] == job.attempt
        assert (job.finished_at or 0.0) - job.created_at < cluster.lease_ttl / 2
    assert worker.alive()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_a_job_waiting_behind_a_slow_handler_goes_to_an_idle_worker(
    cluster: Cluster, store: Store
) -> None:
    [slow] = enqueue(store, "crash.work", 8.0)
    [quick] = enqueue(store, "crash.work", 0.0)
    busy = cluster.spawn(1, *POOL)
    cluster.wait_registered(store, busy)
    started(cluster, slow, 1)
    idle = cluster.spawn(1)
    done = wait_for(lambda: all_in(store, [quick], "done"), 6, "the quick job, elsewhere")[0]
    assert get(store, slow).status == "running", "it did not wait for the slow handler"
    assert not runs(cluster, quick, 1, "start"), "it never started behind the slow one"
    assert (done.attempt, done.stall_count, done.failures, done.interruptions) == (2, 0, 0, 1)
    assert result_of(done)["pid"] == idle.pid
    assert busy.alive()


@pytest.mark.crash
@pytest.mark.timeout(120)
def test_a_crash_looping_task_does_not_churn_the_jobs_queued_behind_it(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    # Issue 18 E: a task that segfaults its child every time, 12 quick jobs queued behind it,
    # one child. Each crash used to hand back every job sent ahead to the child (attempt + 1
    # each time: `tether jobs` printed ATTEMPT 7/2). Nothing may go ahead behind a task with
    # no duration history or a recent crash, and hand-backs never count as attempts.
    cluster = make_cluster(store_url, lease_ttl=10.0)
    [crasher] = enqueue(store, "crash.die", "segv", always=True, max_attempts=2, max_stalls=2)
    behind = enqueue(store, "crash.work", 0.0, n=12, max_attempts=2)
    worker = cluster.spawn(1, *POOL)
    cluster.wait_registered(store, worker)
    wait_for(lambda: all_in(store, behind, "done"), 60, "every job behind it done")
    crashed = wait_for(lambda: all_in(store, [crasher], "failed"), 30, "the crasher failed")[0]

    assert (crashed.stall_count, crashed.failure_reason) == (2, "stalled")
    churned = {i: (get(store, i).attempt, get(store, i).interruptions) for i in behind}
    assert max(back for _, back in churned.values()) <= 1, churned
    assert worker.log_text().count("released without running") <= len(behind)
    assert "which killed by signal" not in worker.log_text()
    assert crashed.tries == 2 <= crashed.max_attempts, crashed
    for job in [crashed, *(get(store, i) for i in behind)]:
        assert job.attempt == job.tries + job.interruptions, job
        assert job.tries <= job.max_attempts, job
    assert worker.alive()
