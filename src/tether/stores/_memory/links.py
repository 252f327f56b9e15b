"""Job dependencies in the memory store (issue #20, invariant 6 of the contract): the link
tables and the one routine that resolves a parent's links.

Invariants:

* **A link resolves once.** ``unresolved[parent]`` holds the children whose link from
  ``parent`` has not resolved; resolving pops the whole set, so a replayed or stale finish, or
  a retried dead letter that ends again, finds nothing left to resolve. A job without children
  has no entry: what the common finish pays is one failed dict lookup.
* **Resolution happens in the write that ends the parent.** :meth:`Shared.put
  <tether.stores._memory.state.Shared.put>` calls :meth:`Links.resolve` whenever a row becomes
  terminal, and ``Shared.delete`` when a job that was not terminal is deleted, so no write path
  (finish, reap, cancel, purge, an enqueue inserting a cancelled child) can forget it, and it
  happens under the same lock hold as that write.
* **Only ``waiting`` children change**; a link to a child in any other status just resolves.
  Transitive cancellation is a worklist, not recursion, so a chain of any length is one write.
* **Links live as long as the child**: ``parents[child]`` is kept when a parent is deleted
  (``job_links`` still lists it) and dropped with the child (:meth:`Links.forget`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from tether.stores._contract import DEPENDENCY_FAILED, TERMINAL, JobLinks, JobRecord
from tether.stores._memory.rules import error_record

#: How a deleted parent is named in its children's error record.
DELETED = "deleted"


def dependency_error(parent: int, ended: str) -> str:
    """The error text of a job cancelled because ``parent`` ended ``ended`` (or was deleted)."""
    if ended == DELETED:
        return f"{DEPENDENCY_FAILED}: job {parent} was deleted"
    return f"{DEPENDENCY_FAILED}: job {parent} ended {ended}"


def cancelled_by(job: JobRecord, parent: int, ended: str, t: float) -> JobRecord:
    """``job`` cancelled at ``t`` because ``parent`` ended ``ended``: reason, last error and
    one error record (attempt and owner are the job's: 0 and None, it never ran)."""
    error = dependency_error(parent, ended)
    return replace(job, status="cancelled", failure_reason=DEPENDENCY_FAILED, finished_at=t,
                   last_error=error, errors=error_record(job, error, DEPENDENCY_FAILED, t))


class Rows(Protocol):
    """What the link routines need of :class:`~tether.stores._memory.state.Shared` (named
    here, not imported: state.py imports this module)."""

    jobs: dict[int, JobRecord]

    def store(self, job: JobRecord) -> JobRecord | None: ...


class Links:
    """The (parent, child) links of one :class:`~tether.stores._memory.state.Shared`. Touch
    only under its lock."""

    def __init__(self) -> None:
        #: child -> its parents, in ``after`` order without duplicates.
        self.parents: dict[int, tuple[int, ...]] = {}
        #: parent -> its children (those still stored).
        self.children: dict[int, set[int]] = {}
        #: parent -> children whose link from it has not resolved yet.
        self.unresolved: dict[int, set[int]] = {}
        #: waiting child -> how many of its links have not resolved.
        self.waiting_on: dict[int, int] = {}
        self.allow_failure: set[int] = set()

    def initial(
        self, jobs: dict[int, JobRecord], parents: tuple[int, ...], allow_failure: bool,
    ) -> tuple[int, tuple[int, str] | None]:
        """From the parents' statuses now: (how many are unresolved, the first parent that
        cancels the job as (id, status), or None)."""
        open_ = 0
        for parent in parents:
            status = jobs[parent].status
            if status not in TERMINAL:
                open_ += 1
            elif status != "done" and not allow_failure:
                return 0, (parent, status)
        return open_, None

    def add(self, child: JobRecord, parents: tuple[int, ...], allow_failure: bool,
            jobs: dict[int, JobRecord]) -> None:
        """Record the links of a new job (its status already decided by :meth:`initial`);
        only a waiting child has unresolved links."""
        self.parents[child.id] = parents
        if allow_failure:
            self.allow_failure.add(child.id)
        open_ = 0
        for parent in parents:
            self.children.setdefault(parent, set()).add(child.id)
            if child.status == "waiting" and jobs[parent].status not in TERMINAL:
                self.unresolved.setdefault(parent, set()).add(child.id)
                open_ += 1
        if open_:
            self.waiting_on[child.id] = open_

    def resolve(self, db: Rows, parent: int, ended: str, t: float) -> None:
        """Resolve every unresolved link of ``parent``, which just ended ``ended`` (a terminal
        status, or :data:`DELETED`) at ``t``, and what that cancels, transitively."""
        work = [(parent, ended)]
        while work:
            source, how = work.pop()
            kids = self.unresolved.pop(source, None)
            if not kids:
                continue
            for kid in sorted(kids):
                job = db.jobs.get(kid)
                if job is None or job.status != "waiting":
                    continue  # no longer waiting: the link just resolves
                if how == "done" or kid in self.allow_failure:
                    left = self.waiting_on.get(kid, 1) - 1
                    if left > 0:
                        self.waiting_on[kid] = left
                        continue
                    self.waiting_on.pop(kid, None)
                    db.store(replace(job, status="pending", run_at=max(job.run_at, t)))
                else:
                    self.waiting_on.pop(kid, None)
                    db.store(cancelled_by(job, source, how, t))
                    work.append((kid, "cancelled"))

    def has_live_child(self, db: Rows, parent: int) -> bool:
        """True when a child of ``parent`` is not terminal (prune must keep the parent)."""
        return any(db.jobs[kid].status not in TERMINAL for kid in self.children.get(parent, ()))

    def forget(self, job_id: int) -> None:
        """Drop the links where ``job_id`` is the child (it is being deleted)."""
        self.waiting_on.pop(job_id, None)
        self.allow_failure.discard(job_id)
        for parent in self.parents.pop(job_id, ()):
            for table in (self.children, self.unresolved):
                kids = table.get(parent)
                if kids is not None:
                    kids.discard(job_id)
                    if not kids:
                        del table[parent]

    def read(self, job: JobRecord) -> JobLinks:
        return JobLinks(
            job_id=job.id, parents=self.parents.get(job.id, ()),
            children=tuple(sorted(self.children.get(job.id, ()))),
            waiting_on=self.waiting_on.get(job.id, 0) if job.status == "waiting" else 0,
            allow_failure=job.id in self.allow_failure)


__all__ = ["DELETED", "Links", "cancelled_by", "dependency_error"]
