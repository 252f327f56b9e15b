"""Plain helpers for the store contract suite (``tests/contract/``), and ``Faulty``, what the
suite's one network-fault fixture (``faulty``, conftest.py) yields.

Every test runs once per store (the ``store`` fixture of ``tests/conftest.py``, parametrized
over sqlite, postgres, redis and memory by this suite's conftest.py). Time is driven only
through explicit ``now=`` arguments: a test takes ``t0`` (the store's clock, once) and passes
``now=t0 + x`` everywhere.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from tests.faults import FaultProxy
from tether._errors import StoreUnavailable
from tether.stores import JobRecord, Lease, NewJob, Store, open_store

R = TypeVar("R")

#: Stores may keep times to the millisecond (or microsecond); compare with this tolerance.
TIME_TOL = 0.01
#: The default lease TTL the helpers claim with.
TTL = 30.0
#: How long a wake-up test's waiter waits: one that is woken returns long before this, one
#: that is not sleeps all of it. A test tells the two apart by the wait's result and by
#: ``elapsed < WAKE_WAIT / 2``, never by a latency in milliseconds (the suite runs in
#: parallel on a loaded machine).
WAKE_WAIT = 20.0

_queue_counter = itertools.count(1)


def at(expected: float) -> Any:
    """A time comparison that tolerates the store's rounding (absolute, never relative)."""
    return pytest.approx(expected, abs=TIME_TOL)


def fresh_queue() -> str:
    """A queue name no other job of the test uses, so a claim picks exactly one job."""
    return f"q{next(_queue_counter)}"


def new_job(task: str = "tests.task", **fields: Any) -> NewJob:
    return NewJob(task=task, **fields)


def enqueue_one(store: Store, now: float, task: str = "tests.task", **fields: Any) -> int:
    ids = store.enqueue([new_job(task, **fields)], now=now)
    assert len(ids) == 1
    return ids[0]


def must_get(store: Store, job_id: int) -> JobRecord:
    job = store.get_job(job_id)
    assert job is not None, f"job {job_id} vanished"
    return job


def claim_one(store: Store, owner: str, queue: str, now: float, ttl: float = TTL) -> JobRecord:
    """Claim from ``queue`` and insist on exactly one job."""
    jobs = store.claim(owner, [queue], 10, ttl, now=now)
    assert len(jobs) == 1, f"expected one job in {queue!r}, claimed {jobs!r}"
    return jobs[0]


def running_job(
    store: Store, now: float, owner: str = "w1", ttl: float = TTL, **fields: Any
) -> JobRecord:
    """Enqueue a job in a queue of its own and claim it at ``now``; returns the claimed job."""
    queue = fields.pop("queue", None) or fresh_queue()
    job_id = enqueue_one(store, now, queue=queue, **fields)
    job = claim_one(store, owner, queue, now, ttl)
    assert job.id == job_id
    return job


def errors_of(job: JobRecord) -> list[dict[str, Any]]:
    records = json.loads(job.errors)
    assert isinstance(records, list)
    return records


def stale(
    lease: Lease, *, attempt: int | None = None, owner: str | None = None,
    token: str | None = None,
) -> Lease:
    """A lease like ``lease`` but with another attempt, owner and/or token (the others kept,
    so each part of the fence is tested on its own)."""
    return Lease(
        lease.job_id,
        lease.attempt if attempt is None else attempt,
        lease.owner if owner is None else owner,
        lease.token if token is None else token,
    )


def lacks(request: pytest.FixtureRequest, store_kind: str, **reasons: str) -> None:
    """Mark a behaviour a store does not have: ``lacks(request, store_kind, redis="why")``.

    The test then runs as ``xfail(strict=True)``: it must fail on that store, and starts
    failing the suite once the store gains the behaviour (so the mark gets removed). Never a
    silent skip.
    """
    reason = reasons.get(store_kind) or None  # "": has it (a remote kind whose base lacks it)
    if reason is None and store_kind.startswith("remote-") and store_kind not in reasons:
        # Through a tether server a store lacks what the store behind it lacks, unless the
        # test names the remote kind itself.
        base = store_kind.removeprefix("remote-")
        reason = reasons.get(base)
        store_kind = f"{store_kind} (the {base} store behind the server)"
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{store_kind}: {reason}"))


