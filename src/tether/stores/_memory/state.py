"""The data behind ``memory://NAME``: one :class:`Shared` per name and process.

Invariants:

* **One lock orders everything.** Every read and write of a :class:`Shared` happens under its
  ``lock``, so each store method is one atomic step, as a single SQL statement or Lua script
  is on the other stores: a claim is the lease grant, two reapers give one end state, and no
  two claimers ever receive the same (job, attempt).
* **Rows are immutable snapshots.** A job is held as a frozen :class:`Job` record and replaced
  whole on every change (:meth:`Shared.put`), so what a method hands out can never change
  under its caller, and the indexes (due-order candidates, running jobs, live unique keys)
  are kept in step with the row in one place.
* **A row that becomes terminal resolves its links in the same step** (:meth:`Shared.put`,
  :meth:`Shared.delete`; the rules are in ``links.py``), whatever method wrote it.
* **Every change bumps ``generation``** and wakes every waiter: ``wait_for_jobs`` and
  ``wait_for_finish`` are woken by the change itself, never by a poll. Async waiters register
  a callback that is called (non-blocking) on each bump.
* **Stores of one name share one Shared** (``memory://NAME`` in one process, like connections
  to one database); the data lives while a store of that name is open. ``memory://`` alone
  gets a Shared of its own.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tether import _clock as clock
from tether._errors import SchemaError, StoreError
from tether._limits import check_text
from tether.stores._contract import (
    TERMINAL,
    JobRecord,
    JobStatus,
    Leadership,
    NewJob,
    ScheduleState,
    WorkerInfo,
)
from tether.stores._memory.links import DELETED, Links, cancelled_by

SCHEMA_VERSION = 1
#: How long a request id protects a call against replays (base contract: 24 h).
REQUEST_TTL = 86_400.0
_MAX_REQUEST_ID = 255
#: Statuses that hold a unique key (every status but the terminal ones).
LIVE = frozenset({"waiting", "pending", "running"})


class Shared:
    """Tables of one in-memory database. Only touch them inside :meth:`tx` (or ``lock``)."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.lock = threading.Condition(threading.RLock())
        self.generation = 0
        self.version = 0  # 0: never migrated (check_schema raises, like an empty database)
        self.offset = 0.0  # seconds added to the wall clock (MemoryStore.advance)
        self.next_id = 1
        #: In ascending id order: ids only grow, rows are inserted once and replaced in place
        #: (a dict keeps a key's position), so listings need no sort.
        self.jobs: dict[int, JobRecord] = {}
        #: queue -> {job id: (priority, run_at, id)} of pending jobs: the claim's candidates.
        self.pending: dict[str, dict[int, tuple[int, float, int]]] = {}
        self.running: set[int] = set()
        #: Start log of rate-limited flow groups (issue #19): group -> claim times, oldest
        #: first; entries older than the group's longest window are dropped as claims go.
        self.starts: dict[str, list[float]] = {}
        self.live_keys: dict[str, int] = {}  # unique_key -> its live (not terminal) job
        self.links = Links()  # job dependencies (issue #20)
        self.requests: dict[tuple[str, str], tuple[list[int], float]] = {}
        self.leaders: dict[str, tuple[str | None, int, float]] = {}
        self.workers: dict[str, WorkerInfo] = {}
        #: Liveness tokens (issue #22): worker id -> "live", "dead" (released) or "reaped"
        #: (dead, and its jobs were all taken back).
        self.tokens: dict[str, str] = {}
        self.paused: dict[str, float] = {}
        #: worker id -> a signal came since its last ``wait_for_signal`` (issue #22); only
        #: workers that wait for signals are keys.
        self.signals: dict[str, bool] = {}
        self.schedules: dict[str, ScheduleState] = {}
        self._watchers: list[Callable[[], None]] = []

    # -- time ------------------------------------------------------------------------------
    def now(self, now: float | None = None) -> float:
        """The caller's explicit time, else the store's clock: ``tether._clock`` plus the
        offset ``advance`` added (shared by every store of the name, like a server clock)."""
        return float(now) if now is not None else clock.wall() + self.offset

    # -- transactions ----------------------------------------------------------------------
    @contextmanager
    def tx(self, *, migrated: bool = True) -> Iterator[Shared]:
        """Hold the lock for one store call; a call that changed data bumps ``generation``
        (callers say so with :meth:`changed`)."""
        with self.lock:
            if migrated and self.version == 0:
                raise SchemaError("the memory store has no schema yet; run migrate()")
            yield self

    def changed(self) -> None:
        """Wake every waiter (call with the lock held)."""
        self.generation += 1
        self.lock.notify_all()
        for watcher in list(self._watchers):
            watcher()

    def signal(self, owner: str | None) -> None:
        """Signal worker ``owner`` (None: every worker) that a heartbeat is worth sending
        now; waiters wake with the next :meth:`changed` (call with the lock held)."""
        for key in self.signals:
            if owner is None or key == owner:
                self.signals[key] = True

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (it must not block) on every change; returns the unsubscriber."""
        with self.lock:
            self._watchers.append(callback)

        def unwatch() -> None:
            with self.lock:
                if callback in self._watchers:
                    self._watchers.remove(callback)

        return unwatch

    # -- rows and indexes ------------------------------------------------------------------
    def new_id(self) -> int:
        job_id = self.next_id
        self.next_id += 1
        return job_id

    def insert(self, new: NewJob, t: float) -> int:
        """Enqueue one job at store time ``t``: the id of the live job holding its unique key
        (nothing is linked then), or of the new row: pending, or by its parents' statuses
        waiting or cancelled (every parent exists: the caller checked the batch first)."""
        if new.unique_key is not None and new.unique_key in self.live_keys:
            return self.live_keys[new.unique_key]
        parents = tuple(dict.fromkeys(new.after)) if new.after else ()
        open_, blocker = (self.links.initial(self.jobs, parents, new.allow_failure) if parents
                          else (0, None))
        status: JobStatus = "waiting" if open_ else "pending"
        job = JobRecord(
            id=self.new_id(), task=new.task, queue=new.queue, payload=new.payload,
            status=status, priority=new.priority,
            run_at=float(new.run_at) if new.run_at is not None else t + float(new.delay),
            attempt=0, max_attempts=new.max_attempts, failures=0, stall_count=0,
            max_stalls=new.max_stalls, interruptions=0, locked_by=None, lease_until=None,
            created_at=t, started_at=None, finished_at=None, last_error=None,
            failure_reason=None, result=None, checkpoint=None, progress=None,
            unique_key=new.unique_key, cancel_requested=False, errors="[]", lease_token=None,
            uid=secrets.token_hex(16), limit_key=new.limit_key, snoozes=0)
        if blocker is not None:
            job = cancelled_by(job, blocker[0], blocker[1], t)
        if parents or new.allow_failure:
            self.links.add(job, parents, new.allow_failure, self.jobs)
        self.put(job)
        return job.id

    def put(self, job: JobRecord) -> None:
        """Insert or replace a row, keeping every index in step with it; a row that becomes
        terminal resolves its links here, in this same step (invariant 6)."""
        old = self.store(job)
        if (job.id in self.links.unresolved and job.status in TERMINAL
                and (old is None or old.status not in TERMINAL)):
            self.links.resolve(self, job.id, job.status, job.finished_at or self.now())

    def store(self, job: JobRecord) -> JobRecord | None:
        """Insert or replace a row and its indexes (and nothing else); returns the old row."""
        old = self.jobs.get(job.id)
        if old is not None:
            self._unindex(old)
        self.jobs[job.id] = job
        if job.status == "pending":
            self.pending.setdefault(job.queue, {})[job.id] = (job.priority, job.run_at, job.id)
        elif job.status == "running":
            self.running.add(job.id)
        if job.status in LIVE and job.unique_key is not None:
            self.live_keys[job.unique_key] = job.id
        return old

    def delete(self, job_id: int, t: float) -> None:
        """Delete a row and the links where it is the child; a deleted job that had not ended
        can never be done, so its waiting children are cancelled (at ``t``)."""
        old = self.jobs.pop(job_id, None)
        if old is not None:
            self._unindex(old)
            self.links.forget(job_id)
            if job_id in self.links.unresolved and old.status not in TERMINAL:
                self.links.resolve(self, job_id, DELETED, t)

    def _unindex(self, job: JobRecord) -> None:
        queue = self.pending.get(job.queue)
        if queue is not None:
            queue.pop(job.id, None)
            if not queue:
                del self.pending[job.queue]
        self.running.discard(job.id)
        if job.unique_key is not None and self.live_keys.get(job.unique_key) == job.id:
            del self.live_keys[job.unique_key]

    def leader_row(self, name: str, now: float) -> Leadership | None:
        """The unexpired holder of ``name`` (None when released, expired or never held)."""
        row = self.leaders.get(name)
        if row is None or row[0] is None or row[2] <= now:
            return None
        return Leadership(name, row[0], row[1], row[2])


_NAMED: weakref.WeakValueDictionary[str, Shared] = weakref.WeakValueDictionary()
_NAMED_LOCK = threading.Lock()


def shared_for(name: str | None) -> Shared:
    """The Shared of ``name`` (made on first use; kept while a store holds it), or a private
    one for None."""
    if name is None:
        return Shared(None)
    with _NAMED_LOCK:
        found = _NAMED.get(name)
        if found is None:
            found = Shared(name)
            _NAMED[name] = found
        return found


def closed_error() -> StoreError:
    return StoreError("the memory store is closed")


def checked_request_id(value: str | None) -> str | None:
    """A caller's request id, checked as every store checks it (None: the call has none)."""
    return None if value is None else check_text(value, "request_id", limit=_MAX_REQUEST_ID)
