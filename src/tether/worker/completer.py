"""The completer: writes outcomes in batches, each fenced by its lease.

Handlers finish on many threads; the completer turns their outcomes into one ``Store.finish``
round trip per batch. A rejected outcome means the attempt was stale (reaped, re-claimed,
cancelled): it is logged and reported as ``lease_lost``, and nothing changed in the store.
When the store is unreachable the batch is retried with backoff for as long as the leases are
still trusted; after that the reaper owns the jobs and the outcomes are dropped.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tether import clock
from tether.errors import StoreError
from tether.events import Events
from tether.stores.base import Outcome, Store
from tether.worker.registry import Registry, Running

log = logging.getLogger("tether.completer")

_EVENT_OF = {"done": "completed", "dead": "failed", "cancelled": "cancelled",
             "released": "released", "stalled": "stalled"}


@dataclass(frozen=True, slots=True)
class Pending:
    entry: Running
    outcome: Outcome
    event: str


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


class Completer:
    def __init__(
        self,
        store: Store,
        owner: str,
        registry: Registry,
        events: Events,
        *,
        on_fatal: Callable[[BaseException], None],
        max_batch: int = 200,
    ) -> None:
        self.store = store
        self.owner = owner
        self.registry = registry
        self.events = events
        self.max_batch = max_batch
        self._on_fatal = on_fatal
        self._queue: queue.SimpleQueue[Pending | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="tether-completer", daemon=True)
        self.rejected = 0

    def start(self) -> None:
        self._thread.start()

    def put(self, entry: Running, outcome: Outcome) -> None:
        self._queue.put(Pending(entry, outcome, event_for(entry, outcome)))

    def stop(self, timeout: float = 10.0) -> None:
        """Flush what is queued, then stop."""
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                stop = False
                while len(batch) < self.max_batch:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stop = True
                        break
                    batch.append(item)
                self.write(batch)
                if stop:
                    return
        except BaseException as exc:
            log.critical("completer died; stopping the worker", exc_info=True)
            self._on_fatal(exc)

    def write(self, batch: list[Pending]) -> None:
        """Write one batch now (also used by a forced shutdown), retrying while trusted."""
        delay = 0.05
        while batch:
            try:
                rejected = set(self.store.finish([p.outcome for p in batch]))
                break
            except StoreError as exc:
                now = clock.monotonic()
                keep = [p for p in batch if p.entry.trusted_until > now]
                for p in batch:
                    if p not in keep:
                        log.warning("dropping outcome of job %s attempt %s: store unreachable "
                                    "past the lease; the reaper will take it back",
                                    p.entry.ctx.id, p.entry.ctx.attempt)
                        self.registry.mark(p.entry, settled=True)
                batch = keep
                log.warning("finish failed (%s); retrying %d outcome(s)", exc, len(batch))
                clock.sleep(delay)
                delay = min(delay * 2, 1.0)
        else:
            return
        for p in batch:
            ctx = p.entry.ctx
            if p.outcome.lease in rejected:
                self.rejected += 1
                log.warning("stale %s of job %s attempt %s rejected: this worker no longer "
                            "holds the lease", p.outcome.kind, ctx.id, ctx.attempt)
                self.events.emit("lease_lost", job_id=ctx.id, attempt=ctx.attempt,
                                 worker=self.owner, detail={"rejected": p.outcome.kind})
            else:
                detail: dict[str, object] = {"error": p.outcome.error} if p.outcome.error else {}
                child = p.entry.extra.get("child")
                if child is not None:
                    detail["child"] = child  # the pid of the process-pool child that ran it
                self.events.emit(p.event, job_id=ctx.id, attempt=ctx.attempt,
                                 worker=self.owner, detail=detail)
        self.registry.mark_many([p.entry for p in batch], settled=True)
