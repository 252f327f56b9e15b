"""The app of the flow-control crash tests (``tests.crash.flow_app:app``): the crash app's
settings and records (tests/crash/apps.py), with tasks that declare fleet-wide limits.

Each handler records its start and end (``runs-<pid>.jsonl``) so a test can compute, from
outside, how many ran at once: a record interval lies inside the job's ``running`` time in
the store, so more overlapping records than the limit would prove the store broke it.
"""

from __future__ import annotations

from typing import Any

from tests.crash.apps import _poll, _result, _run, app

__all__ = ["app"]


@app.task(name="flow.limited", concurrency=4, max_attempts=5)
def limited(seconds: float, later: float = 0.0) -> dict[str, Any]:
    """``seconds`` on attempt 1, ``later`` on a retry; polls so a lost lease stops it."""
    _run("start")
    from tether import current_job

    _poll(seconds if current_job().attempt == 1 else later)
    _run("end")
    return _result()


@app.task(name="flow.keyed", concurrency=2, limit_key="customer", max_attempts=5)
def keyed(customer: str, seconds: float) -> dict[str, Any]:
    _run("start", customer=customer)
    _poll(seconds)
    _run("end", customer=customer)
    return _result()
