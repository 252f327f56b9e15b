"""``drain(app)``: run the app's real worker in this process until no job is due.

Invariant: drain takes no shortcut. Jobs go through the same claim, heartbeat and fenced
finish as in production (:mod:`tether._worker.burst` only decides when to stop), so a test
that passes with drain exercised the retry, dead-letter, cancel and unique-key rules of the
store it ran on. Only time may be bent: on a ``memory://`` store, ``fast_forward`` moves the
store's clock over retry back-offs and delays instead of sleeping through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether._errors import ConfigError, JobNotFound
from tether._jobview import Job
from tether._worker.burst import run_burst
from tether._worker.worker import Worker
from tether.stores._memory.store import MemoryStore

if TYPE_CHECKING:
    from tether._app import App
    from tether._registry import TaskRegistry

#: What drain returns per job: what ``app.get_job`` returns, the public view ``tether.Job``.
DrainedJob = Job


class DrainFailed(AssertionError):
    """``drain(raise_on_failure=True)`` ran jobs that did not succeed: dead-lettered, or
    waiting for a retry after an error. ``jobs`` holds them; the message has their errors."""

    def __init__(self, jobs: Sequence[DrainedJob]) -> None:
        lines = [f"{len(jobs)} job(s) failed while draining:"]
        for job in jobs:
            lines.append(f"- job {job.id} {job.task} ({job.status}, attempt {job.attempt}, "
                         f"{job.failure_reason or 'will retry'}):")
            lines.extend("    " + line for line in (job.last_error or "").splitlines()[-20:])
        super().__init__("\n".join(lines))
        self.jobs = list(jobs)


def _fast_forward(registry: TaskRegistry, store: MemoryStore, queues: Sequence[str]) -> bool:
    """Move the memory store's clock to the next pending job of a known task (a retry in
    back-off, a delayed job); False when there is none."""
    now = store.now()
    paused = set(store.paused_queues())
    due = [job.run_at for queue in queues if queue not in paused
           for job in store.list_jobs(status="pending", queue=queue, limit=10_000)
           if job.task in registry.tasks and job.run_at > now]
    if not due:
        return False
    store.advance(min(due) - now + 0.001)
    return True


def drain(
    app: App,
    *,
    queues: Sequence[str] | None = None,
    max_jobs: int | None = None,
    timeout: float = 30.0,
    fast_forward: bool | None = None,
    raise_on_failure: bool = False,
    concurrency: int = 1,
) -> list[DrainedJob]:
    """Run ``app``'s worker in this thread until no job is due, and return the jobs it ran.

    * ``queues``: the queues to work (default: the app's task queues).
    * ``max_jobs``: stop after claiming that many jobs (exact with ``concurrency=1``).
    * ``timeout``: seconds; the worker is stopped and ``TimeoutError`` raised after it.
    * ``fast_forward``: when only future jobs are left (retries in back-off, delayed jobs),
      move the store's clock to the next one instead of returning. Default: on for a
      ``memory://`` store, which alone has a clock tests may move; ConfigError elsewhere.
    * ``raise_on_failure``: raise :class:`DrainFailed` when a job that ran ended ``failed``
      or is waiting for a retry after an error.
    * ``concurrency``: handler threads; 1 (the default) runs jobs one by one, in claim order.

    Jobs enqueued by jobs are run too (they are due), and so are retries once due. Returned:
    each job that was claimed, in first-claim order, as ``app.get_job`` shows it at the end
    (id, task, status, attempt, result, errors, ...); a job deleted meanwhile is left out.
    """
    runtime = app.runtime
    store = runtime.store
    memory = isinstance(store, MemoryStore)
    if fast_forward is None:
        fast_forward = memory
    if fast_forward and not isinstance(store, MemoryStore):
        raise ConfigError(f"fast_forward needs a memory:// store (the {store.kind} store's "
                          "clock cannot be moved); pass fast_forward=False")
    # max_jobs counts claims: no claim ahead of free slots (see Worker's claim_ahead)
    worker = Worker(runtime, concurrency=concurrency, queues=queues, maintenance=False,
                    claim_ahead=max_jobs is None, schedules=False)
    forward = None
    if fast_forward and isinstance(store, MemoryStore):
        mem = store
        forward = lambda: _fast_forward(runtime.registry, mem, worker.queues)  # noqa: E731
    result = run_burst(worker, install_signals=False, max_jobs=max_jobs, timeout=timeout,
                       fast_forward=forward)
    if worker.shutdown.fatal is not None:
        raise RuntimeError(f"the worker stopped: {worker.shutdown.fatal}") \
            from worker.shutdown.fatal
    jobs: list[DrainedJob] = []
    for job_id in result.ran:
        try:
            jobs.append(app.get_job(job_id))
        except JobNotFound:
            continue
    if result.timed_out:
        unfinished = [j.id for j in jobs if j.status in ("pending", "running")]
        raise TimeoutError(f"drain did not finish within {timeout}s (jobs claimed: "
                           f"{len(jobs)}; not finished: {unfinished})")
    if raise_on_failure:
        failed = [j for j in jobs if j.status == "failed"
                  or (j.status == "pending" and j.last_error is not None)]
        if failed:
            raise DrainFailed(failed)
    return jobs
