"""The argument rules of ``Store.schedule_tick``, in one neutral module every store imports, so
the same ``ValueError`` comes from each before anything is written."""

from __future__ import annotations

from typing import Any

from tether import _limits as limits
from tether.stores._records import NewJob

#: The longest schedule spec (fingerprint: cron or interval, and zone) a store records; far
#: above any cron expression of five fields, each a list of every value of the field.
MAX_SPEC = 2000


def check_spec(spec: Any) -> str | None:
    """A schedule spec to record with a tick (None: keep the recorded one)."""
    return None if spec is None else limits.check_text(spec, "schedule spec", limit=MAX_SPEC)


def check_tick(name: Any, tick: Any, job: Any) -> tuple[str, float]:
    """(name, tick) checked: a schedule name like a task name, a tick in epoch seconds, and a
    job that ``enqueue`` would take (or None for a skipped tick)."""
    name = limits.check_text(name, "schedule name", limit=limits.MAX_NAME)
    tick = limits.check_epoch(tick, "tick")
    if job is not None:
        if not isinstance(job, NewJob):
            raise ValueError(f"job must be a NewJob or None, got {type(job).__name__}")
        limits.check_jobs([job])
    return name, tick
