"""The process pool: each attempt runs in a child process, one attempt per child at a time.

It replaces the thread executor and nothing else: claiming, the batched heartbeat, the lease
watch, deadlines, completion and shutdown stay in the worker process, exactly as with threads.
The heartbeater and the deadlines stop an attempt with ``Running.interrupt``; here that kills
the child running it.

Invariants:

* A child runs at most one attempt and an attempt runs in at most one child. A slot is free
  again only when the child's report arrived or the child has *exited*, so never more than
  ``concurrency`` handlers run, even while one is being killed.
* Exactly one outcome per attempt (``Registry.settle_once``): the child's report, the timeout,
  the forced shutdown, or the child's end, whichever comes first.
* An attempt the worker must stop (lease lost, cancel requested, timeout, forced shutdown) has
  its child stopped at once: a ``stop`` message, SIGTERM, and SIGKILL ``stop_grace`` later;
  the child is replaced. The outcome follows the reason: ``cancelled``; nothing for a lost
  lease (the fence would reject it) or a timeout (already written); ``released`` on shutdown.
  Whatever the stopped child reports afterwards is ignored.
* A child that dies on its own mid-attempt (a signal, ``os._exit``, the memory limit) ends that
  attempt at once as ``stalled`` (stall_count + 1; dead-lettered with reason ``stalled`` after
  ``max_stalls``), with an error naming the signal or exit code; it is replaced at once and the
  other children carry on.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable

from tether import clock
from tether.errors import ConfigError, Interrupted, LeaseInterrupted, StoreError
from tether.events import Events
from tether.stores.base import Outcome, Store
from tether.task import Task
from tether.worker import wire
from tether.worker.children import Child, State, describe_exit
from tether.worker.fleet import Fleet
from tether.worker.poolconfig import PoolConfig
from tether.worker.registry import Registry, Running

log = logging.getLogger("tether.pool")
START_TIMEOUT = 60.0


def stopped_outcome(entry: Running) -> Outcome | None:
    """What to write for an attempt whose child the worker stopped (see the invariants)."""
    why = entry.ctx.stop_reason
    if why == "JobCancelled":
        return Outcome(entry.lease, "cancelled", error="cancelled on request")
    if why == "ShuttingDown":
        return Outcome(entry.lease, "released")
    return None


def stop_reason(entry: Running, why: type[Interrupted]) -> str:
    first = entry.ctx.stop_reason or why.__name__
    if first == "JobCancelled":
        return "cancel requested"
    if first == "ShuttingDown":
        return "worker shutting down"
    return "timeout" if entry.extra.get("timed_out") else "lease lost"


class ProcessPool:
    def __init__(
        self,
        registry: Registry,
        settle: Callable[[Running, Outcome | None], None],
        store: Store,
        events: Events,
        config: PoolConfig,
        *,
        concurrency: int,
        owner: str,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self.registry = registry
        self._settle = settle
        self.store = store
        self.events = events
        self.config = config
        self.concurrency = concurrency
        self.owner = owner
        self._on_fatal = on_fatal
        self._queue: deque[Running] = deque()  # attempts waiting for an idle child
        self._running: dict[Running, Child] = {}
        init: wire.Header = {
            "op": "init", "spec": config.app_spec, "sys_path": list(sys.path),
            "log_level": logging.getLogger("tether").getEffectiveLevel()}
        self.fleet = Fleet(concurrency, config, init, on_spawned=self._reader_for,
                           on_fatal=on_fatal)
        self._cond = self.fleet.cond  # one lock for the children and the attempts

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the children and wait until every one has imported the app."""
        error = self.fleet.start(timeout)
        if error is not None:
            self.stop()
            raise ConfigError(f"process pool: a child could not start: {error}")
        log.info("process pool ready: %d children (pids %s) serving %s", self.concurrency,
                 ",".join(str(p) for p in self.pids()), self.config.app_spec)

    def stop(self) -> None:
        """End every child (closing its pipe ends it; SIGKILL if it lingers) and wait."""
        if self.fleet.closing:
            return
        self.fleet.close()
        self.fleet.join(5.0)  # no child is started after this
        with self._cond:
            children, queued = list(self.fleet.children), list(self._queue)
            self._queue.clear()
        for entry in queued:
            self.registry.mark(entry, returned=True)
        for child in children:
            child.writer.close()
        deadline = clock.monotonic() + 2.0 + self.config.stop_grace
        for child in children:
            if child.thread is not None:
                child.thread.join(max(0.0, deadline - clock.monotonic()))
                if child.thread.is_alive():
                    child.signal(signal.SIGKILL)
                    child.thread.join(2.0)

    def pids(self) -> list[int]:
        return self.fleet.pids()

    @property
    def spawned(self) -> int:
        return self.fleet.spawned

    # -- submitting and stopping attempts ----------------------------------------------------------
    def submit(self, entry: Running, task: Task) -> None:
        entry.on_interrupt = self._interrupted
        with self._cond:
            self._queue.append(entry)
        if entry.ctx.cancelled:  # interrupted before the hook was set
            self._interrupted(entry, LeaseInterrupted)
        self._dispatch()

    def _dispatch(self) -> None:
        while True:
            with self._cond:
                if not self._queue or not self.fleet.idle or self.fleet.closing:
                    return
                entry, child = self._queue.popleft(), self.fleet.idle.pop()
                child.state, child.entry = State.BUSY, entry
                self._running[entry] = child
            entry.extra["child"] = child.pid
            try:
                child.writer.send(*wire.run_message(entry.ctx.job))
            except OSError:  # it died before the job reached it: not an attempt of that job
                with self._cond:
                    if child.entry is entry and child.stop_why is None:
                        child.entry = None
                        del self._running[entry]
                        self._queue.appendleft(entry)
                child.signal(signal.SIGKILL)
                continue
            log.debug("job %s attempt %s -> child %d", entry.ctx.id, entry.ctx.attempt, child.pid)

    def _interrupted(self, entry: Running, why: type[Interrupted]) -> None:
        """``Running.interrupt`` hook (any thread): stop the child running ``entry``."""
        with self._cond:
            child = self._running.get(entry)
            if child is None:
                if entry not in self._queue:
                    return
                self._queue.remove(entry)
            elif child.stop_why is not None:
                return
            else:
                child.stop_why = stop_reason(entry, why)
                child.kill_at = clock.monotonic() + self.config.stop_grace
                self.fleet.poke()
        if child is None:  # it never reached a child
            self._finish(entry, stopped_outcome(entry))
            return
        log.warning("stopping child %d running job %s attempt %s: %s (SIGTERM, SIGKILL in "
                    "%.1fs)", child.pid, entry.ctx.id, entry.ctx.attempt, child.stop_why,
                    self.config.stop_grace)
        try:
            child.writer.send({"op": "stop", "why": entry.ctx.stop_reason or why.__name__})
        except OSError:
            pass
        child.signal(signal.SIGTERM)

    def _finish(self, entry: Running, outcome: Outcome | None) -> None:
        if self.registry.settle_once(entry):
            self._settle(entry, outcome)
        self.registry.mark(entry, returned=True)

    # -- one reader thread per child -------------------------------------------------------------
    def _reader_for(self, child: Child) -> None:
        child.thread = threading.Thread(target=self._read_loop, args=(child,), daemon=True,
                                        name=f"tether-pool-{child.pid}")
        child.thread.start()

    def _read_loop(self, child: Child) -> None:
        try:
            while True:
                try:
                    msg = child.reader.read()
                    if msg is None:
                        break
                    self._handle(child, *msg)
                except (OSError, ValueError, KeyError, TypeError, wire.ProtocolError) as exc:
                    log.error("child %d: broken pipe protocol (%s); killing it", child.pid, exc)
                    child.signal(signal.SIGKILL)
                    break
        except BaseException as exc:
            log.critical("process pool reader of child %d died", child.pid, exc_info=True)
            self._on_fatal(exc)
        finally:
            child.reader.close()
            child.writer.close()
            returncode = child.reap(self.config.stop_grace)
            try:
                self._exited(child, returncode)
            except BaseException as exc:
                log.critical("process pool: handling the exit of child %d failed", child.pid,
                             exc_info=True)
                self._on_fatal(exc)

    def _handle(self, child: Child, header: wire.Header, blobs: list[str | None]) -> None:
        op = header["op"]
        if op == "outcome":
            self._outcome(child, header, blobs)
        elif op == "write":
            self._fenced_write(child, header, blobs)
        elif op == "ready":
            with self._cond:
                self.fleet.ready(child)
            log.debug("child %d ready", child.pid)
            self._dispatch()
        elif op == "fatal":
            child.fatal = str(header.get("error"))
            log.error("child %d: %s", child.pid, child.fatal)

    def _current(self, child: Child, header: wire.Header) -> Running | None:
        """The attempt a message is about, if the child still runs it unstopped (lock held)."""
        entry = child.entry
        if entry is None or child.stop_why is not None:
            return None
        if header.get("job") != entry.ctx.id or header.get("attempt") != entry.ctx.attempt:
            return None
        return entry

    def _outcome(self, child: Child, header: wire.Header, blobs: list[str | None]) -> None:
        limit, most = self.config.max_memory_per_child, self.config.max_tasks_per_child
        with self._cond:
            entry = self._current(child, header)
            if entry is None:
                return  # a stopped attempt's late report: the stop decided its outcome
            outcome = wire.outcome_of(header, blobs, entry.lease)
            child.entry = None
            del self._running[entry]
            child.jobs += 1
            rss = child.rss_mib() if limit is not None else None
            if most is not None and child.jobs >= most:
                child.stop_why = f"recycled after {child.jobs} job(s) (max_tasks_per_child)"
            elif rss is not None and limit is not None and rss > limit:
                child.stop_why = (f"recycled: RSS {rss:.0f} MiB over max_memory_per_child "
                                  f"({limit:g} MiB)")
            if child.stop_why is None:
                child.state = State.IDLE
                self.fleet.idle.append(child)
            else:
                child.state = State.RETIRING
                self.fleet.poke()
        self._finish(entry, outcome)
        if child.state is State.RETIRING:
            log.info("child %d %s", child.pid, child.stop_why)
            child.writer.close()  # it exits at end of file; the supervisor starts a replacement
        self._dispatch()

    def _fenced_write(self, child: Child, header: wire.Header, blobs: list[str | None]) -> None:
        """A checkpoint or progress value from a child: the parent owns the lease and writes."""
        what = header.get("what")
        text = blobs[0] if blobs else None
        with self._cond:
            entry = self._current(child, header)
        reply: wire.Header = {"op": "reply", "seq": header.get("seq"), "ok": False}
        if entry is not None and text is not None and what in ("checkpoint", "progress"):
            write = self.store.save_checkpoint if what == "checkpoint" else self.store.set_progress
            try:
                reply["ok"] = write(entry.lease, text)
            except StoreError as exc:
                reply["error"] = f"{type(exc).__name__}: {exc}"
        try:
            child.writer.send(reply)
        except OSError:
            pass
        if entry is not None and reply["ok"] is False and "error" not in reply:
            log.warning("job %s attempt %s: %s from child %d rejected: the lease is lost",
                        entry.ctx.id, entry.ctx.attempt, what, child.pid)
            self.events.emit("lease_lost", job_id=entry.ctx.id, attempt=entry.ctx.attempt,
                             worker=self.owner, detail={"rejected": what, "child": child.pid})
            entry.interrupt(LeaseInterrupted)

    def _exited(self, child: Child, returncode: int) -> None:
        with self._cond:
            before = child.state
            fatal = self.fleet.remove(child, returncode)
            entry, child.entry = child.entry, None
            if entry is not None:
                self._running.pop(entry, None)
            closing = self.fleet.closing
        status = describe_exit(returncode)
        why = child.stop_why or ("crashed" if entry is not None else "exited")
        if entry is not None:
            self._end_attempt(child, entry, status, closing)
        elif before is State.RETIRING or closing:
            log.debug("child %d %s", child.pid, status)
        elif before is not State.STARTING:
            log.warning("child %d %s while idle; replacing it", child.pid, status)
        self.events.emit(
            "child_exited", job_id=entry.ctx.id if entry else None,
            attempt=entry.ctx.attempt if entry else None, worker=self.owner,
            detail={"child": child.pid, "status": status, "why": why, "jobs": child.jobs})
        if fatal is not None:
            log.critical("process pool: %s", fatal)
            self._on_fatal(ConfigError(fatal))

    def _end_attempt(self, child: Child, entry: Running, status: str, closing: bool) -> None:
        ctx = entry.ctx
        if closing:
            outcome = None
        elif ctx.stop_reason is not None and child.stop_why is not None:
            outcome = stopped_outcome(entry)
            log.warning("child %d (job %s attempt %s) stopped: %s; %s", child.pid, ctx.id,
                        ctx.attempt, child.stop_why, status)
        else:
            cause = f"was killed: {child.stop_why}" if child.stop_why else f"died: {status}"
            error = f"child process {child.pid} running the job {cause}"
            log.error("job %s attempt %s: %s; the attempt ends as a stall", ctx.id, ctx.attempt,
                      error)
            outcome = Outcome(entry.lease, "stalled", error=error, reason="stalled")
        self._finish(entry, outcome)
