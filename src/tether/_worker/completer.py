"""The completer: writes outcomes in batches, each fenced by its lease.

Handlers finish on many threads; the completer turns their outcomes into one ``Store.finish``
round trip per batch. A rejected outcome means the attempt was stale (reaped, re-claimed,
cancelled): it is logged and reported as ``lease_lost``, and nothing changed in the store.

No store failure stops it (see ``health.py``):

* transient (the store is unreachable or busy): the batch is retried with backoff for as long
  as the leases are still trusted; after that the reaper owns the jobs and the outcomes are
  dropped. A forced shutdown gives up sooner (``give_up_at``) and reports what it could not
  write, so the worker never claims to have handed back a lease it did not;
* anything else (the store refused something in the batch): the outcomes are written one by
  one, so one bad outcome cannot take the others down with it, and an outcome the store still
  refuses is replaced by a clean error outcome (``dead``, reason ``bad_result``) naming what
  could not be stored: the job neither stays ``running`` nor is retried forever;
* ``StoreGone``: the worker stops.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from dataclasses import dataclass, field

from tether import _clock as clock
from tether import _text as text
from tether._events import Events
from tether._loop import Loop
from tether._worker.health import StoreHealth, classify, one_line
from tether._worker.registry import Registry, Running
from tether.stores._contract import Lease, Leases, Outcome

log = logging.getLogger("tether.completer")

_EVENT_OF = {"done": "completed", "dead": "failed", "cancelled": "cancelled",
             "released": "released", "stalled": "stalled", "snoozed": "snoozed"}


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a setattr call per field, per job
class Pending:
    entry: Running
    outcome: Outcome
    event: str


@dataclass(slots=True)
class Written:
    """What one :meth:`Completer.write` achieved: outcomes the store applied, rejected as
    stale, and could not be written at all (store unreachable, or it refused them)."""

    applied: list[Pending] = field(default_factory=list)
    rejected: list[Pending] = field(default_factory=list)
    unwritten: list[Pending] = field(default_factory=list)
    error: str | None = None  # the last store error met, for the log


def event_for(entry: Running, outcome: Outcome) -> str:
    """Which event this outcome means; the holder knows the counts, nobody else can change them."""
    job = entry.ctx.job
    if outcome.kind == "stalled":  # the reap rule, seen from the holder
        spent = (job.stall_count + 1 >= job.max_stalls
                 or job.failures + job.stall_count + 1 >= job.max_attempts)
        return "failed" if spent else "stalled"
    if outcome.kind != "error":
        return _EVENT_OF[outcome.kind]
    return "failed" if job.failures + 1 + job.stall_count >= job.max_attempts else "retrying"


def unstorable(p: Pending, exc: BaseException) -> Pending:
    """The clean error outcome that replaces an outcome the store refuses to hold."""
    error = text.clean_error(f"could not store the {p.outcome.kind} outcome of this attempt: "
                             f"{one_line(exc)}")
    return Pending(p.entry, Outcome(p.outcome.lease, "dead", error=error, reason="bad_result"),
                   "failed")


class Completer(Loop):
    def __init__(
        self,
        store: Leases,
        owner: str,
        registry: Registry,
        events: Events,
        *,
        on_fatal: Callable[[BaseException], None],
        health: StoreHealth | None = None,
        max_batch: int = 200,
    ) -> None:
        super().__init__("tether-completer", log=log, on_fatal=on_fatal, stop_wait=10.0,
                         died="completer died; stopping the worker")
        self.store = store
        self.owner = owner
        self.registry = registry
        self.events = events
        self.max_batch = max_batch
        self.health = health or StoreHealth(float("inf"))
        #: Monotonic time after which an unreachable store is not waited for any more (set
        #: by a forced shutdown); None: retry while the leases are trusted.
        self.give_up_at: float | None = None
        self._on_fatal = on_fatal
        self._queue: queue.SimpleQueue[Pending | list[Pending] | None] = queue.SimpleQueue()
        self._flushed = False  # the stop marker came through the queue: all before it written
        self.rejected = 0

    def put(self, entry: Running, outcome: Outcome) -> None:
        self._queue.put(Pending(entry, outcome, event_for(entry, outcome)))

    def put_many(self, items: list[tuple[Running, Outcome]]) -> None:
        """:meth:`put` of each, in one hand-off (one wake-up of the completer's thread)."""
        self._queue.put([Pending(entry, outcome, event_for(entry, outcome))
                         for entry, outcome in items])

    # ``stop()`` flushes what is queued, then stops: it queues a marker behind the outcomes
    # (``wake``), and the loop ends once the marker comes through (``stopping``).
    def wake(self) -> None:
        self._queue.put(None)

    @property
    def stopping(self) -> bool:
        return self._flushed

    def round(self) -> float:
        """Write one batch: what is queued, up to ``max_batch`` (waits for the first)."""
        first = self._queue.get()
        if first is None:
            self._flushed = True
            return 0.0
        batch = first if isinstance(first, list) else [first]
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                self._flushed = True
                break
            if isinstance(item, list):  # put_many's (may pass max_batch by a few)
                batch += item
            else:
                batch.append(item)
        self.write(batch, give_up_at=self.give_up_at)
        return 0.0

    def write(self, batch: list[Pending], *, give_up_at: float | None = None) -> Written:
        """Write one batch now (also used by a forced shutdown); never raises for the store.

        Transient failures are retried while the leases are trusted and, when given, until
        ``give_up_at`` (monotonic); outcomes not written by then are reported ``unwritten``.
        """
        out = Written()
        pending = list(batch)
        delay, logged = 0.05, False
        while pending:
            sent = clock.monotonic()
            try:
                rejected = set(self.store.finish([p.outcome for p in pending]))
            except Exception as exc:
                kind = classify(exc)
                out.error = one_line(exc)
                if kind == "gone":
                    self._on_fatal(exc)
                    out.unwritten += pending
                    break
                if kind == "other":
                    pending = self._one_by_one(pending, exc, out)
                else:
                    self.health.failed(exc, sent)
                pending = self._drop_untrusted(pending, out)
                if pending and give_up_at is not None and clock.monotonic() >= give_up_at:
                    out.unwritten += pending
                    break
                if pending:
                    (log.debug if logged else log.warning)(
                        "finish failed (%s); retrying %d outcome(s)", exc, len(pending))
                    logged = True
                    clock.sleep(delay)
                    delay = min(delay * 2, 1.0)
                continue
            self.health.ok()
            self._sort(pending, rejected, out)
            break
        self._report(out)
        self.registry.mark_many([p.entry for p in batch], settled=True)
        return out

    def _sort(self, pending: list[Pending], rejected: set[Lease], out: Written) -> None:
        if not rejected:  # the usual case: no lease to hash per outcome
            out.applied += pending
            return
        for p in pending:
            (out.rejected if p.outcome.lease in rejected else out.applied).append(p)

    def _one_by_one(self, pending: list[Pending], exc: BaseException,
                    out: Written) -> list[Pending]:
        """The store refused the batch for a reason retrying will not cure: find the outcome
        it refuses, write the others, and store a clean error in place of the refused one.
        Returns what is left to retry (outcomes that met a transient failure)."""
        log.error("the store refused a batch of %d outcome(s) (%s); writing them one by one",
                  len(pending), one_line(exc))
        retry: list[Pending] = []
        for p in pending:
            for attempt in (p, None):
                item = p if attempt is not None else unstorable(p, exc)
                sent = clock.monotonic()
                try:
                    rejected = set(self.store.finish([item.outcome]))
                except Exception as err:
                    kind = classify(err)
                    if kind == "gone":
                        self._on_fatal(err)
                        out.unwritten.append(p)
                    elif kind == "transient":
                        self.health.failed(err, sent)
                        retry.append(item)
                    elif attempt is not None:
                        exc = err
                        continue  # store the clean error outcome instead
                    else:
                        log.error("job %s attempt %s: even a clean error outcome was refused "
                                  "(%s); the reaper will take the job back",
                                  p.entry.ctx.id, p.entry.ctx.attempt, one_line(err))
                        out.unwritten.append(p)
                    break
                self.health.ok()
                if item is not p:
                    log.error("job %s attempt %s: the store refused its %s outcome (%s); "
                              "stored as failed (bad_result)", p.entry.ctx.id,
                              p.entry.ctx.attempt, p.outcome.kind, one_line(exc))
                self._sort([item], rejected, out)
                break
        return retry

    def _drop_untrusted(self, pending: list[Pending], out: Written) -> list[Pending]:
        now = clock.monotonic()
        keep = []
        for p in pending:
            if p.entry.trusted_until > now:
                keep.append(p)
            else:
                log.warning("dropping outcome of job %s attempt %s: store unreachable past the "
                            "lease; the reaper will take it back", p.entry.ctx.id,
                            p.entry.ctx.attempt)
                out.unwritten.append(p)
        return keep

    def _report(self, out: Written) -> None:
        for p in out.rejected:
            ctx = p.entry.ctx
            self.rejected += 1
            log.debug("stale %s of job %s attempt %s rejected: this worker no longer "
                      "holds the lease", p.outcome.kind, ctx.id, ctx.attempt)
            self.events.emit("lease_lost", job_id=ctx.id, attempt=ctx.attempt,
                             worker=self.owner, detail={"rejected": p.outcome.kind,
                                                        "task": ctx.job.task,
                                                        "queue": ctx.job.queue})
        events = self.events
        emit, owner = events.emit_job, self.owner
        quiet = events.done_quietly()
        for p in out.applied:
            entry = p.entry
            job = entry.ctx.job
            if quiet and p.event == "completed":
                events.note_done(job.id, job.attempt)
                continue
            o = p.outcome
            detail: dict[str, object] = {
                "task": job.task, "queue": job.queue, "kind": o.kind,
                "reason": o.reason, "delay": o.retry_delay, "error": o.error}
            extra = entry.extra
            if extra:
                child = extra.get("child")
                if child is not None:
                    detail["child"] = child  # the pid of the process-pool child that ran it
                why = extra.get("why")
                if why is not None:
                    detail["why"] = why  # a claimed-ahead job handed back before it started
            emit(p.event, job.id, job.attempt, owner, detail)
