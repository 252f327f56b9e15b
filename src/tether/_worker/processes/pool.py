"""The process pool: each attempt runs in a child process; a child runs one at a time and
holds a few more sent ahead, so it never waits for its worker between two short jobs.

It replaces the thread pool and nothing else: claiming, the batched heartbeat, the lease
watch, deadlines, completion and shutdown stay in the worker process, exactly as with threads.
The heartbeater and the deadlines stop an attempt with ``Running.interrupt``; here that kills
the child running it, or withdraws it from the child holding it.

Invariants:

* A child runs at most one attempt and an attempt runs in at most one child. A job sent ahead
  to a child stays that child's until the child starts it (``start``), skips it after a
  withdrawal (``skipped``), gives it back when it retires, or dies; only then can it go
  elsewhere. Every job sent ahead is in the registry from its claim, so its lease is renewed
  by the batched heartbeat like a running one.
* Exactly one outcome per attempt (``Registry.settle_once``): the child's report, the timeout,
  the forced shutdown, a withdrawal, or the child's end, whichever comes first.
* An attempt the worker must stop (lease lost, cancel requested, timeout, forced shutdown) has
  its child stopped at once when it runs: a ``stop`` message, SIGTERM, and SIGKILL
  ``stop_grace`` later; the child is replaced. When it was only sent ahead, it is withdrawn
  (the child never starts a job whose withdrawal reached it first) and settled at once; a
  child that started it all the same (the two messages crossed) is killed. The outcome follows
  the reason, run or not: ``cancelled``; nothing for a lost lease (the fence would reject it)
  or a timeout (already written); ``released`` on shutdown. Whatever a stopped child reports
  afterwards is ignored.
* A timeout counts from the ``start`` the child sends just before the handler runs, never from
  the claim or the send: a job waiting in a child's queue is not running.
* A child that dies on its own mid-attempt (a signal, ``os._exit``, the memory limit) ends the
  attempt it was running at once as ``stalled`` (stall_count + 1; dead-lettered with reason
  ``stalled`` after ``max_stalls``), with an error naming the signal or exit code. The jobs it
  held but had not started never ran: they go back as ``released``. It is replaced at once and
  the other children carry on.
* No job waits long behind a slow handler (``sendahead``): what is queued behind a handler past
  ``PATIENCE`` is withdrawn and released.

A job's path, in one direction: :meth:`ProcessPool.submit` queues it (``attempts.py``),
:meth:`ProcessPool.dispatch` picks a child (``sendahead.py``) and writes it to the child's pipe
(``children.py``, ``wire.py``); the child runs it (``child.py``, another process); its reader
thread (``pipes.py``) hands what the child says to ``messages.py``, which ends the attempt
(``Attempts.finish``). Stopping an attempt and the supervisor's tick (here) end attempts the
same way.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from tether import _clock as clock
from tether._errors import ConfigError, Interrupted, LeaseInterrupted
from tether._events import Events
from tether._task import Task
from tether._worker.poolconfig import PoolConfig
from tether._worker.processes import sendahead, wire
from tether._worker.processes.attempts import Attempts, key_of, stop_reason, stopped_outcome
from tether._worker.processes.children import Child, State
from tether._worker.processes.fleet import Fleet
from tether._worker.processes.messages import ChildMessages
from tether._worker.processes.pipes import PipeReader
from tether._worker.processes.sendahead import Ahead
from tether._worker.registry import Registry, Running
from tether.stores._contract import Leases, Outcome

log = logging.getLogger("tether.pool")
START_TIMEOUT = 60.0


class ProcessPool:
    """The :class:`~tether._worker.pool.Pool` whose handlers run in child processes."""

    kind = "process"
    claims_ahead = False  # it sends ahead to children instead (``sendahead``)

    def __init__(
        self,
        registry: Registry,
        concurrency: int,
        *,
        settle: Callable[[Running, Outcome | None], None],
        on_claimed: Callable[[Running], None],
        on_started: Callable[[Running, float], None],
        store: Leases,
        events: Events,
        config: PoolConfig,
        owner: str,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self.registry = registry
        registry.set_capacity(self.capacity(concurrency))
        self._on_claimed = on_claimed
        self.config = config
        self.concurrency = concurrency
        init: wire.Header = {
            "op": "init", "spec": config.app_spec, "url": config.url, "sys_path": list(sys.path),
            "log_level": logging.getLogger("tether").getEffectiveLevel(),
            "limits": {"max_tasks": config.max_tasks_per_child,
                       "max_memory": config.max_memory_per_child}}
        self.fleet = Fleet(concurrency, config, init, on_spawned=self._reader_for,
                           on_fatal=on_fatal, on_tick=self._tick)
        self._cond = self.fleet.cond  # one lock for the children and the attempts
        self.attempts = Attempts(registry, settle, self._cond)
        self.ahead = Ahead(self.fleet, config.max_tasks_per_child)
        self.messages = ChildMessages(
            self.attempts, self.fleet, self.ahead, store=store, events=events, config=config,
            owner=owner, on_started=on_started, on_fatal=on_fatal, dispatch=self.dispatch)
        self.pipes = PipeReader(self.messages.on_messages, self.dispatch, self.messages.on_end,
                                on_fatal)

    @staticmethod
    def capacity(concurrency: int) -> int:
        """Attempts a worker may hold with this pool, at most: a running one per child and
        those sent ahead (``Ahead.capacity`` lowers it while handlers are slow)."""
        return concurrency * (1 + sendahead.AHEAD)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the children and wait until every one has imported the app."""
        error = self.fleet.open(timeout)
        if error is not None:
            self.stop()
            raise ConfigError(f"process pool: a child could not start: {error}")
        log.info("process pool ready: %d children (pids %s) serving %s", self.concurrency,
                 ",".join(str(p) for p in self.pids()), self.config.app_spec)

    def stop(self) -> None:
        """End every child (closing its pipe ends it; SIGKILL if it lingers) and wait."""
        if self.fleet.closing:
            return
        self.fleet.stop(5.0)  # no child is started after this
        with self._cond:
            children, queued = list(self.fleet.children), list(self.attempts.waiting)
            self.attempts.waiting.clear()
        for entry in queued:
            self.registry.mark(entry, returned=True)
        for child in children:
            child.writer.close()
        deadline = clock.monotonic() + 2.0 + self.config.stop_grace
        for child in children:
            if not child.gone.wait(max(0.0, deadline - clock.monotonic())):
                child.signal(signal.SIGKILL)
                child.gone.wait(2.0)

    def pids(self) -> list[int]:
        return self.fleet.pids()

    def _reader_for(self, child: Child) -> None:
        self.pipes.add(child)

    @property
    def spawned(self) -> int:
        return self.fleet.spawned

    # -- submitting and stopping attempts ----------------------------------------------------------
    def before_claim(self) -> None:
        """Nothing to do: what waits too long is released by the supervisor's tick."""

    def hand_back_stale(self) -> None:
        """Nothing to do: what waits too long is released by the supervisor's tick."""

    def wait_at_most(self, seconds: float) -> float:
        return seconds

    def submit(self, entry: Running, task: Task[Any, Any]) -> None:
        """Queue an attempt (it takes a slot at once: it is the pool's from its claim); the
        fetcher sends its whole claim with :meth:`dispatch`."""
        self.registry.add(entry)
        self._on_claimed(entry)
        entry.task = task
        entry.on_interrupt = self._interrupted
        entry.extra["bytes"] = wire.run_size(entry.ctx.job)  # not under the lock
        with self._cond:
            entry.extra["queued_at"] = clock.monotonic()
            self.attempts.waiting.append(entry)
        if entry.ctx.cancelled:  # interrupted before the hook was set
            self._interrupted(entry, LeaseInterrupted)

    def dispatch(self) -> None:
        """Send waiting attempts to children, several per write to a child: what was
        submitted (the fetcher calls it after every claim, even an empty one: a job waiting
        for an idle child gets another chance), after every read of a child's pipe, and what a
        retiring or dead child gave back.

        The jobs are assigned and queued in each child's outbox under the lock, in order (a
        child starts them in the order they arrive, and must say ``start`` for them in the
        order the worker assigned them); encoding (one ``runs`` message a batch) and writing
        happen after it (``Child.post``), so the reader never waits on the lock for either. A write
        to a busy child never blocks (``AHEAD_BYTES``, counted with ``wire.run_size``); an idle
        child is reading."""
        if not self.attempts.waiting:
            # Nothing waits (the usual case after a read): no need for the lock or a chooser.
            # Read without the lock, safely: whoever queues an attempt dispatches after.
            return
        touched: dict[Child, int] = {}
        with self._cond:
            chooser = self.ahead.chooser(clock.monotonic())
            while self.attempts.waiting and not self.fleet.closing:
                entry = self.attempts.waiting[0]
                size = int(entry.extra.get("bytes", 0))  # type: ignore[call-overload]
                child = chooser.pick(size)
                if child is None:
                    break  # a big one waits for an idle child
                self.attempts.waiting.popleft()
                entry.extra["child"] = child.pid
                child.ahead.append(entry)
                child.ahead_tasks[entry.ctx.task] += 1
                child.ahead_bytes += size
                child.assigned += 1
                child.state = State.BUSY
                self.attempts.sent[entry] = child
                child.outbox.append(entry)  # encoded by post, with the rest of the batch
                chooser.took(child, entry.ctx.task)
                touched[child] = touched.get(child, 0) + 1
        for child, n in touched.items():
            if not child.post(self._cond):
                # It died: its reader sees end of file after whatever it said, and sends
                # back as released every job it held and had not started.
                child.signal(signal.SIGKILL)
                continue
            log.debug("%d job(s) -> child %d", n, child.pid)

    def _interrupted(self, entry: Running, why: type[Interrupted]) -> None:
        """``Running.interrupt`` hook (any thread): stop the child running ``entry``, or
        withdraw it from the child holding it."""
        withdrawn = False
        with self._cond:
            child = self.attempts.sent.get(entry)
            if child is None:
                if entry not in self.attempts.waiting:
                    return
                self.attempts.waiting.remove(entry)
            elif child.entry is entry:
                if child.stop_why is not None:
                    return
                child.stop_why = stop_reason(entry, why)
                child.kill_at = clock.monotonic() + self.config.stop_grace
                self.fleet.poke()
            elif entry in child.ahead:
                self.attempts.take_back(child, entry)
                child.withdrawn[key_of(entry)] = entry
                withdrawn = True
            else:
                return
        if child is None or withdrawn:
            if child is not None:
                log.info("job %s attempt %s withdrawn from child %d before it started: %s",
                         entry.ctx.id, entry.ctx.attempt, child.pid, stop_reason(entry, why))
                child.send(self._cond, {"op": "withdraw", "job": entry.ctx.id,
                                        "attempt": entry.ctx.attempt})
            self.attempts.finish(entry, stopped_outcome(entry))
            return
        log.warning("stopping child %d running job %s attempt %s: %s (SIGTERM, SIGKILL in "
                    "%.1fs)", child.pid, entry.ctx.id, entry.ctx.attempt, child.stop_why,
                    self.config.stop_grace)
        child.send(self._cond, {"op": "stop", "why": entry.ctx.stop_reason or why.__name__})
        child.signal(signal.SIGTERM)

    # -- the supervisor's tick: nobody waits long behind a slow handler ------------------------
    def _tick(self) -> float | None:
        """The supervisor's tick: release jobs that wait too long (``sendahead``) and let the
        fetcher claim ahead only for children that may hold jobs ahead; when to look again."""
        released: list[tuple[Running, Child | None, str]] = []
        with self._cond:
            now = clock.monotonic()
            for child in self.fleet.children:
                if not self.ahead.serving(child) or not self.ahead.stuck(child, now):
                    continue
                assert child.entry is not None
                why = (f"queued behind job {child.entry.ctx.id}, running for "
                       f"{now - child.started_at:.1f}s in child {child.pid}")
                released += [(e, child, why) for e in self.attempts.withdraw_all(child)]
            if (self.attempts.waiting and self.ahead.pick(now, 0) is None
                    and not self.ahead.soon_free(now)):
                for entry in list(self.attempts.waiting):
                    waited = now - float(entry.extra.get("queued_at", now))  # type: ignore[arg-type]
                    if waited >= sendahead.PATIENCE:
                        self.attempts.waiting.remove(entry)
                        released.append((entry, None, f"no child free for {waited:.1f}s"))
            capacity = self.ahead.capacity(now, self.concurrency)
            busy = bool(self.attempts.waiting) or any(c.load for c in self.fleet.children)
        # Refill when half of what is held ahead has run: a claim (and a write per child) per
        # batch, not per job; the children have work meanwhile.
        self.registry.set_capacity(capacity, (capacity - self.concurrency) // 2)
        self._release(released)
        return sendahead.PATIENCE / 4 if busy else None

    def _release(self, released: list[tuple[Running, Child | None, str]]) -> None:
        for entry, holder, why in released:
            log.info("job %s attempt %s released without running: %s", entry.ctx.id,
                     entry.ctx.attempt, why)
            if holder is not None:
                holder.send(self._cond, {"op": "withdraw", "job": entry.ctx.id,
                                         "attempt": entry.ctx.attempt})
            entry.extra["why"] = f"not started: {why}"
            self.attempts.finish(entry, Outcome(entry.lease, "released"))