def transient(fn: Callable[[], R], attempts: int = 100) -> R:
    """Call ``fn``, retrying on StoreUnavailable as the contract allows callers to do."""
    for i in range(attempts):
        try:
            return fn()
        except StoreUnavailable:
            if i == attempts - 1:
                raise
            time.sleep(0.01)  # back-off only: no test time depends on this
    raise AssertionError("unreachable")


def run_concurrently(fns: Sequence[Callable[[], R]], timeout: float = 60.0) -> list[R]:
    """Run each callable in its own thread, all released together; re-raise the first error."""
    barrier = threading.Barrier(len(fns))
    results: list[Any] = [None] * len(fns)
    failures: list[BaseException] = []

    def runner(i: int, fn: Callable[[], R]) -> None:
        try:
            barrier.wait(timeout)
            results[i] = fn()
        except BaseException as exc:
            failures.append(exc)

    threads = [
        threading.Thread(target=runner, args=(i, fn), daemon=True) for i, fn in enumerate(fns)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if failures:
        raise failures[0]
    return results


def settle(waiter: Store, queues: Sequence[str] = ("default",)) -> None:
    """Wait on this thread until a wait is not woken. A store may end a thread's first wait at
    once (PostgreSQL does, once its listener takes the key that makes enqueues NOTIFY), which
    is an allowed spurious wake-up; without this a wake-up test would pass on it alone."""
    for _ in range(10):
        if not waiter.wait_for_jobs(list(queues), 0.2):
            return
    pytest.fail("every wait was woken with nothing to wake it")


def waiter_thread(
    store: Store, queues: list[str], timeout: float
) -> tuple[threading.Thread, dict[str, Any]]:
    """A thread that settles a waiter on ``queues`` and then waits up to ``timeout``; its
    result (``woken``) and when it returned (``at``, monotonic) land in the dict. Returns once
    the waiter is about to wait, so a caller's poke after this reaches a waiting store."""
    out: dict[str, Any] = {}
    ready = threading.Event()

    def run() -> None:
        settle(store, queues)  # opens and listens before we signal readiness
        ready.set()
        out["woken"] = store.wait_for_jobs(queues, timeout)
        out["at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    assert ready.wait(10)
    time.sleep(0.05)
    return thread, out


def wake_with(
    waiter: Store, poke: Callable[[], object], queues: Sequence[str] = ("default",),
    wait: float = WAKE_WAIT,
) -> tuple[bool, float]:
    """Start a waiter on ``queues`` (settled first, on its own thread), then poke every 50 ms
    until it returns: a poke before it was waiting may be missed, so none is relied on alone.
    Returns (what the wait returned, seconds from the first poke)."""
    result: list[bool] = []
    settled = threading.Event()

    def run() -> None:
        settle(waiter, queues)
        settled.set()
        result.append(waiter.wait_for_jobs(list(queues), wait))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert settled.wait(10), "the waiter never settled"
    started = time.monotonic()
    while thread.is_alive() and time.monotonic() - started < wait + 5:
        poke()
        thread.join(0.05)
    thread.join(wait + 5)
    assert not thread.is_alive(), "wait_for_jobs overran its timeout"
    return result[0], time.monotonic() - started


#: Why a store cannot take part in a network-fault test (``faulty``, conftest.py).
NO_NETWORK = {
    "sqlite": "sqlite: no network between the caller and the database file: no reply to lose, "
              "no server to lose",
    "memory": "memory: the store is in the caller's process: no reply to lose, no server to "
              "lose",
}


@dataclass
class Faulty:
    """The test's store (same schema or key prefix as ``store``) reached through a fault proxy:
    ``proxy`` breaks the network (``drop_next_reply``, ``refuse``, ``cut``, ``delay``), ``url``
    is the store's URL through it (for Apps), ``open`` opens more stores through it."""

    proxy: FaultProxy
    url: str
    opened: list[Store] = field(default_factory=list)
    default: Store | None = None

    def open(self, **options: Any) -> Store:
        """Another store through the proxy (store options as open_store takes them); closed
        after the test."""
        store = open_store(self.url, **options)
        self.opened.append(store)
        return store

    @property
    def store(self) -> Store:
        """The first store through the proxy, opened and migrated (which only checks the
        schema, and on Redis loads the scripts) on first use."""
        if self.default is None:
            self.default = self.open()
            self.default.migrate()
        return self.default
