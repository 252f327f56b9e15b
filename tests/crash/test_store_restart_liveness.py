"""A store server restart is not a mass death (issue #22).

When the PostgreSQL or Redis server restarts (or PostgreSQL resets every session after a
backend crashed), every advisory lock and every client connection is gone at once: every
liveness token looks released until each worker has reconnected and taken it again. The
death watch must not take that for the death of every worker: a live worker holding a long
job keeps it (no stall recorded, no second start). Afterwards, death detection works again:
the same worker SIGKILLed has its job back at once, not when its 60 s lease runs out.

Each case runs on a throwaway server of its own (tests/throwaway), never the shared one.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import enqueue, get, held_by, pid_of, wait_for
from tests.throwaway.postgres import single
from tests.throwaway.redis import throwaway_redis
from tether._newjob import make_new_job
from tether.stores import Store, open_store

LEASE_TTL = 60.0
#: A job back within this after the kill was brought back by the death check: the lease
#: would take LEASE_TTL.
LEASE_WOULD_TAKE = LEASE_TTL / 2


@contextlib.contextmanager
def _server(how: str, tmp_path: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """(store URL, the restart) on a server of this test's own."""
    if how.startswith("postgres"):
        with single() as pg:
            yield pg.url(), pg.restart if how == "postgres-restart" else pg.crash_reset
    else:
        folder = tmp_path / "redis"
        folder.mkdir()
        # Append-only, stopped by SIGTERM: the restarted server has every job and token row.
        with throwaway_redis(folder, appendonly=True, appendfsync="always") as server:
            yield server.url, lambda: server.restart(signal.SIGTERM)


def _starts(records: list[dict[str, object]], job_id: int) -> list[dict[str, object]]:
    return [r for r in records if r["job"] == job_id and r["event"] == "start"]


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["postgres-restart", "postgres-reset", "redis-restart"])
def test_a_store_server_restart_is_not_every_workers_death(
    make_cluster: MakeCluster, tmp_path: Path, how: str
) -> None:
    with _server(how, tmp_path) as (url, restart):
        store: Store = open_store(url)
        try:
            store.migrate()
            cluster = make_cluster(url, lease_ttl=LEASE_TTL)
            leader = cluster.spawn(1, "-q", "elsewhere")  # the death watch that judges
            cluster.wait_registered(store, leader)
            holder = cluster.spawn(2)
            cluster.wait_registered(store, holder)
            [job_id] = enqueue(store, "crash.work", 600.0, 0.1)
            wait_for(lambda: held_by(store, holder.pid), 30, "the holder to claim the job")
            wait_for(lambda: _starts(cluster.records("runs"), job_id), 30,
                     "the handler to start")

            restart()

            # Every process is back on the store: both took their tokens again, and the
            # leader (whose maintainer runs the death watch) ran a job after the restart.
            wait_for(lambda: holder.logged("taken again") and leader.logged("taken again"),
                     60, "both workers to take their liveness tokens again")
            [probe] = store.enqueue([make_new_job("crash.work", [0.0], {},
                                                  queue="elsewhere")])
            wait_for(lambda: get(store, probe).status == "done", 60,
                     "the leader to run a job after the restart")
            job = get(store, job_id)
            assert (job.status, job.attempt, job.stall_count) == ("running", 1, 0), job
            assert pid_of(job.locked_by) == holder.pid
            assert len(_starts(cluster.records("runs"), job_id)) == 1
            assert not [r for r in cluster.records("events") if r["event"] == "stalled"]

            # Death detection works again: the holder killed, its job is back at once.
            other = cluster.spawn(2)
            cluster.wait_registered(store, other)
            holder.kill()
            job = wait_for(lambda: (j if (j := get(store, job_id)).attempt == 2
                                    and j.status in ("running", "done") else None),
                           LEASE_WOULD_TAKE, "the killed holder's job to start again")
            assert job.stall_count == 1, job
            # The claim is in the store before the handler writes its start record.
            wait_for(lambda: len(_starts(cluster.records("runs"), job_id)) == 2, 30,
                     "the second attempt's handler to start")
            assert len(_starts(cluster.records("runs"), job_id)) == 2
        finally:
            store.close()
