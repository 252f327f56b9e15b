"""Job dependencies on the PostgreSQL store (issue #20): the reads of the
:class:`~tether.stores._contract.Basics` role that workflows add, ``get_jobs`` and
``job_links`` (statements in ``workflows.sql``).

The writes are elsewhere, each in the statement it belongs to: ``enqueue_after`` (chosen by
``enqueue_call.py`` for a batch that names parents) inserts the links; finish, reap_expired,
cancel and purge resolve them through the ``resolve_links`` function (migration 0008) in
their own statement; prune keeps a parent while a child is not terminal. Invariant 6 of the
contract holds under READ COMMITTED because the enqueue locks its parents' rows and the
resolution reads with a snapshot taken after the parent's row lock (workflows.sql says how).
"""

from __future__ import annotations

from collections.abc import Sequence

from tether import _limits as limits
from tether._errors import JobNotFound
from tether.stores._contract import JobLinks, JobRecord
from tether.stores._postgres.plumbing import Plumbing


class PostgresWorkflows(Plumbing):
    """``get_jobs`` and ``job_links`` of :class:`PostgresStore` (the Basics role)."""

    def get_jobs(self, job_ids: Sequence[int]) -> list[JobRecord]:
        if not job_ids:
            return []
        limits.check_page(len(job_ids))
        ids = list(dict.fromkeys(limits.check_job_id(i) for i in job_ids))
        return [JobRecord(*row) for row in self._rows("get_jobs", {"ids": ids})]

    def job_links(self, job_id: int) -> JobLinks:
        row = self._one("job_links", {"id": limits.check_job_id(job_id)})
        if row is None:
            raise JobNotFound(job_id)
        waiting_on, allow_failure, parents, children = row
        return JobLinks(job_id, tuple(int(i) for i in parents), tuple(int(i) for i in children),
                        int(waiting_on), bool(allow_failure))


__all__ = ["PostgresWorkflows"]
