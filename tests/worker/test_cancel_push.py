"""Issue #22: a cancel reaches the running handler at once, not at the next heartbeat; a
pause stops claims at once, not at the next read of the paused set.

The heartbeat interval is 30 s and the paused set is re-read once an hour here, so a handler
that sees its cancel within a few seconds (or a worker that sees the pause) was told by the
store's push: a property, not a timing race.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import tether
from tests.worker.helpers import running, status, wait_until
from tests.worker.pool_tasks import register, starts
from tether._errors import JobCancelled

HEARTBEAT = 30.0
#: Far below the heartbeat interval, far above any delivery time.
WELL_BELOW = 5.0
SPEC = "tests.worker.pool_tasks:app"


@pytest.fixture
def slow_beats() -> dict[str, float]:
    return {"lease_ttl": 3 * HEARTBEAT, "heartbeat_interval": HEARTBEAT}


def test_a_cancel_reaches_a_running_handler_before_the_next_heartbeat(
    make_app: object, slow_beats: dict[str, float]
) -> None:
    app: tether.App = make_app(**slow_beats)  # type: ignore[operator]
    started, seen = threading.Event(), threading.Event()

    @app.task
    def long() -> None:
        started.set()
        job = tether.current_job()
        try:
            while True:
                job.check_cancelled()
                time.sleep(0.005)
        except JobCancelled:
            seen.set()
            raise

    job_id = long.enqueue()
    with running(app) as worker:
        assert started.wait(10)
        beats = worker.heartbeater.beats
        assert app.cancel(job_id) == "requested"
        assert seen.wait(WELL_BELOW), "the cancel waited for the heartbeat"
        wait_until(lambda: status(app, job_id) == "cancelled", timeout=WELL_BELOW)
        assert worker.signals.signals >= 1
        assert worker.heartbeater.beats > beats


def test_a_pause_reaches_the_worker_before_its_next_read(
    make_app: object, slow_beats: dict[str, float]
) -> None:
    app: tether.App = make_app(**slow_beats)  # type: ignore[operator]
    with running(app, queues=["default"]) as worker:
        wait_until(lambda: worker.signals.signals >= 1)  # listening
        worker.pauses.every = 3600.0
        worker.pauses.refresh()
        assert worker.pauses.active() == ["default"]  # read now; next read in an hour
        app.store.pause_queue("default")
        wait_until(lambda: worker.pauses.active() == [], timeout=WELL_BELOW,
                   what="the pause to reach the worker")


@pytest.mark.timeout(60)
def test_a_cancel_stops_a_process_pool_child_before_the_next_heartbeat(
    make_app: object, slow_beats: dict[str, float], tmp_path: Path
) -> None:
    app: tether.App = make_app(**slow_beats)  # type: ignore[operator]
    register(app)
    log = str(tmp_path / "starts.log")
    job_id = app.runtime.registry.tasks["pool.nap"].enqueue(600.0, log)
    with running(app, concurrency=1, pool="process", app_spec=SPEC):
        wait_until(lambda: starts(log), 30, "the handler to start in a child")
        assert app.cancel(job_id) == "requested"
        wait_until(lambda: status(app, job_id) == "cancelled", timeout=WELL_BELOW,
                   what="the child to be stopped by the pushed cancel")
