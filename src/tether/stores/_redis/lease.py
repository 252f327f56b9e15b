"""The lease path of the Redis store (the :class:`~tether.stores._contract.Leases` role): claim,
heartbeat, finish, the fenced writes, worker rows, and waking idle workers.

Invariant: **every write about a running job is fenced** inside its script (``claim.lua``,
``heartbeat.lua``, ``finish.lua``, ``fenced_write.lua``) by (id, attempt, owner, token) and
``status == 'running'``; the token (``<nonce>:<id>``, nonce 128 random bits per claim) keeps
old claims fenced off new jobs when ids are reused after data loss. A claim and its lease grant
are one script, so no two claimers take the same (job, attempt). Claim and heartbeat look for
a server restart or data loss when one is due (``watch.py``).
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether import _limits as limits
from tether.stores._contract import (
    FlowLimit,
    HeartbeatResult,
    JobRecord,
    Lease,
    Outcome,
    WorkerInfo,
)
from tether.stores._redis import rows as codec
from tether.stores._redis.connection import io
from tether.stores._redis.waker import Waker

_KINDS = frozenset({"done", "error", "dead", "cancelled", "released", "stalled", "snoozed"})
#: A claim's record lives at least this long, and at least two lease TTLs (a replay after the
#: leases expired finds nothing running under them anyway).
MIN_CLAIM_RECORD_MS = 60 * 1000
#: How many due pending jobs per queue a claim with flow limits looks at (claim_flow.lua): the
#: bound the contract asks a store to document (at least 5,000). A backlog of one key at its
#: limit that is longer than this hides the jobs behind it from limited claims until it
#: shrinks. The walk costs ~2.5 µs per job walked (docs/stores.md has the measurements).
FLOW_SCAN = 20_000


class RedisLeases:
    """The :class:`~tether.stores._contract.Leases` role of :class:`RedisStore`."""

    prefix: str
    _client: Any
    _waker: Waker
    _marks: threading.local

    if TYPE_CHECKING:  # RedisStore's: run a script, look for a restart when one is due
        def _run(self, name: str, *args: Any) -> Any: ...

        def _key(self, *parts: str) -> str: ...

        def _observe_if_due(self) -> None: ...

        def _room(self) -> None: ...

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
        wanted = list(dict.fromkeys(queues))
        if limit <= 0 or not wanted:
            return []
        self._observe_if_due()
        # After a refusal for memory, no claim until the server has room to finish what it
        # takes (memory.py); claim.lua itself fails whole at the limit (room(), _lib.lua).
        self._room()
        # Taken before the claim: a wake-up that arrives while an empty claim's reply is on
        # its way back still ends this thread's next wait_for_jobs at once.
        mark = self._waker.mark()
        self._marks.seq = None
        nonce = secrets.token_hex(16) if request_id is None else request_id
        if request_id is not None:
            limits.check_text(request_id, "request_id", limit=limits.MAX_NAME)
        record_ms = str(max(MIN_CLAIM_RECORD_MS, int(lease_ttl * 2000)))
        if flow:  # claim_flow.lua: the limits' own script; claim.lua stays as fast as it was
            rows = self._run(
                "claim_flow", codec.now_arg(now), owner, str(int(limit)), codec.num(lease_ttl),
                nonce, record_ms, str(FLOW_SCAN), *codec.flow_args(flow), *wanted,
            )  # fmt: skip
        else:
            rows = self._run(
                "claim", codec.now_arg(now), owner, str(int(limit)), codec.num(lease_ttl),
                nonce, record_ms, *wanted,
            )  # fmt: skip
        self._marks.seq = mark
        return codec.claimed_jobs(rows, owner, nonce)

    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        self._observe_if_due()
        lost, cancel = self._run(
            "heartbeat",
            codec.now_arg(now),
            owner,
            codec.num(lease_ttl),
            *codec.lease_args(leases),
        )
        return HeartbeatResult(
            lost=frozenset(leases[int(i) - 1] for i in lost),
            cancel_requested=frozenset(leases[int(i) - 1] for i in cancel),
        )

    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        if not outcomes:
            return []
        for o in outcomes:  # the whole batch is checked before any write
            if o.kind not in _KINDS:
                raise ValueError(f"unknown outcome kind {o.kind!r}")
            if o.result is not None:
                limits.check_json_text(o.result, "result")
            limits.check_delay(o.retry_delay, "retry_delay")
        rejected = self._run("finish", codec.now_arg(now), *codec.finish_args(outcomes))
        return [outcomes[int(i) - 1].lease for i in rejected]

    def _fenced_write(self, lease: Lease, field: str, value: str) -> bool:
        limits.check_json_text(value, field)
        args = [*codec.lease_args([lease]), field, value]
        return bool(int(self._run("fenced_write", *args)))

    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced_write(lease, "checkpoint", checkpoint)

    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced_write(lease, "progress", progress)

    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        info = {
            "host": worker.host,
            "pid": worker.pid,
            "queues": list(worker.queues),
            "concurrency": worker.concurrency,
        }
        self._run("worker_register", codec.now_arg(now), worker.id, json.dumps(info))

    def unregister_worker(self, worker_id: str) -> None:
        self._run("worker_unregister", worker_id)
        self._waker.forget_signals(worker_id)

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        since: int | None = getattr(self._marks, "seq", None)
        self._marks.seq = None  # one claim, one wait
        if timeout <= 0:
            return False
        return self._waker.wait(queues, timeout, since)

    def wait_for_signal(self, owner: str, timeout: float) -> bool:
        """On the store's one subscription (waker.py); never raises."""
        return self._waker.wait_signal(owner, timeout)

    def notify(self, queues: Sequence[str]) -> None:
        names = list(dict.fromkeys(queues))
        if names:
            with io():
                self._client.publish(self._key("wake"), "\n".join(names))


__all__ = ["FLOW_SCAN", "MIN_CLAIM_RECORD_MS", "RedisLeases"]
