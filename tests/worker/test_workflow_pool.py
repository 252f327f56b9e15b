"""Workflows in a process pool (issue #20): a chord's callback runs in a child, which has no
store: the piped list and ``current_job().parents`` / ``parent_results()`` come through its
worker (the ``read`` message), the same as in the thread pool."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

import tether
from tests.worker.helpers import running, wait_until
from tests.worker.pool_tasks import register

pytestmark = pytest.mark.timeout(60)
MakeApp = Callable[..., tether.App]
SPEC = "tests.worker.pool_tasks:app"


def test_a_chord_callback_in_a_child_reads_its_parents_through_the_worker(
        make_app: MakeApp) -> None:
    app = make_app()
    register(app)
    t = app.runtime.registry.tasks
    run = tether.chord([t["pool.add"].s(1, 2), t["pool.add"].s(3, 4)],
                       t["pool.wf_sum"].s(extra=100)).enqueue()
    with running(app, concurrency=2, pool="process", app_spec=SPEC) as worker:
        wait_until(lambda: app.get_job(run.last).status in ("done", "failed"), 30,
                   "the callback to end")
        children = set(worker.pool.pids())
    callback = app.get_job(run.last)
    assert callback.status == "done", callback.last_error
    result = callback.result
    assert result["total"] == 110
    assert result["parents"] == list(run.ids[:2])
    assert [r["sum"] for r in result["results"]] == [3, 7]
    assert result["pid"] in children and result["pid"] != os.getpid()
