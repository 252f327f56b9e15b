"""Live views: ``tether job ID --follow`` and ``tether stats --watch``.

Both poll the store (the store's own state is the truth; there is no side channel to miss).
In a terminal the stats view redraws in place; piped, each refresh is printed in turn (one
JSON object per line with ``--json``), so the output can be logged or parsed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from tether import _clock as clock
from tether._cli.render import attempt_short, console, fancy, job_dict, seconds, short, when
from tether.stores._contract import TERMINAL, JobRecord, Producer


def _state(job: JobRecord) -> tuple[Any, ...]:
    """What a ``--json`` follower prints a line for."""
    return (job.status, job.attempt, job.progress, job.checkpoint, job.locked_by,
            job.cancel_requested)


def _line(job: JobRecord) -> str:
    """A text follower's line, without its time: a new line is printed only when this text
    changes, so nothing it does not show (a checkpoint saved, a lease renewed) prints a
    line that repeats the one before (issue #24's "--follow prints noise")."""
    progress = "" if job.progress is None else f" progress {job.progress}"
    owner = f" on {job.locked_by}" if job.locked_by else ""
    cancel = " (cancel requested)" if job.cancel_requested and job.status == "running" else ""
    error = (f"  error: {short(job.last_error, 60)}"
             if job.status != "done" and job.last_error else "")
    return f"job {job.id} {job.status} attempt {attempt_short(job)}{owner}{progress}{cancel}{error}"


def follow(store: Producer, job: JobRecord, as_json: bool, interval: float,
           timeout: float | None = None) -> int:
    """Print the job, then one line per change, until it is done, failed or cancelled.
    Exit code: 0 done, 1 failed or cancelled."""
    last: tuple[Any, ...] | None = None
    deadline = None if timeout is None else clock.monotonic() + timeout
    while True:
        state: tuple[Any, ...] = _state(job) if as_json else (_line(job),)
        if state != last:
            last = state
            if as_json:
                print(json.dumps(job_dict(job), ensure_ascii=False), flush=True)
            else:
                print(f"{when(clock.wall())}  {state[0]}", flush=True)
        if job.status in TERMINAL:
            if not as_json and job.status == "done":
                took = (job.finished_at or 0) - (job.started_at or 0)
                print(f"result: {job.result}  (last attempt took {seconds(took)})", flush=True)
            return 0 if job.status == "done" else 1
        if deadline is not None and clock.monotonic() > deadline:
            return 1
        clock.sleep(interval)
        fresh = store.get_job(job.id)
        if fresh is None:  # pruned or purged under us
            print(f"job {job.id} is gone (pruned or purged)", file=sys.stderr)
            return 4
        job = fresh


def watch(fetch: Callable[[], dict[str, Any]], show: Callable[[dict[str, Any]], None],
          interval: float, as_json: bool, count: int | None = None) -> int:
    """Refresh every ``interval`` seconds until Ctrl-C (or ``count`` refreshes)."""
    out = sys.stdout
    redraw = not as_json and fancy(out)
    shown = 0
    try:
        while count is None or shown < count:
            data = fetch()
            if as_json:
                print(json.dumps(data, ensure_ascii=False, default=str), flush=True)
            elif redraw:
                console(out).clear()
                show(data)
                print(f"\n(refreshing every {interval:g}s; Ctrl-C to stop)", flush=True)
            else:
                if shown:
                    print(flush=True)
                show(data)
                out.flush()
            shown += 1
            if count is None or shown < count:
                clock.sleep(interval)
    except KeyboardInterrupt:
        return 0
    return 0
