"""The lease path of the SQLite store (the :class:`~tether.stores._contract.Leases` role): claim,
heartbeat, finish, the fenced writes, worker rows, and waking idle workers.

Invariants (the contract's 1 and 2, kept the SQLite way):

* **The claim is the lease grant, in one write.** ``claim`` is a single
  ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` inside ``BEGIN IMMEDIATE``: the rows
  become ``running`` with owner, lease, ``attempt + 1`` and ``started_at`` together. The write
  lock serialises claimers (threads and processes), so no two receive the same (job, attempt).
* **Every write about a claimed job is fenced** by ``(id, attempt, locked_by, lease_token)``
  *and* ``status = 'running'`` in its ``WHERE`` clause (heartbeat, finish, checkpoint,
  progress), so a stale holder changes nothing and learns so from what the statement returns.
  The token (``nonce:id``, 128 random bits per claim call) cannot be forged by an id handed out
  again after the file was lost and recreated.
* **A claim or finish repeated after its reply was lost acts once**: a claim with a
  ``request_id`` is recorded in the ``requests`` table in its transaction and a repeat is
  answered from it; a ``finish`` recognises its applied outcome by the token the row keeps
  and the owner it records (``outcome_owner``): another owner's copy of the token is no replay.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether import _clock as clock
from tether._errors import StoreError
from tether._limits import check_json_text
from tether.stores._contract import (
    FlowLimit,
    HeartbeatResult,
    JobRecord,
    Lease,
    Outcome,
    WorkerInfo,
)
from tether.stores._sqlite import signal_stamp
from tether.stores._sqlite.connection import Connections, Undecodable, fetch_strict, guarded
from tether.stores._sqlite.flow import flow_claim
from tether.stores._sqlite.links import any_link, resolve
from tether.stores._sqlite.rows import (
    FinishPlan,
    Q,
    checked_request_id,
    claimed_jobs,
    job_from_row,
    store_now,
)

_WAIT_POLL = 0.01
#: How often wait_for_signal looks at the signal stamp (one stat; without a stamp file the
#: data version, where each foreign commit seen costs a read): it runs on every worker all
#: the time, so less often than wait_for_jobs; still far below the heartbeat's interval.
_SIGNAL_POLL = 0.05
#: How long wait_for_signal pauses after a failed read (the heartbeat says what is wrong).
_SIGNAL_RETRY = 0.5


class _Turned(Exception):
    """A finish batch in which some outcome did not apply (see SQLiteLeases.finish)."""


def _resolve_ended(conn: sqlite3.Connection, plan: FinishPlan, accepted: set[int],
                   now: float) -> bool:
    """Resolve, in the finish's transaction, the links of the jobs that the applied outcomes
    ended and that have children; True when a child was released. A file without any link
    (no workflows) pays one probe of job_links' first page per finish."""
    if not accepted or not any_link(conn):
        return False
    ended = conn.execute(Q["finish_ended"], {"ids": plan.ids(sorted(accepted))}).fetchall()
    if not ended:
        return False
    released, _ = resolve(conn, [[row[0], row[1]] for row in ended], now)
    return released


