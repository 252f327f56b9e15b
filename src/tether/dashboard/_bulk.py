"""Bulk retry, cancel and delete of a filtered selection, in two steps: ``preview`` counts
what an action would touch (the confirmation page shows it), ``run`` does it.

Why the confirmation carries job ids: what the operator confirmed is what gets touched. A
retry or cancel acts on the listed ids only (a job that left the state meanwhile is skipped
by the store's own rules: ``retry_failed`` takes failed jobs only, ``cancel`` of a finished
job does nothing). Delete has one contract method, ``purge(queue, statuses)``, so a delete
selection must be exactly a queue and a state; its count comes from ``counts()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tether._errors import JobNotFound
from tether.dashboard._scan import Selection, scan
from tether.stores._contract import Admin, JobStatus

ACTIONS = ("retry", "cancel", "delete")
#: Jobs one confirmation covers at most (run it again for more).
MOST = 1_000
LIVE: tuple[JobStatus, ...] = ("waiting", "pending", "running")
DELETABLE: tuple[JobStatus, ...] = ("waiting", "pending", "done", "failed", "cancelled")


@dataclass
class Preview:
    action: str
    count: int
    ids: list[int] = field(default_factory=list)
    capped: bool = False
    refused: str | None = None

    def json(self) -> dict[str, Any]:
        return {"action": self.action, "count": self.count, "ids": self.ids,
                "capped": self.capped, "refused": self.refused}


def preview(store: Admin, action: str, sel: Selection) -> Preview:
    if action not in ACTIONS:
        return Preview(action, 0, refused=f"unknown bulk action {action!r}")
    if action == "delete":
        if sel.queue is None or sel.status is None or sel.task or sel.prefix or sel.arg \
                or sel.since is not None:
            return Preview(action, 0, refused="delete takes a selection of exactly one queue "
                           "and one state (the store deletes by queue and state)")
        if sel.status not in DELETABLE:
            return Preview(action, 0, refused="running jobs cannot be deleted: cancel them")
        count = sum(c.count for c in store.counts()
                    if c.queue == sel.queue and c.status == sel.status)
        return Preview(action, count)
    if action == "retry":
        if sel.status not in (None, "failed"):
            return Preview(action, 0, refused="only failed jobs can be retried")
        states: tuple[JobStatus, ...] = ("failed",)
    elif sel.status is not None and sel.status not in LIVE:
        return Preview(action, 0, refused=f"{sel.status} jobs are finished: nothing to cancel")
    else:
        states = (sel.status,) if sel.status is not None else LIVE
    # One bounded scan per state (the store selects by state with its index), so a preview
    # reads at most len(states) * BUDGET jobs however large the table is.
    ids: list[int] = []
    capped = False
    for state in states:
        found = scan(store, replace(sel, status=state), want=MOST + 1 - len(ids))
        ids += [j.id for j in found.jobs]
        capped = capped or found.more is not None
        if len(ids) > MOST:
            break
    capped = capped or len(ids) > MOST
    return Preview(action, min(len(ids), MOST), ids[:MOST], capped)


def run(store: Admin, action: str, ids: list[int], sel: Selection) -> str:
    """Do a confirmed bulk action; returns what was done, for the note."""
    if action == "retry":
        result = store.retry_failed(ids[:MOST]) if ids else None
        moved = result.retried if result else 0
        conflicts = len(result.conflicts) if result else 0
        extra = f", {conflicts} kept failed (unique key held)" if conflicts else ""
        return f"retried {moved} of {len(ids)} selected job(s){extra}"
    if action == "cancel":
        said: dict[str, int] = {}
        for job_id in ids[:MOST]:
            try:
                outcome: str = store.cancel(job_id)
            except JobNotFound:  # deleted since the preview
                outcome = "gone"
            said[outcome] = said.get(outcome, 0) + 1
        parts = ", ".join(f"{k} {v}" for k, v in sorted(said.items()))
        return f"cancel of {len(ids)} selected job(s): {parts or 'nothing'}"
    if action == "delete":
        check = preview(store, action, sel)
        if check.refused:
            raise ValueError(check.refused)
        assert sel.queue is not None and sel.status is not None
        deleted = store.purge(sel.queue, [sel.status])
        return f"deleted {deleted} {sel.status} job(s) from {sel.queue}"
    raise ValueError(f"unknown bulk action {action!r}")
