"""The lease path of the PostgreSQL store (the :class:`~tether.stores._contract.Leases` role):
claim, heartbeat, finish, the fenced writes, worker rows, and waking idle workers (statements
in ``queries.sql``).

Invariants (the contract's 1 and 2, kept the PostgreSQL way):

1. **The claim is the lease grant, in one statement.** A CTE picks due ``pending`` rows
   ``FOR UPDATE SKIP LOCKED`` in (priority, run_at, id) order from a partial index, and the
   same statement's ``UPDATE ... RETURNING`` sets ``running``, ``locked_by``, ``lease_until``,
   ``attempt + 1`` and ``lease_token = nonce:id`` using the database's clock (unless a test
   passes ``now``). Row locks plus the UPDATE's re-check of ``status`` mean no (job, attempt)
   is ever granted twice. The rows come back without what the claim decided for all of
   them (status ``running``, the owner, the token ``nonce:id``): :mod:`claimrow` fills those
   in.
2. **Every write about a claimed job is fenced** by ``(id, attempt, locked_by, lease_token)``
   and ``status = 'running'`` in its WHERE clause. Heartbeat and finish fence each row of a
   batch; what RETURNING leaves out was rejected (finish: unless it is a replay of an outcome
   the same claim already applied, which the kept token recognises).

``finish(conn=)`` writes the completion inside a caller's transaction (the
:class:`~tether.stores._contract.Transactional` ability).
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Any

from tether import _limits as limits
from tether._errors import ConfigError
from tether._text import clean_error
from tether.stores._contract import (
    FlowLimit,
    HeartbeatResult,
    JobRecord,
    Lease,
    Outcome,
    WorkerInfo,
)
from tether.stores._postgres.claimrow import claimed_job
from tether.stores._postgres.connection import Conn
from tether.stores._postgres.flow import flow_claim
from tether.stores._postgres.listen import Listener
from tether.stores._postgres.plumbing import Plumbing

_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "stalled", "snoozed"})
_REASON = {"error": "error", "dead": "error", "released": "released",
           "cancelled": "cancelled", "done": "done", "stalled": "stalled",
           "snoozed": "snoozed"}


class PostgresLeases(Plumbing):
    """The :class:`~tether.stores._contract.Leases` role of :class:`PostgresStore`."""

    _listener: Listener

    def claim(
        self,
        owner: str,
        queues: Sequence[str],
        limit: int,
        lease_ttl: float,
        *,
        now: float | None = None,
        request_id: str | None = None,
        flow: Sequence[FlowLimit] = (),
    ) -> list[JobRecord]:
        if limit <= 0 or not queues:
            return []
        nonce = secrets.token_hex(16) if request_id is None else request_id
        # A granted claim with a request id is recorded under its own prefix, apart from the
        # enqueue records keyed by the bare request id (queries.sql, claim).
        request = None if request_id is None else f"claim:{request_id}"
        params: dict[str, Any] = {"owner": owner, "limit": limit, "ttl": lease_ttl, "now": now,
                                  "nonce": nonce, "request": request}
        if flow:  # a separate statement set (flow.py): the plain claim stays as it was
            rows = flow_claim(self, flow, queues, params)
        elif len(set(queues)) == 1:
            params["queue"] = queues[0]
            rows = self._rows("claim", params)
        else:
            params["queues"] = list(queues)
            rows = self._rows("claim_queues", params)
        jobs = [claimed_job(row, owner, nonce) for row in rows]
        if jobs:
            newest = max(jobs, key=lambda job: job.id)
            self._watch.saw_claimed((newest.id, newest.uid))
        return jobs

    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        # Sorted by id so concurrent batch writes touching the same rows lock them in one order.
        ordered = sorted(set(leases), key=lambda lease: (lease.job_id, lease.attempt))
        params = {
            "worker": owner,
            "ids": [lease.job_id for lease in ordered],
            "attempts": [lease.attempt for lease in ordered],
            "owners": [lease.owner for lease in ordered],
            "tokens": [lease.token for lease in ordered],
            "ttl": lease_ttl,
            "now": now,
        }
        held: set[Lease] = set()
        cancel: set[Lease] = set()
        for job_id, attempt, locked_by, token, cancel_requested in self._rows("heartbeat", params):
            lease = Lease(int(job_id), int(attempt), str(locked_by), str(token))
            held.add(lease)
            if cancel_requested:
                cancel.add(lease)
        return HeartbeatResult(
            lost=frozenset(set(ordered) - held), cancel_requested=frozenset(cancel)
        )

    def finish(
        self, outcomes: Sequence[Outcome], *, now: float | None = None, conn: Conn | None = None
    ) -> list[Lease]:
        # The whole batch is checked before anything is written. Leases are keyed by their
        # fields as a plain tuple, which is what RETURNING gives back: hashing a Lease runs
        # its dataclass __hash__ in Python, and a batch hashed each lease nine times.
        checked = [(o, _key(o.lease), _check_outcome(o)) for o in outcomes]
        batch: dict[_Key, tuple[Outcome, str]] = {}
        for outcome, key, digest in checked:
            # The first outcome for a lease is the one fenced and applied. Any later one for
            # the same lease in this call is answered as it would be in a later call: an
            # exact copy shares the first one's fate (a replay of what landed), another
            # outcome is looked up as a replay below (and so rejected unless an earlier call
            # applied exactly it). Distinct leases of one job are all sent, each fenced.
            if key not in batch:
                batch[key] = (outcome, digest)
        if not batch:
            return []
        # Sorted by (id, attempt, ...) so concurrent batch writes lock rows in one order.
        ordered = sorted(batch.items())
        batch_json = json.dumps([
            {"id": key[0], "attempt": key[1], "owner": key[2], "token": key[3], "kind": o.kind,
             "result": o.result, "error": None if o.error is None else clean_error(o.error),
             "reason": _reason(o), "retry_delay": float(o.retry_delay), "digest": digest}
            for key, (o, digest) in ordered
        ])
        # ids as an array literal built from ints: no per-element work in psycopg's dumper.
        ids_literal = "{" + ",".join([str(key[0]) for key, _ in ordered]) + "}"
        params = {"now": now, "batch": batch_json, "ids": ids_literal, "done": self.done_channel,
                  "done_key": self.done_key, "gate": conn is None, "channel": self.channel}
        applied = set(self._rows("finish", params, conn))  # (id, attempt, owner, token)
        # A lost lease, a replay of an outcome whose reply was lost, or a later, different
        # outcome for a lease of this call: recognised only as an exact replay.
        missed = {(key, digest) for _, key, digest in checked
                  if key not in applied or digest != batch[key][1]}
        if not missed:
            return []
        accepted = _replays(self._rows("finish_replays", {
            "batch": json.dumps([{"id": key[0], "attempt": key[1], "owner": key[2],
                                  "token": key[3], "digest": d} for key, d in missed]),
            "ids": "{" + ",".join(str(key[0]) for key, _ in missed) + "}",
        }, conn))
        return list(dict.fromkeys(o.lease for o, key, d in checked
                                  if (key, d) in missed and (key, d) not in accepted))

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced("save_checkpoint", lease,
                            limits.check_json_text(checkpoint, "checkpoint"))

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced("set_progress", lease, limits.check_json_text(progress, "progress"))

    def _fenced(self, name: str, lease: Lease, value: str) -> bool:
        params = {"id": lease.job_id, "attempt": lease.attempt, "owner": lease.owner,
                  "token": lease.token, "value": value}
        return self._one(name, params) is not None

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "concurrency": worker.concurrency,
            "now": now,
        }
        self._rows("register_worker", params)

    def unregister_worker(self, worker_id: str) -> None:
        self._rows("unregister_worker", {"id": worker_id})
        self._listener.forget_signals(worker_id)

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Never raises: the listening connection reconnects in the background, and its
        return after an outage counts as a wake-up."""
        return self._listener.wait(queues, timeout)

    def wait_for_signal(self, owner: str, timeout: float) -> bool:
        """Never raises, like wait_for_jobs: on the same listening connection."""
        return self._listener.wait_signal(owner, timeout)

    def notify(self, queues: Sequence[str]) -> None:
        if queues:
            self._rows("notify", {"channel": self.channel, "queues": sorted(set(queues))})


