"""A paused queue is not claimed from by a running worker; resuming it lets the jobs run."""

from __future__ import annotations

import time

import pytest

import tether
from tests.worker.helpers import running, wait_until


@pytest.mark.slow
def test_worker_skips_a_paused_queue_until_resumed(store_url: str) -> None:
    app = tether.App(store_url, lease_ttl=1.5, poll_interval=0.05)

    @app.task(name="p.a", queue="a")
    def a() -> str:
        return "a"

    @app.task(name="p.b", queue="b")
    def b() -> str:
        return "b"

    try:
        app.store.pause_queue("a")
        held = a.enqueue()
        with running(app, concurrency=2) as worker:
            worker.pauses.every = 0.1
            other = b.enqueue()
            wait_until(lambda: app.get_job(other).status == "done", what="queue b to run")
            time.sleep(0.4)
            assert app.get_job(held).status == "pending"
            app.store.resume_queue("a")
            wait_until(lambda: app.get_job(held).status == "done", what="queue a to run")
            app.store.pause_queue("b")
            app.store.pause_queue("a")
            # Until the worker has read both pauses (a fixed 0.3 s was a guess a loaded
            # machine can beat: the job below would then rightly be claimed).
            wait_until(lambda: worker.pauses.paused == {"a", "b"}, what="both pauses to be seen")
            late = b.enqueue()
            time.sleep(0.4)
            assert app.get_job(late).status == "pending"
    finally:
        app.close()