class SQLiteLeases:
    """The :class:`~tether.stores._contract.Leases` role of :class:`SQLiteStore`."""

    _db: Connections
    _wake: threading.Condition
    _wake_gen: int
    _seen: threading.local
    #: wait_for_signal's per owner state: the data version, cancel-requested job ids and
    #: paused queues it last saw.
    _signal_seen: dict[str, tuple[tuple[int, ...], frozenset[int], frozenset[str]]]
    _signal_gen: int  # bumped by cancels and pauses through this store
    _stamp: str | None  # the signal stamp file (signal_stamp.py), None without a directory

    if TYPE_CHECKING:
        def _announce_finished(self) -> None: ...  # SQLiteProducer's
        def paused_queues(self) -> list[str]: ...  # SQLiteAdmin's

    @guarded
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
        """Claim in one write; every claimed row's token is ``nonce:id``. The nonce is the
        ``request_id`` when given (a repeat of the call returns the jobs still running under
        it and claims nothing more), else 128 fresh random bits."""
        request_id = checked_request_id(request_id)
        if limit <= 0 or not queues:
            return []
        nonce = request_id if request_id is not None else secrets.token_hex(16)
        params = {
            "owner": owner,
            "queues": json.dumps(list(dict.fromkeys(queues))),
            "limit": limit,
            "lease_ttl": lease_ttl,
            "nonce": nonce,
            "now": now,
        }
        request = {"kind": "claim", "request_id": request_id, "reply": "", "now": now}
        try:
            t, rows, granted = self._claim_write(params, request, now, queues, flow, strict=True)
        except Undecodable:  # a row's text is not UTF-8: undone, and read with replacement
            t, rows, granted = self._claim_write(params, request, now, queues, flow, strict=False)
        if len(rows) + len(granted) < limit:
            # The claimer may wait next: remember what it has seen, so a commit that lands
            # between this claim and wait_for_jobs still wakes it.
            self._seen.version = self._db.data_version()
        if granted:
            return claimed_jobs(granted, owner, t, t + lease_ttl, nonce)
        jobs = [job_from_row(row) for row in rows]
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id))
        return jobs

    def _claim_write(
        self,
        params: dict[str, Any],
        request: dict[str, Any],
        now: float | None,
        queues: Sequence[str],
        flow: Sequence[FlowLimit],
        *,
        strict: bool,
    ) -> tuple[float, list[Any], list[Any]]:
        """The claim's transaction: (store time, full rows of a replay or a limited claim,
        slim rows of a plain claim). ``strict``: the plain claim's rows are decoded by
        :func:`fetch_strict` (raises Undecodable, after which this transaction is undone)."""
        granted: list[Any] = []
        with self._db.write() as conn:
            t = params["now"] = request["now"] = store_now(conn, now)
            if request["request_id"] is not None and conn.execute(
                Q["request_find"], request
            ).fetchone():
                rows = conn.execute(Q["claim_replayed"], params).fetchall()
            else:
                if flow:
                    rows = flow_claim(conn, flow, list(dict.fromkeys(queues)), params)
                else:
                    rows = []
                    if strict:
                        granted = fetch_strict(conn, Q["claim"], params)
                    else:
                        granted = conn.execute(Q["claim"], params).fetchall()
                # Only a claim that granted something needs its record: a replay of an empty
                # claim may claim afresh (nothing was orphaned). Idle workers claim empty all
                # the time, and every written row lengthens the write lock's hold.
                if request["request_id"] is not None and (rows or granted):
                    conn.execute(Q["request_insert"], request)
        return t, rows, granted

    @guarded
    def heartbeat(
        self,
        owner: str,
        leases: Sequence[Lease],
        lease_ttl: float,
        *,
        now: float | None = None,
    ) -> HeartbeatResult:
        batch = json.dumps([[le.job_id, le.attempt, le.owner, le.token] for le in leases])
        rows: list[Any] = []
        with self._db.write() as conn:
            t = store_now(conn, now)
            if leases:
                rows = conn.execute(
                    Q["heartbeat"], {"leases": batch, "lease_ttl": lease_ttl, "now": t}
                ).fetchall()
            conn.execute(Q["touch_worker"], {"owner": owner, "now": t})
        held = {Lease(row[0], row[1], row[2], row[3]): bool(row[4]) for row in rows}
        lost = frozenset(lease for lease in leases if lease not in held)
        cancel = frozenset(lease for lease, flag in held.items() if flag)
        return HeartbeatResult(lost=lost, cancel_requested=cancel)

    @guarded
    def finish(self, outcomes: Sequence[Outcome], *, now: float | None = None) -> list[Lease]:
        """Fenced outcome by outcome (see FinishPlan); an outcome this lease already applied
        in an earlier call whose reply was lost is not reported rejected. A job that ended
        with children has its links resolved in the same transaction (links.py)."""
        if not outcomes:
            return []
        plan = FinishPlan(outcomes)
        try:
            with self._db.write() as conn:
                t = store_now(conn, now)
                cur = conn.cursor()
                done, other = plan.split(t)
                applied = 0
                if done:
                    applied += cur.executemany(Q["finish_done"], done).rowcount
                if other:
                    applied += cur.executemany(Q["finish"], other).rowcount
                if applied != len(plan.sent):
                    raise _Turned()  # rolls back: done again outcome by outcome, below
                accepted = set(range(len(plan.sent)))
                released = _resolve_ended(conn, plan, accepted, t)
        except _Turned:
            # Some outcome was turned down (rare: a lost lease, a replay, or two outcomes for
            # one job): executemany only tells how many rows changed in all, so the batch is
            # run again, one outcome at a time, to learn which ones apply.
            accepted = set()
            with self._db.write() as conn:
                t = store_now(conn, now)
                cur = conn.cursor()
                for i, params in enumerate(plan.bound(t)):
                    if cur.execute(Q["finish"], params).rowcount == 1:
                        accepted.add(i)
                released = _resolve_ended(conn, plan, accepted, t)
        replayed: set[tuple[int, int, str, str, str]] = set()
        maybe = plan.unapplied(accepted)
        if maybe is not None:  # rare: a stale outcome, or a replay; a plain read, no lock
            rows = self._db.get().execute(Q["finish_replayed"], {"leases": maybe})
            replayed = {(row[0], row[1], row[2], row[3], row[4]) for row in rows}
        if released or (accepted and any(o.kind in ("error", "released", "stalled", "snoozed")
                                         for o in outcomes)):
            self.notify(())
        if accepted:
            self._announce_finished()
        return plan.rejected(accepted, replayed)

    def _fenced_set(self, name: str, lease: Lease, value: str) -> bool:
        check_json_text(value, name.removeprefix("save_").removeprefix("set_"))
        params = {
            "id": lease.job_id,
            "attempt": lease.attempt,
            "owner": lease.owner,
            "token": lease.token,
            "value": value,
        }
        with self._db.write() as conn:
            changed: int = conn.execute(Q[name], params).rowcount
        return changed == 1

    @guarded
    def save_checkpoint(self, lease: Lease, checkpoint: str, *, now: float | None = None) -> bool:
        return self._fenced_set("save_checkpoint", lease, checkpoint)

    @guarded
    def set_progress(self, lease: Lease, progress: str, *, now: float | None = None) -> bool:
        return self._fenced_set("set_progress", lease, progress)

    @guarded
    def register_worker(self, worker: WorkerInfo, *, now: float | None = None) -> None:
        params = {
            "id": worker.id,
            "host": worker.host,
            "pid": worker.pid,
            "queues": json.dumps(list(worker.queues)),
            "concurrency": worker.concurrency,
            "now": now,
        }
        with self._db.write() as conn:
            params["now"] = store_now(conn, now)
            conn.execute(Q["register_worker"], params)

    @guarded
    def unregister_worker(self, worker_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(Q["unregister_worker"], {"id": worker_id})
        self._signal_seen.pop(worker_id, None)

    def wait_for_jobs(self, queues: Sequence[str], timeout: float) -> bool:
        """Poll ``PRAGMA data_version`` (it moves when another connection commits) every 10 ms,
        and wake at once on an in-process :meth:`notify`. No transaction is held meanwhile.

        The baseline is what this thread saw at its last short claim (or last wait), so a
        commit that landed in between wakes the waiter at once instead of being missed.
        Raises StoreGone when the file was deleted or replaced (checked about once a second):
        an idle worker must notice too, not only a busy one."""
        deadline = clock.monotonic() + max(0.0, timeout)
        with self._wake:
            generation = self._wake_gen
        baseline: int | None = getattr(self._seen, "version", None)
        current: int | None
        try:
            current = self._db.data_version()
        except sqlite3.Error:
            current = baseline = None
        try:
            while True:
                if baseline is not None and current != baseline:
                    return True
                if baseline is None:
                    baseline = current
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                with self._wake:
                    if self._wake_gen == generation:
                        self._wake.wait(min(_WAIT_POLL, remaining))
                    if self._wake_gen != generation:
                        return True
                if current is not None:
                    try:
                        current = self._db.data_version()
                    except sqlite3.Error:
                        current = baseline = None
        finally:
            self._seen.version = current

    def wait_for_signal(self, owner: str, timeout: float) -> bool:
        """SQLite has no messages: poll the signal stamp (signal_stamp.py: one ``stat``; a
        database without a directory: ``PRAGMA data_version``) every 50 ms, and when it moved
        since this owner last looked, read its cancel-requested running jobs and the paused
        set. A signal is a job or a paused queue not seen before (by this store, for this
        owner); a resume is not one (it wakes the queue's waiters itself). The first call for
        an owner takes the baseline and returns True."""
        deadline = clock.monotonic() + max(0.0, timeout)
        try:
            seen = self._signal_seen.get(owner)
            if seen is None:
                version = self._signal_version()
                self._signal_seen[owner] = (version, *self._signal_state(owner))
                return True
            while True:
                version = self._signal_version()
                if version != seen[0]:
                    cancels, paused = self._signal_state(owner)
                    self._signal_seen[owner] = (version, cancels, paused)
                    if cancels - seen[1] or paused - seen[2]:
                        return True
                    seen = (version, cancels, paused)
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return False
                with self._wake:
                    self._wake.wait(min(_SIGNAL_POLL, remaining))
        except (sqlite3.Error, StoreError):
            with self._wake:  # close() cuts it short
                self._wake.wait(min(_SIGNAL_RETRY, max(0.0, deadline - clock.monotonic())))
            return True

    def _signal_version(self) -> tuple[int, ...]:
        """What moves when a signal may have come: the signal stamp (a cancel or pause by any
        process), or without one another connection's commit; and a cancel or pause through
        this store (its own connection's commits do not move data_version)."""
        with self._wake:
            local = self._signal_gen
        if self._stamp is not None:
            # No read, but the store's checks: a closed store or a replaced file raises here
            # as the data version's read would (the caller's retry path, or StoreGone).
            self._db.get()
            return (*signal_stamp.read(self._stamp), local)
        return self._db.data_version(), local

    def signal_local(self) -> None:
        """A cancel or pause through this store, committed: every process's waiters look now
        (the stamp), this store's own at once."""
        if self._stamp is not None:
            signal_stamp.bump(self._stamp)
        with self._wake:
            self._signal_gen += 1
            self._wake.notify_all()

    def _signal_state(self, owner: str) -> tuple[frozenset[int], frozenset[str]]:
        rows = self._db.get().execute(Q["cancel_requested_of"], {"owner": owner}).fetchall()
        return frozenset(int(r[0]) for r in rows), frozenset(self.paused_queues())

    def notify(self, queues: Sequence[str]) -> None:
        with self._wake:
            self._wake_gen += 1
            self._wake.notify_all()