def _reason(outcome: Outcome) -> str:
    """The reason written to the outcome's error record: a snooze's record always says
    ``snoozed`` (the contract), other kinds take the given reason or their default."""
    if outcome.kind == "snoozed":
        return "snoozed"
    return outcome.reason or _REASON[outcome.kind]


#: A lease as the finish statement returns it: (job id, attempt, owner, token).
_Key = tuple[int, int, str, str]


def _key(lease: Lease) -> _Key:
    return (lease.job_id, lease.attempt, lease.owner, lease.token)


def _check_outcome(outcome: Outcome) -> str:
    """The outcome's digest, once it is known to be one finish can write."""
    if outcome.kind not in _KINDS:
        raise ConfigError(f"unknown outcome kind {outcome.kind!r}")
    if outcome.result is not None:
        limits.check_json_text(outcome.result, "result")
    # The usual outcome: no error and a short result, one of a worker's few (owner, result)
    # pairs. Only short results are remembered: the cache must not hold large ones alive.
    if outcome.error is None and (outcome.result is None or len(outcome.result) <= 64):
        # + 0.0: -0.0 and 0.0 are one cache key, so they must be one digest ("0.0").
        return _plain_digest(outcome.lease.owner, outcome.kind, outcome.result,
                             outcome.reason, float(outcome.retry_delay) + 0.0)
    return _digest(outcome.lease.owner, outcome.kind, outcome.result, outcome.error,
                   outcome.reason, float(outcome.retry_delay))


def _replays(rows: list[tuple[Any, ...]]) -> set[tuple[_Key, str]]:
    return {((int(i), int(a), str(w), str(t)), str(d)) for i, a, w, t, d in rows}


def _digest(owner: str, kind: str, result: str | None, error: str | None,
            reason: str | None, retry_delay: float) -> str:
    """What identifies an outcome beyond its job, attempt and token (the owner included), so
    that only an exact replay of an applied outcome is accepted (128 bits; blake2b is cheap
    next to the round trip)."""
    text = json.dumps([owner, kind, result, error, reason, retry_delay])
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@functools.lru_cache(maxsize=256)
def _plain_digest(owner: str, kind: str, result: str | None, reason: str | None,
                  retry_delay: float) -> str:
    """:func:`_digest` of an outcome without an error text, remembered: a worker finishes
    most jobs with one of a few (owner, kind, result) triples ("done" with "null"), and the
    digest was a tenth of the finish's CPU in the worker."""
    return _digest(owner, kind, result, None, reason, retry_delay)



__all__ = ["PostgresLeases"]
