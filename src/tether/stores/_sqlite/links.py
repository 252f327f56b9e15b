"""Job dependencies in the SQLite store (issue #20; invariant 6 of the contract).

Invariants, kept the SQLite way:

* **Resolved in the write that decides.** A child's links are written by its enqueue, and a
  parent's are resolved by the write that ends it (finish, reap_expired, cancel, purge), each
  in its one ``BEGIN IMMEDIATE`` transaction: the file's write lock serialises every writer,
  so a parent cannot end between a child's enqueue reading its status and writing the link,
  and two parents of one child ending on different workers decrement its counter one after
  the other. Nothing is left for later, so a crash between two writes can lose nothing.
* **Each link resolves once.** ``job_links.resolved`` is set by the write that resolves it,
  and only unresolved links are counted: a replayed or stale finish is fenced before it gets
  here, and a dead letter retried and ending again finds its links resolved.
* **Only jobs with children pay.** The writes that end jobs return ``jobs.has_children`` of
  the rows they changed; :func:`resolve` runs only for those. A claim never sees a waiting job
  (it is not in the claim index), and an enqueue without ``after`` is the statement it was.

The statements are in ``links.sql``; this module runs them inside the caller's transaction
(building the small JSON batches between them) and reads ``get_jobs`` and ``job_links``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from tether._errors import JobNotFound
from tether._limits import check_job_id, check_page
from tether.stores import _queries as queries
from tether.stores._contract import JobLinks, JobRecord, NewJob
from tether.stores._sqlite.connection import Connections, guarded
from tether.stores._sqlite.rows import job_from_row

L = queries.load("tether.stores._sqlite", "links.sql")


class BatchParents:
    """The parents of one ``enqueue`` batch that has some, made ready before its transaction
    (:meth:`of` gives None for a batch without any: its enqueue is the one it was before
    workflows, and pays nothing here).

    :meth:`annotate` adds to each job's parameters its parents (``after``: without
    duplicates, in ``after`` order, as JSON; None without parents, for a job inserted by
    the plain statement; jobs with the same ``after``, a fan-out, share one text) and its
    ``allow_failure``. Inside the transaction :meth:`check` refuses an unknown parent before
    any insert, :meth:`insert` adds a job with parents, and :meth:`link` writes every link of
    the batch and marks the parents, once per batch.
    """

    def __init__(self, jobs: Sequence[NewJob]) -> None:
        self.jobs = jobs
        #: Every after id in batch order (JobNotFound names the first unknown one).
        listed = [parent for job in jobs for parent in job.after]
        self.listed = json.dumps(listed)
        self.parents = json.dumps(list(dict.fromkeys(listed)))
        self._links: list[str] = []

    @classmethod
    def of(cls, jobs: Sequence[NewJob]) -> BatchParents | None:
        return cls(jobs) if any(job.after for job in jobs) else None

    def annotate(self, rows: list[dict[str, Any]]) -> None:
        texts: dict[tuple[int, ...], str] = {}
        for job, row in zip(self.jobs, rows, strict=True):
            text = None
            if job.after:
                text = texts.get(job.after)
                if text is None:
                    text = texts[job.after] = json.dumps(list(dict.fromkeys(job.after)))
            row["after"] = text
            row["allow_failure"] = int(job.allow_failure)

    def check(self, cur: sqlite3.Cursor) -> None:
        """JobNotFound for the first ``after`` id naming no job, before anything is inserted
        (the caller's transaction then rolls back: the batch is all or nothing)."""
        missing = cur.execute(L["unknown_parent"], {"ids": self.listed}).fetchone()
        if missing is not None:
            raise JobNotFound(int(missing[0]))

    def insert(self, cur: sqlite3.Cursor, row: dict[str, Any]) -> int:
        """Insert one job with parents (``row``: enqueue_insert's parameters plus ``after``
        and ``allow_failure``) in the status its parents give it; its links wait for
        :meth:`link`."""
        cur.execute(L["enqueue_insert_after"], row)
        child = int(cur.lastrowid or 0)
        self._links.append(f"[{child},{row['after']}]")
        return child

    def link(self, cur: sqlite3.Cursor) -> None:
        """The links of every job :meth:`insert` added, and the parents' mark."""
        if self._links:
            cur.execute(L["link_parents"], {"links": f"[{','.join(self._links)}]"})
            cur.execute(L["mark_parents"], {"ids": self.parents})


def resolve(conn: sqlite3.Connection, ended: list[list[Any]], now: float) -> tuple[bool, bool]:
    """Resolve the links of jobs that just ended, inside the caller's write: ``ended`` holds
    ``[id, how]`` (``how``: the new status, or ``"purged"``) of jobs that have children.
    Returns (a child was released, a child was cancelled), for waking workers and waiters."""
    ids = [row[0] for row in ended]
    cancelled = False
    if any(how != "done" for _, how in ended):
        doomed = conn.execute(L["cancel_descendants"],
                              {"ended": json.dumps(ended), "now": now}).fetchall()
        ids.extend(row[0] for row in doomed)
        cancelled = bool(doomed)
    batch = json.dumps(ids)
    released = conn.execute(L["release_children"], {"ids": batch, "now": now}).fetchall()
    conn.execute(L["resolve_links"], {"ids": batch})
    return bool(released), cancelled


def any_link(conn: sqlite3.Connection) -> bool:
    """Whether any job has a parent (prune's choice of statement, in its transaction)."""
    return bool(conn.execute(L["any_link"]).fetchone()[0])


def unlink(conn: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Drop the links of deleted jobs where they were the child (prune, purge)."""
    if ids:
        conn.execute(L["unlink_children"], {"ids": json.dumps(list(ids))})


class SQLiteLinks:
    """``get_jobs`` and ``job_links`` of :class:`SQLiteStore` (the reads of workflows)."""

    _db: Connections

    @guarded
    def get_jobs(self, job_ids: Sequence[int]) -> list[JobRecord]:
        if not job_ids:
            return []
        check_page(len(job_ids))
        ids = list(dict.fromkeys(check_job_id(i) for i in job_ids))
        rows = self._db.get().execute(L["get_jobs"], {"ids": json.dumps(ids)})
        found = {job.id: job for job in map(job_from_row, rows)}
        return [found[i] for i in ids if i in found]

    @guarded
    def job_links(self, job_id: int) -> JobLinks:
        job_id = check_job_id(job_id)
        row = self._db.get().execute(L["job_links"], {"id": job_id}).fetchone()
        if row is None:
            raise JobNotFound(job_id)
        parents = sorted(json.loads(row[2]))
        return JobLinks(
            job_id=job_id,
            parents=tuple(int(parent) for _, parent in parents),
            children=tuple(sorted(int(child) for child in json.loads(row[3]))),
            waiting_on=int(row[0]),
            allow_failure=row[1] == 1,
        )


__all__ = ["BatchParents", "L", "SQLiteLinks", "any_link", "resolve", "unlink"]
