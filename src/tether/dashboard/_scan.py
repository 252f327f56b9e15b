"""Search and bulk selections: task name prefix and argument value, over the store contract.

Why a bounded scan in the dashboard rather than a store query: :meth:`Admin.search_jobs`
already narrows by status, queue and creation time on every store (with its indexes), and the
contract has no payload query, so the two filters it lacks (a task *prefix*, an *argument
value*) are applied here to pages of its answer. A scan reads at most :data:`BUDGET` jobs per
request and says so (``more``: where to go on), so one search never reads a whole table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tether.stores._contract import STATUSES, Admin, JobFilter, JobRecord, JobStatus

#: Jobs one request reads at most (in pages of :data:`STEP`).
BUDGET = 10_000
STEP = 1_000


@dataclass(frozen=True)
class Selection:
    """What a search or a bulk action selects. ``task``: exact name; ``prefix``: task names
    starting with it; ``arg``: an argument value (``v``: any positional or keyword argument
    equal to v; ``name=v``: keyword argument ``name`` equal to v). A string argument matches
    its text, any other value its JSON (``42``, ``true``, ``null``)."""

    status: JobStatus | None = None
    queue: str | None = None
    task: str | None = None
    prefix: str | None = None
    arg: str | None = None
    since: float | None = None

    @classmethod
    def from_params(cls, q: Any, since: float | None = None) -> Selection:
        def text(name: str) -> str | None:
            value = str(q.get(name) or "").strip()
            return value or None

        status = text("status")
        return cls(status=next((s for s in STATUSES if s == status), None),
                   queue=text("queue"), task=text("task"), prefix=text("prefix"),
                   arg=text("arg"), since=since)

    @property
    def scans(self) -> bool:
        """True when the store alone cannot answer (a prefix or an argument)."""
        return self.prefix is not None or self.arg is not None

    def store_filter(self) -> JobFilter:
        return JobFilter(status=self.status, queue=self.queue, task=self.task, since=self.since)

    def matches(self, job: JobRecord) -> bool:
        if self.prefix is not None and not job.task.startswith(self.prefix):
            return False
        return self.arg is None or arg_matches(job.payload, self.arg)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def arg_matches(payload: str, wanted: str) -> bool:
    """Whether a job's stored ``[args, kwargs, ...]`` holds the value ``wanted`` names."""
    try:
        value = json.loads(payload)
        args, kwargs = value[0], value[1]
    except (ValueError, IndexError, KeyError, TypeError):
        return False
    name, eq, v = wanted.partition("=")
    if eq and isinstance(kwargs, dict) and name.strip() in kwargs:
        return _text(kwargs[name.strip()]) == v.strip()
    values = [*(args if isinstance(args, list) else []),
              *(kwargs.values() if isinstance(kwargs, dict) else [])]
    return any(_text(a) == wanted for a in values)


@dataclass
class Found:
    """A page of matches; ``more``: the cursor to go on from (None: nothing left);
    ``examined``: how many jobs were read to find them."""

    jobs: list[JobRecord]
    more: int | None
    examined: int


def scan(store: Admin, sel: Selection, *, cursor: int | None = None, want: int = 50,
         budget: int = BUDGET) -> Found:
    """Up to ``want`` matches, newest first, below ``cursor``, reading at most ``budget``."""
    filt = sel.store_filter()
    if not sel.scans:
        jobs = store.search_jobs(filt, cursor=cursor, limit=want)
        return Found(jobs, jobs[-1].id if len(jobs) == want else None, len(jobs))
    found: list[JobRecord] = []
    examined = 0
    while examined < budget:
        size = min(STEP, budget - examined)
        page = store.search_jobs(filt, cursor=cursor, limit=size)
        for job in page:
            examined += 1
            cursor = job.id
            if sel.matches(job):
                found.append(job)
                if len(found) == want:
                    return Found(found, cursor, examined)
        if len(page) < size:
            return Found(found, None, examined)
    return Found(found, cursor, examined)
