"""What the stores' ``enqueue_many`` paths share about a batch's shape.

One ``enqueue_many`` call makes jobs that differ only in their payloads (its options are the
batch's): a store can then bind every other value once instead of once per job (issue #23).
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.stores._contract import NewJob


def only_payloads_differ(jobs: Sequence[NewJob]) -> bool:
    """Every job has the first one's task, queue, priority, run_at, delay, budgets and limit
    key (equal values store the same: ``True`` and ``1`` bind as 1, a run_at as a float).
    The callers send no unique key and no parents on this path."""
    first = jobs[0]
    head = (first.task, first.queue, first.priority, first.run_at, first.delay,
            first.max_attempts, first.max_stalls, first.limit_key)
    return all((job.task, job.queue, job.priority, job.run_at, job.delay, job.max_attempts,
                job.max_stalls, job.limit_key) == head for job in jobs)


__all__ = ["only_payloads_differ"]
