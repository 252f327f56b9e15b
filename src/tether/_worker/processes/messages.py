"""What process-pool children say to their worker, and what their exit means.

Invariant: a child's end is precise. A reader thread per child (``pipes.py``) reads its pipe in
order, so a child's messages are handled in the order it sent them: the outcome of one job
before the ``start`` of the next (the child flushes both in one write before the next handler
runs). So when a child dies, the attempt it had said ``start`` for and not reported ends as
``stalled``; the jobs it held and never said ``start`` for never ran and go back as
``released``. Whatever a stopped child reports afterwards is ignored: the stop decided that
attempt's outcome.

Here is where a job's path through the pool ends: a ``start`` arms its timeout, an ``outcome``
ends it (``Attempts.finish``); nothing here calls back into the pool but ``dispatch``, to send
elsewhere what a retiring or dead child gave back.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable

from tether import _clock as clock
from tether import _parents
from tether._errors import ConfigError, LeaseInterrupted, StoreError
from tether._events import Events
from tether._worker.poolconfig import PoolConfig
from tether._worker.processes import wire
from tether._worker.processes.attempts import Attempts, key_of, stopped_outcome
from tether._worker.processes.children import Child, State, describe_exit
from tether._worker.processes.fleet import Fleet
from tether._worker.processes.sendahead import Ahead
from tether._worker.registry import Running
from tether.stores._contract import Leases, Outcome

log = logging.getLogger("tether.pool")


class ChildMessages:
    """What children say, handled on their reader threads (``pipes.py``); every change to a
    child or an attempt under the fleet's lock."""

    def __init__(
        self,
        attempts: Attempts,
        fleet: Fleet,
        ahead: Ahead,
        *,
        store: Leases,
        events: Events,
        config: PoolConfig,
        owner: str,
        on_started: Callable[[Running, float], None],
        on_fatal: Callable[[BaseException], None],
        dispatch: Callable[[], None],
    ) -> None:
        self.attempts = attempts
        self.fleet = fleet
        self.ahead = ahead
        self.store = store
        self.events = events
        self.config = config
        self.owner = owner
        self._on_started = on_started  # arms the attempt's timeout, ``late`` seconds late
        self._on_fatal = on_fatal
        self._dispatch = dispatch  # send waiting attempts (those a child gave back) elsewhere
        self._cond = fleet.cond

    def on_messages(self, child: Child, messages: list[wire.Message]) -> None:
        """Messages ``child`` wrote, in order (its reader thread)."""
        for header, blobs in messages:
            self._handle(child, header, blobs)

    def on_end(self, child: Child) -> None:
        """The child's pipe is closed and every message before it handled: reap it and end
        what it held."""
        try:
            child.writer.close()
            returncode = child.reap(self.config.stop_grace)
            self._exited(child, returncode)
        except BaseException as exc:
            log.critical("process pool: handling the exit of child %d failed", child.pid,
                         exc_info=True)
            self._on_fatal(exc)
        finally:
            child.gone.set()

    def _handle(self, child: Child, header: wire.Header, blobs: list[str | None]) -> None:
        op = header["op"]
        if op == "outcome":
            self._outcome(child, header, blobs)
            if "start" in header:  # the next job starts: the same write, after the outcome
                self._started(child, header["start"])
        elif op == "start":
            self._started(child, header["start"])
        elif op == "skipped":
            with self._cond:
                child.withdrawn.pop((header["job"], header["attempt"]), None)
        elif op == "write":
            self._fenced_write(child, header, blobs)
        elif op == "read":
            self._read(child, header)
        elif op == "retire":
            self._retire(child, str(header.get("why")))
        elif op == "ready":
            with self._cond:
                self.fleet.ready(child)
            log.debug("child %d ready", child.pid)  # the reader's round dispatches
        elif op == "fatal":
            child.fatal = str(header.get("error"))
            log.error("child %d: %s", child.pid, child.fatal)

    def _started(self, child: Child, start: list[float]) -> None:
        """The child starts the next job it holds (``[job, attempt, monotonic time]``; it
        flushed what it owed first)."""
        key = (int(start[0]), int(start[1]))
        with self._cond:
            late = child.withdrawn.pop(key, None)
            if late is not None:  # it started what we withdrew: the messages crossed
                if child.stop_why is None:
                    child.stop_why = "it started a job withdrawn from it"
                    child.kill_at = clock.monotonic() + self.config.stop_grace
                    self.fleet.poke()
                entry = None
            else:
                if not child.ahead or key_of(child.ahead[0]) != key:
                    raise wire.ProtocolError(f"start of {key}, which it does not hold next")
                entry = child.ahead[0]
                self.attempts.take_back(child, entry)
                self.attempts.sent[entry] = child
                child.entry, child.state = entry, State.BUSY
                child.started_at = float(start[2])
        if entry is None:
            assert late is not None
            log.warning("stopping child %d: it started job %s attempt %s after it was "
                        "withdrawn", child.pid, *key)
            child.send(self._cond, {"op": "stop", "why": late.ctx.stop_reason or "ShuttingDown"})
            child.signal(signal.SIGTERM)
            return
        self._on_started(entry, max(0.0, clock.monotonic() - child.started_at))

    def _current(self, child: Child, header: wire.Header) -> Running | None:
        """The attempt a message is about, if the child still runs it unstopped (lock held)."""
        entry = child.entry
        if entry is None or child.stop_why is not None:
            return None
        if header.get("job") != entry.ctx.id or header.get("attempt") != entry.ctx.attempt:
            return None
        return entry

    def _outcome(self, child: Child, header: wire.Header, blobs: list[str | None]) -> None:
        with self._cond:
            entry = self._current(child, header)
            if entry is None:
                return  # a stopped attempt's late report: the stop decided its outcome
            outcome = wire.outcome_of(header, blobs, entry.lease)
            child.entry = None
            del self.attempts.sent[entry]
            child.jobs += 1
            # The handler's own time, as the child measured it: time until this message was
            # read would count the worker's own delays, shrinking what it sends ahead just
            # when it is slow, which slows it further.
            took = header.get("took")
            self.ahead.learn(entry.ctx.task, float(took) if isinstance(took, int | float)
                             else clock.monotonic() - child.started_at)
            if child.load == 0:
                child.state = State.IDLE
        self.attempts.finish(entry, outcome)  # the reader dispatches once per round

    def _retire(self, child: Child, why: str) -> None:
        """The child starts nothing more (recycled between jobs): what it held goes to others."""
        with self._cond:
            child.stop_why = why
            child.state = State.RETIRING
            back = list(child.ahead)
            for entry in back:
                self.attempts.take_back(child, entry)
            self.attempts.waiting.extendleft(reversed(back))
            self.fleet.poke()
        log.info("child %d %s", child.pid, why)
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
        child.send(self._cond, reply)
        if entry is not None and reply["ok"] is False and "error" not in reply:
            log.warning("job %s attempt %s: %s from child %d rejected: the lease is lost",
                        entry.ctx.id, entry.ctx.attempt, what, child.pid)
            self.events.emit("lease_lost", job_id=entry.ctx.id, attempt=entry.ctx.attempt,
                             worker=self.owner, detail={"rejected": what, "child": child.pid})
            entry.interrupt(LeaseInterrupted)

    def _read(self, child: Child, header: wire.Header) -> None:
        """A workflow step's parents, for its child (which has no store): the child's running
        attempt only, as JSON text (``tether._parents``)."""
        with self._cond:
            entry = self._current(child, header)
        reply: wire.Header = {"op": "reply", "seq": header.get("seq")}
        blobs: list[str | None] = []
        if entry is None or header.get("what") != "parents":
            reply["error"] = "not the child's running attempt"
        else:
            try:
                blobs.append(_parents.to_wire(_parents.read(self.store, entry.ctx.id)))
            except StoreError as exc:
                reply["error"] = f"{type(exc).__name__}: {exc}"
        child.post(self._cond, wire.encode(reply, blobs))

    def _exited(self, child: Child, returncode: int) -> None:
        with self._cond:
            before = child.state
            fatal = self.fleet.remove(child, returncode)
            entry, child.entry = child.entry, None
            if entry is not None:
                self.attempts.sent.pop(entry, None)
                self._learn_from_death(child, entry)
            queued = list(child.ahead)
            for waiting in queued:
                self.attempts.take_back(child, waiting)
            child.withdrawn.clear()
            closing = self.fleet.closing
        status = describe_exit(returncode)
        why = child.stop_why or ("crashed" if entry is not None else "exited")
        if entry is not None:
            self._end_attempt(child, entry, status, closing)
        elif before is State.RETIRING or closing:
            log.debug("child %d %s", child.pid, status)
        elif before is not State.STARTING:
            log.warning("child %d died while idle (%s); replacing it", child.pid, status)
        for waiting in queued:  # sent to it, never started: they did not run
            log.warning("job %s attempt %s was waiting in child %d, which died (%s); released "
                        "without running", waiting.ctx.id, waiting.ctx.attempt, child.pid,
                        status)
            waiting.extra["why"] = f"not started: its child {child.pid} {status}"
            self.attempts.finish(waiting, None if closing else Outcome(waiting.lease, "released"))
        self.events.emit(
            "child_exited", job_id=entry.ctx.id if entry else None,
            attempt=entry.ctx.attempt if entry else None, worker=self.owner,
            detail={"child": child.pid, "status": status, "why": why, "jobs": child.jobs,
                    "released": [key_of(w) for w in queued]})
        if fatal is not None:
            log.critical("process pool: %s", fatal)
            self._on_fatal(ConfigError(fatal))
        self._dispatch()

    def _learn_from_death(self, child: Child, entry: Running) -> None:
        """The attempt ``entry`` ended with its child (lock held). A handler that crashed its
        child reported no duration and would still look quick: it is marked crashed, so
        nothing is queued behind its task for a while (``sendahead``). One the worker stopped
        (timeout, cancel, lost lease) ran at least until then: that is its duration."""
        now = clock.monotonic()
        if entry.ctx.stop_reason is not None and child.stop_why is not None:
            self.ahead.learn(entry.ctx.task, max(0.0, now - child.started_at))
        else:
            self.ahead.crash(entry.ctx.task, now)

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
        self.attempts.finish(entry, outcome)
