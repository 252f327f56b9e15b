"""Maintenance with real processes (issue #8, item G): the documented set-up of workers with
``reaper_interval=0`` plus a standalone ``tether reaper`` recovers a dead worker's jobs, and the
standalone reaper keeps the app's settings (here: how long dead-lettered jobs are kept).
"""

from __future__ import annotations

import signal

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import APP, all_in, enqueue, get, held_by, wait_for
from tether.stores import NewJob, Outcome, Store

MARGIN = 1.0
DAY = 86_400.0


def _first_leader(records: list[dict[str, object]], pids: set[int]) -> int | None:
    for r in records:
        if r["event"] == "leadership_acquired" and r["pid"] in pids:
            return int(r["pid"])  # type: ignore[call-overload]
    return None


@pytest.mark.crash
@pytest.mark.timeout(90)
@pytest.mark.parametrize("reaper_args", ["app", "url"])
def test_workers_without_a_reaper_and_a_standalone_reaper_recover_a_dead_workers_jobs(
    make_cluster: MakeCluster, store_url: str, store: Store, reaper_args: str
) -> None:
    cluster = make_cluster(store_url)
    no_reaper = {"TETHER_TEST_REAPER_INTERVAL": "0"}
    a, b = cluster.spawn(2, env=no_reaper), cluster.spawn(2, env=no_reaper)
    cluster.wait_registered(store, a, b)
    # The workers still prune, so one of them leads *something* before the reaper starts.
    leader = wait_for(lambda: _first_leader(cluster.records("events"), {a.pid, b.pid}), 10,
                      "a worker's maintainer to take a leadership")
    args = [APP] if reaper_args == "app" else ["--url", store_url, "--lease-ttl", "2"]
    reaper = cluster.spawn_reaper(*args)
    wait_for(lambda: reaper.logged("started") or not reaper.alive(), 15, "the reaper to start")
    assert reaper.alive(), reaper.log_text()

    ids = enqueue(store, "crash.work", 30.0, 0.2, n=4, interruptible=True)
    wait_for(lambda: all_in(store, ids, "running"), 15, "the four jobs to be claimed")
    victim = a if leader == b.pid else b  # not the leader: the leader would hand its term on
    abandoned = [j.id for j in held_by(store, victim.pid)]
    assert len(abandoned) == 2, abandoned
    kill_wall = victim.kill()

    s = cluster.settings

    def reaped() -> bool:
        return all(get(store, i).stall_count == 1 for i in abandoned)

    wait_for(reaped, s.recovery_bound + 10, "the standalone reaper to take the jobs back")
    for job_id in abandoned:
        job = get(store, job_id)
        took = job.error_history[-1]["at"] - kill_wall
        assert job.error_history[-1]["reason"] == "stalled"
        assert took <= s.recovery_bound + MARGIN, f"job {job_id} reaped after {took:.2f}s"
    reaper.send(signal.SIGTERM)
    assert reaper.proc.wait(15) == 0, reaper.log_text()


@pytest.mark.crash
@pytest.mark.timeout(60)
def test_standalone_reaper_keeps_dead_letters_as_long_as_the_app_says(
    make_cluster: MakeCluster, store_url: str, store: Store
) -> None:
    cluster = make_cluster(store_url)
    t0 = store.now()
    failed_id, done_id = store.enqueue(
        [NewJob("crash.work", max_attempts=1), NewJob("crash.work")], now=t0 - 9 * DAY)
    claimed = {j.id: j for j in store.claim("gone", ["default"], 2, 30.0, now=t0 - 8 * DAY)}
    store.finish([Outcome(claimed[failed_id].lease, "error", error="boom", reason="error"),
                  Outcome(claimed[done_id].lease, "done", result="null")], now=t0 - 8 * DAY)
    assert get(store, failed_id).status == "failed"

    # The app keeps dead letters 30 days; the reaper's defaults would keep them 7.
    reaper = cluster.spawn_reaper(APP, env={"TETHER_TEST_RETENTION_FAILED": str(30 * DAY)})
    wait_for(lambda: reaper.logged("pruned finished jobs") or not reaper.alive(), 20,
             "the reaper's first prune pass (done, failed and cancelled jobs)")
    assert reaper.alive(), reaper.log_text()
    assert store.get_job(done_id) is None  # the 8-day-old done job went (1 day)
    assert store.get_job(failed_id) is not None, "deleted a dead letter the app keeps 30 days"
    reaper.send(signal.SIGTERM)
    assert reaper.proc.wait(15) == 0, reaper.log_text()
