"""The app of the workflow crash test (``tests.crash.workflow_app:app``): the crash app's
settings and records (tests/crash/apps.py) with one workflow step.

Each step records its start and end (``runs-<pid>.jsonl``), so the test can check from
outside that no attempt of a job started before every parent's successful attempt had
ended, and returns the ids its parents' results name (read with ``parent_results()``), so the
test sees each step was given its own parents' results.
"""

from __future__ import annotations

import os
from typing import Any

import tether
from tests.crash.apps import _poll, _run, app

__all__ = ["app"]


@app.task(name="wf.step", max_attempts=5, max_stalls=5)
def step(seconds: float) -> dict[str, Any]:
    _run("start")
    job = tether.current_job()
    parents = [r["job"] if isinstance(r, dict) else None for r in job.parent_results()]
    _poll(seconds)
    _run("end")
    return {"job": job.id, "attempt": job.attempt, "pid": os.getpid(), "parents": parents}
