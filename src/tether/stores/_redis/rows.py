"""Encoding between tether's dataclasses and the Redis store's script arguments / replies.

Times cross as text: Python's ``repr(float)`` round-trips exactly and the scripts store given
times verbatim (see ``_lib.lua``). An absent hash field means ``None``. A hash that does not
decode (edited by hand, or half-written by a foreign tool) raises ``StoreError`` naming the
job, never a raw ``KeyError``/``ValueError`` from here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from tether import _limits as limits
from tether._errors import JobNotFound, StoreError
from tether._text import clean_error
from tether.stores._contract import (
    FlowLimit,
    JobLinks,
    JobRecord,
    JobStatus,
    Lease,
    NewJob,
    Outcome,
)
from tether.stores._records import slot_builder

ENQUEUE_FIELDS = 14


def now_arg(now: float | None) -> str:
    """The ``now`` argument of a script: '' lets the script read Redis ``TIME``."""
    return "" if now is None else repr(float(now))


def num(value: float) -> str:
    return repr(float(value))


def enqueue_args(jobs: Sequence[NewJob]) -> list[str]:
    """enqueue.lua's 14 fields per job. A job whose fields but its payload are the very
    objects of the job before it (:func:`tether._limits.same_options`, and the same limit
    key: an ``enqueue_many`` batch) reuses that job's text with its own payload (issue #23:
    formatting the same numbers again was a tenth of the producer's time per job)."""
    args: list[str] = []
    prev: NewJob | None = None
    row: list[str] = []
    for job in jobs:
        if prev is not None and job.limit_key is prev.limit_key and limits.same_options(job, prev):
            row[1] = job.payload
            args += row
            continue
        prev = job
        row = [
            job.task,
            job.payload,
            job.queue,
            str(int(job.priority)),
            "" if job.run_at is None else num(job.run_at),
            num(job.delay),
            str(int(job.max_attempts)),
            str(int(job.max_stalls)),
            "0" if job.unique_key is None else "1",
            job.unique_key or "",
            "0" if job.limit_key is None else "1",
            job.limit_key or "",
            "1" if job.allow_failure else "0",
            # parents once each, in order (duplicates count once: NewJob.after)
            ",".join(str(int(p)) for p in dict.fromkeys(job.after)),
        ]
        args += row
    return args


def enqueued_ids(reply: Sequence[Any]) -> list[int]:
    """enqueue.lua's reply: the ids, or ``['unknown_parent', id]`` when an ``after`` id names
    no job (nothing was written): JobNotFound for that id, as every store raises it."""
    if len(reply) == 2 and reply[0] == "unknown_parent":
        raise JobNotFound(int(reply[1]))
    return [int(i) for i in reply]


def distinct_ids(job_ids: Sequence[int]) -> list[int]:
    """``get_jobs``' ids checked (at most MAX_PAGE of them, ValueError beyond) and each kept
    once, in the order asked."""
    if len(job_ids) > limits.MAX_PAGE:
        limits.check_page(len(job_ids))
    return list(dict.fromkeys(limits.check_job_id(i) for i in job_ids))


def links_from_reply(job_id: int, reply: Sequence[Any]) -> JobLinks:
    """job_links.lua's reply (``{waiting_on, allow_failure, parents, children}``)."""
    waiting_on, allow_failure, parents, children = reply
    return JobLinks(job_id, tuple(int(p) for p in parents), tuple(int(c) for c in children),
                    int(waiting_on), int(allow_failure) == 1)


def flow_args(flow: Sequence[FlowLimit]) -> list[str]:
    """claim_flow.lua's limits: their count, then six fields each ('' = not set)."""
    args = [str(len(flow))]
    for f in flow:
        args += [
            f.scope,
            f.name,
            "" if f.concurrency is None else str(int(f.concurrency)),
            "" if f.rate is None else str(int(f.rate)),
            num(f.per),
            "1" if f.per_key else "0",
        ]
    return args


def lease_args(leases: Iterable[Lease]) -> list[str]:
    args: list[str] = []
    for lease in leases:
        args += [str(int(lease.job_id)), str(int(lease.attempt)), lease.owner, lease.token]
    return args


def finish_args(outcomes: Sequence[Outcome]) -> list[str]:
    """finish.lua's outcomes: one JSON array of 11 strings per outcome (why one argument:
    finish.lua). ensure_ascii=False: the text crosses as UTF-8, decoded to the same bytes."""
    rows = [
        [
            str(int(o.lease.job_id)),
            str(int(o.lease.attempt)),
            o.lease.owner,
            o.lease.token,
            o.kind,
            "0" if o.result is None else "1",
            o.result or "",
            "0" if o.error is None else "1",
            "" if o.error is None else clean_error(o.error),
            "" if not o.reason else clean_error(o.reason, 200),
            num(o.retry_delay),
        ]
        for o in outcomes
    ]
    return [json.dumps(rows, ensure_ascii=False, separators=(",", ":"))]


#: claim_row's shape (_lib.lua): values per claimed job in the claim's flat reply.
CLAIM_ROW = 27


