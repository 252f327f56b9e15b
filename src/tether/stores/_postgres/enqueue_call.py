"""Which statement an enqueue runs and with what parameters: shared by the sync store and the
async producer, so both send the same SQL and write the same request-id replay record.

A batch where some job names parents (``NewJob.after``) runs ``enqueue_after``
(workflows.sql); a batch without parents or unique keys runs ``enqueue_shared`` when its jobs
differ only in payload, else ``enqueue_plain``; the rest ``enqueue`` (producers.sql).

Checks the batch first (:func:`tether._limits.check_jobs`, the request id), so both raise the
same ValueError before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tether import _limits as limits
from tether._errors import JobNotFound
from tether.stores._batches import only_payloads_differ
from tether.stores._contract import NewJob
from tether.stores._postgres.literals import float_array, int_array, text_array


@dataclass(frozen=True, slots=True)
class EnqueueCall:
    """``name`` with ``params``; result row ``slot[i]`` is the id of input job ``i``."""

    name: str
    params: dict[str, Any]
    slot: list[int] | None  # None: one row per input job, in order


def enqueue_call(
    jobs: Sequence[NewJob], *, now: float | None, channel: str, request_id: str | None,
    jobs_key: int, gate: bool
) -> EnqueueCall | None:
    """None for an empty batch (nothing to send). ``gate``: the statement may skip its NOTIFY
    when no worker waits (``jobs_key``, see producers.sql); false inside a caller's
    transaction, where the key would be held until the caller commits."""
    limits.check_jobs(jobs)
    if request_id is not None:
        limits.check_text(request_id, "request_id", limit=limits.MAX_NAME)
    if not jobs:
        return None
    base: dict[str, Any] = {"now": now, "channel": channel, "request_id": request_id,
                            "jobs_key": jobs_key, "gate": gate}
    linked = any(job.after for job in jobs)
    if len(jobs) == 1 and jobs[0].unique_key is None and not linked:
        job = jobs[0]
        params = {**base, "task": job.task, "payload": job.payload, "queue": job.queue,
                  "priority": job.priority, "run_at": job.run_at,
                  "delay": float(job.delay), "max_attempts": job.max_attempts,
                  "max_stalls": job.max_stalls, "limit_key": job.limit_key}
        return EnqueueCall("enqueue_one", params, None)
    # Repeated unique_keys within the batch fold onto their first occurrence here, so the
    # statement's ON CONFLICT never meets the same key twice.
    first: dict[str, int] = {}
    sent: list[NewJob] = []
    slot: list[int] = []
    for job in jobs:
        if job.unique_key is not None and job.unique_key in first:
            slot.append(first[job.unique_key])
            continue
        if job.unique_key is not None:
            first[job.unique_key] = len(sent)
        slot.append(len(sent))
        sent.append(job)
    params = {
        **base,
        "tasks": [j.task for j in sent],
        "payloads": [j.payload for j in sent],
        "queues": [j.queue for j in sent],
        "priorities": [j.priority for j in sent],
        "run_ats": [j.run_at for j in sent],
        "delays": [float(j.delay) for j in sent],
        "max_attempts": [j.max_attempts for j in sent],
        "max_stalls": [j.max_stalls for j in sent],
        "unique_keys": [j.unique_key for j in sent],
        "limit_keys": [j.limit_key for j in sent],
    }
    if not linked and not first:  # no unique_key in the batch: the plain statement
        shared = _shared_params(base, sent)
        if shared is not None:
            return EnqueueCall("enqueue_shared", shared, slot)
        return EnqueueCall("enqueue_plain", _plain_params(base, sent), slot)
    if not linked:
        return EnqueueCall("enqueue", params, slot)
    return EnqueueCall("enqueue_after", {**params, **_links(jobs, sent)}, slot)


def _shared_params(base: dict[str, Any], sent: list[NewJob]) -> dict[str, Any] | None:
    """``enqueue_shared``'s parameters when only the payloads of the batch differ
    (``only_payloads_differ``), else None; the first job's other values, as float8 where
    the statement casts them."""
    if not only_payloads_differ(sent):
        return None
    first = sent[0]
    return {**base, "payloads": text_array([j.payload for j in sent]), "task": first.task,
            "queue": first.queue, "priority": int(first.priority),
            "run_at": None if first.run_at is None else float(first.run_at),
            "delay": float(first.delay), "max_attempts": int(first.max_attempts),
            "max_stalls": int(first.max_stalls), "limit_key": first.limit_key}


def _plain_params(base: dict[str, Any], sent: list[NewJob]) -> dict[str, Any]:
    """``enqueue_plain``'s parameters: the arrays as literals (:mod:`literals`), which cost
    a tenth of what psycopg's list dumpers do."""
    return {
        **base,
        "tasks": text_array([j.task for j in sent]),
        "payloads": text_array([j.payload for j in sent]),
        "queues": text_array([j.queue for j in sent]),
        "priorities": int_array([j.priority for j in sent]),
        "run_ats": float_array([j.run_at for j in sent]),
        "delays": float_array([j.delay for j in sent]),
        "max_attempts": int_array([j.max_attempts for j in sent]),
        "max_stalls": int_array([j.max_stalls for j in sent]),
        "limit_keys": text_array([j.limit_key for j in sent]),
    }


def _links(jobs: Sequence[NewJob], sent: list[NewJob]) -> dict[str, Any]:
    """``enqueue_after``'s extra parameters (workflows.sql): the links of the jobs sent,
    flattened, each job's parents once, in their first order (duplicates in ``after`` count
    once); and every id named in the batch, in batch then ``after`` order, a job folded onto
    an earlier one with its unique_key included: each must exist (the first that does not is
    the JobNotFound), though a folded job links nothing."""
    children: list[int] = []
    parents: list[int] = []
    pos: list[int] = []
    for ordinal, job in enumerate(sent, start=1):
        for place, parent in enumerate(dict.fromkeys(job.after), start=1):
            children.append(ordinal)
            parents.append(parent)
            pos.append(place)
    asked = list(dict.fromkeys(parent for job in jobs for parent in job.after))
    return {"link_jobs": children, "link_parents": parents, "link_pos": pos,
            "asked": asked, "parent_ids": sorted(asked),
            "allow_failures": [j.allow_failure for j in sent]}


def ids_of(call: EnqueueCall, rows: list[tuple[Any, ...]]) -> list[int]:
    """The ids in input order; JobNotFound when ``enqueue_after`` found a parent missing (it
    then wrote nothing and returned that one row)."""
    if call.name == "enqueue_after" and rows and rows[0][1] is not None:
        raise JobNotFound(int(rows[0][1]))
    ids = [int(row[0]) for row in rows]
    return ids if call.slot is None else [ids[i] for i in call.slot]


__all__ = ["EnqueueCall", "enqueue_call", "ids_of"]
