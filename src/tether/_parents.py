"""What a running workflow step reads of its parents: their ids and how each ended.

Read once per attempt (``JobContext`` keeps it): the step runs only once every parent is
terminal, so nothing read here can change under it. Two store round trips: ``job_links``
(the ids, in ``after`` order) and one ``get_jobs`` for all of them, whatever their number.

A process-pool child has no store: its ``ParentLink`` reads through its worker instead (the
``read_parents`` method, found here by name), with the same answer as text on the pipe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tether.stores._contract import Basics

__all__ = ["ParentOutcome", "Parents", "from_wire", "read", "to_wire"]


@dataclass(frozen=True, slots=True)
class ParentOutcome:
    """One parent as its child sees it. ``status`` None: the parent is gone (purged, or
    pruned once this job no longer needed it); ``result``: the stored JSON text when done."""

    id: int
    task: str | None
    status: str | None
    result: str | None


@dataclass(frozen=True, slots=True)
class Parents:
    ids: tuple[int, ...]
    outcomes: tuple[ParentOutcome, ...]


def read(store: Any, job_id: int) -> Parents:
    """The parents of ``job_id``, from ``store`` (a store, or a child's link to its worker)."""
    own = getattr(store, "read_parents", None)
    if own is not None:  # a process-pool child: the worker reads for it
        found: Parents = own(job_id)
        return found
    basics: Basics = store
    ids = basics.job_links(job_id).parents
    records = {r.id: r for r in basics.get_jobs(ids)} if ids else {}
    outcomes = []
    for parent in ids:
        record = records.get(parent)
        outcomes.append(ParentOutcome(parent, None, None, None) if record is None else
                        ParentOutcome(parent, record.task, record.status, record.result))
    return Parents(tuple(ids), tuple(outcomes))


def to_wire(parents: Parents) -> str:
    """As JSON text, for the pipe to a process-pool child (never pickled)."""
    return json.dumps([[o.id, o.task, o.status, o.result] for o in parents.outcomes])


def from_wire(text: str) -> Parents:
    outcomes = tuple(ParentOutcome(int(i), t, s, r) for i, t, s, r in json.loads(text))
    return Parents(tuple(o.id for o in outcomes), outcomes)