def claimed_jobs(flat: Sequence[Any], owner: str, nonce: str) -> list[JobRecord]:
    """claim.lua's (and claim_flow.lua's) reply: CLAIM_ROW values per job, in claim_row's
    order (_lib.lua), decoded by position. status, locked_by and lease_token are not sent:
    the claim wrote them (running, ``owner``, ``<nonce>:<id>``), and a replay returns only
    jobs whose hash still says exactly that."""
    if len(flat) % CLAIM_ROW:
        raise StoreError(
            f"redis claim reply of {len(flat)} values is not whole rows; "
            "the server runs another tether's scripts"
        )
    jobs: list[JobRecord] = []
    for at in range(0, len(flat), CLAIM_ROW):
        r = flat[at : at + CLAIM_ROW]
        try:
            jobs.append(_claimed(r, owner, nonce))
        except (KeyError, ValueError, TypeError) as exc:
            raise StoreError(
                f"redis job hash {r[3]!r} does not decode ({type(exc).__name__}: {exc}); it "
                "was not written by this tether"
            ) from exc
    return jobs


def legacy_uid(d: dict[str, str]) -> str:
    """The uid of a job hash written before uids existed: derived from its id and creation
    time (microseconds), so it is stable across reads and differs from any job that gets the
    same id later. Never written back: reading must not write."""
    seed = f"legacy:{d['id']}:{d.get('created_at', '')}".encode()
    return hashlib.sha1(seed, usedforsecurity=False).hexdigest()[:32]


def _opt(i: int) -> str:
    return f"None if r[{i}] is None else float(r[{i}])"


#: One claimed job from its CLAIM_ROW values (claim_row's order, _lib.lua), converted as
#: job_from_dict converts a hash; built by slot_builder (no frozen dataclass __init__: the
#: worker builds one per claimed job).
_claimed = slot_builder(JobRecord, "claimed", "r, owner, nonce", {
    "lease_until": _opt(0), "started_at": _opt(1), "cancel_requested": "r[2] == '1'",
    "id": "int(r[3])", "task": "r[4]", "queue": "r[5]", "payload": "r[6]",
    "status": "'running'", "priority": "int(r[7])", "run_at": "float(r[8])",
    "attempt": "int(r[9])", "max_attempts": "int(r[10])", "failures": "int(r[11])",
    "stall_count": "int(r[12])", "max_stalls": "int(r[13])", "interruptions": "int(r[14])",
    "locked_by": "owner", "created_at": "float(r[15])", "finished_at": _opt(16),
    "last_error": "r[17]", "failure_reason": "r[18]", "result": "r[19]",
    "checkpoint": "r[20]", "progress": "r[21]", "unique_key": "r[22]",
    "errors": "'[]' if r[23] is None else r[23]", "lease_token": "f'{nonce}:{r[3]}'",
    "uid": "r[24] or legacy_uid({'id': r[3], 'created_at': r[15] or ''})",
    "limit_key": "r[25]", "snoozes": "0 if r[26] is None else int(r[26])",
}, {"legacy_uid": legacy_uid})


def _opt_float(d: dict[str, str], key: str) -> float | None:
    value = d.get(key)
    return None if value is None else float(value)


def job_from_flat(flat: Sequence[Any]) -> JobRecord:
    """A Job from an HGETALL reply (flat field/value list, or a dict)."""
    d: dict[str, str] = dict(zip(flat[::2], flat[1::2], strict=True))
    return job_from_dict(d)


def job_from_dict(d: dict[str, str]) -> JobRecord:
    try:
        return _job(d)
    except (KeyError, ValueError, TypeError) as exc:
        raise StoreError(
            f"redis job hash {d.get('id', '?')!r} does not decode ({type(exc).__name__}: "
            f"{exc}); it was not written by this tether"
        ) from exc


def _job(d: dict[str, str]) -> JobRecord:
    return JobRecord(
        id=int(d["id"]),
        task=d["task"],
        queue=d["queue"],
        payload=d["payload"],
        status=cast(JobStatus, d["status"]),
        priority=int(d["priority"]),
        run_at=float(d["run_at"]),
        attempt=int(d["attempt"]),
        max_attempts=int(d["max_attempts"]),
        failures=int(d["failures"]),
        stall_count=int(d["stall_count"]),
        max_stalls=int(d["max_stalls"]),
        interruptions=int(d["interruptions"]),
        locked_by=d.get("locked_by"),
        lease_until=_opt_float(d, "lease_until"),
        created_at=float(d["created_at"]),
        started_at=_opt_float(d, "started_at"),
        finished_at=_opt_float(d, "finished_at"),
        last_error=d.get("last_error"),
        failure_reason=d.get("failure_reason"),
        result=d.get("result"),
        checkpoint=d.get("checkpoint"),
        progress=d.get("progress"),
        unique_key=d.get("unique_key"),
        cancel_requested=d.get("cancel_requested", "0") == "1",
        errors=d.get("errors", "[]"),
        lease_token=d.get("lease_token"),
        uid=d.get("uid") or legacy_uid(d),
        # absent in hashes written before issue 19: None and 0
        limit_key=d.get("limit_key"),
        snoozes=int(d.get("snoozes", "0")),
    )
