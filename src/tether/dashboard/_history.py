"""Counts over time, rebuilt from the job rows the store still holds.

Why from rows: the store keeps no time series, and the contract's ``search_jobs`` already
selects by creation time on every store. Every retained job carries ``created_at``,
``run_at``, ``started_at`` and ``finished_at``, which is enough to say, per time bucket, how
many jobs finished or failed, how long the ones that started had waited (from due time to
start), and how many were waiting at the bucket's end. What it cannot see: jobs already
pruned (the reaper prunes finished jobs after the retention settings), attempts before the
last one (``started_at`` is the latest start), and more than :data:`BUDGET` jobs (the newest
are read; the answer says ``truncated``). docs/dashboard.md states these limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tether.dashboard._scan import BUDGET, STEP, Selection
from tether.stores._contract import Admin, JobRecord

#: Windows a page offers: (label, seconds, bucket seconds), about 60 buckets each.
WINDOWS = {"15m": (900, 15), "1h": (3600, 60), "6h": (21600, 360), "24h": (86400, 1440),
           "7d": (604800, 10080)}
DEFAULT_WINDOW = "1h"
FIELDS = ("done", "failed", "started", "depth", "wait_avg", "wait_max")


@dataclass
class Series:
    """Per-bucket figures of one group of jobs (every list has one entry per bucket)."""

    done: list[int]
    failed: list[int]
    started: list[int]
    depth: list[int]
    wait_avg: list[float | None]
    wait_max: list[float | None]
    waits: list[float] = field(default_factory=list)  # per bucket: total wait, then averaged

    @classmethod
    def empty(cls, n: int) -> Series:
        return cls([0] * n, [0] * n, [0] * n, [0] * n, [None] * n, [None] * n, [0.0] * n)

    def json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


@dataclass
class History:
    start: float
    bucket: float
    buckets: list[float]
    all: Series
    queues: dict[str, Series]
    tasks: dict[str, Series]
    examined: int
    truncated: bool

    def json(self) -> dict[str, Any]:
        return {"start": self.start, "bucket": self.bucket, "buckets": self.buckets,
                "all": self.all.json(),
                "queues": {k: v.json() for k, v in sorted(self.queues.items())},
                "tasks": {k: v.json() for k, v in sorted(self.tasks.items())},
                "examined": self.examined, "truncated": self.truncated}


def _add(series: Series, job: JobRecord, start: float, step: float, n: int) -> None:
    def index(t: float | None) -> int | None:
        if t is None or t < start:
            return None
        i = int((t - start) // step)
        return i if i < n else None

    done_at = index(job.finished_at)
    if done_at is not None and job.status in ("done", "failed"):
        (series.done if job.status == "done" else series.failed)[done_at] += 1
    began = index(job.started_at)
    if began is not None and job.started_at is not None:
        wait = max(0.0, job.started_at - max(job.run_at, job.created_at))
        series.started[began] += 1
        series.waits[began] += wait
        old = series.wait_max[began]
        series.wait_max[began] = wait if old is None else max(old, wait)
    # Waiting at a bucket's end: due by then, not started and not finished by then.
    due = max(job.run_at, job.created_at)
    left = min(t for t in (job.started_at, job.finished_at, math.inf) if t is not None)
    first = max(0, math.ceil((due - start) / step - 1))  # first bucket whose end is >= due
    for i in range(first, n):
        end = start + (i + 1) * step
        if end >= left:
            break
        if end >= due:
            series.depth[i] += 1


def history(store: Admin, now: float, window: str = DEFAULT_WINDOW,
            sel: Selection | None = None, budget: int = BUDGET) -> History:
    """Buckets of ``window`` ending now, for the jobs ``sel`` selects (all when None)."""
    span, step = WINDOWS.get(window, WINDOWS[DEFAULT_WINDOW])
    n = span // step
    start = now - span
    # A job that finished in the window may have been created before it: look back a window.
    base = sel or Selection()
    scan_sel = Selection(status=base.status, queue=base.queue, task=base.task,
                         prefix=base.prefix, arg=base.arg, since=start - span)
    total = Series.empty(n)
    queues: dict[str, Series] = {}
    tasks: dict[str, Series] = {}
    cursor: int | None = None
    examined = 0
    truncated = False
    filt = scan_sel.store_filter()
    while True:
        size = min(STEP, budget - examined)
        if size <= 0:
            truncated = True
            break
        page = store.search_jobs(filt, cursor=cursor, limit=size)
        for job in page:
            examined += 1
            cursor = job.id
            if not scan_sel.matches(job):
                continue
            for series in (total, queues.setdefault(job.queue, Series.empty(n)),
                           tasks.setdefault(job.task, Series.empty(n))):
                _add(series, job, start, step, n)
        if len(page) < size:
            break
    for series in (total, *queues.values(), *tasks.values()):
        series.wait_avg = [w / k if k else None for w, k in zip(series.waits, series.started,
                                                                 strict=True)]
    return History(start, float(step), [start + i * step for i in range(n)], total, queues,
                   tasks, examined, truncated)
