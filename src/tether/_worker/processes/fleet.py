"""The children of a process pool, as processes: how many, which are idle, and who kills them.

The pool (``pool.py``) decides about *attempts*; the fleet keeps the *processes*:

* ``size`` live children at all times: a child that dies, is stopped or is recycled is replaced
  at once (a stopped or recycled one already counts as gone while it exits, so its replacement
  is starting meanwhile; the registry, not the number of processes, bounds running handlers);
* the SIGKILL that follows a stop's SIGTERM after ``stop_grace``;
* ``max_memory_per_child`` during an attempt: a busy child whose RSS passes it is SIGKILLed
  (the pool then ends its attempt as a stall, as for any other crash).

One lock (``cond``) guards the fleet and every child's state and attempt, for the pool too.
Children that die before they are ready are counted: at start one failure fails the start (an
app that cannot be imported will not import on a retry); later, ``MAX_START_FAILURES`` in a row
stop the worker instead of spinning.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from tether import _clock as clock
from tether._loop import Loop
from tether._worker.poolconfig import PoolConfig
from tether._worker.processes import wire
from tether._worker.processes.children import Child, State, describe_exit, spawn

log = logging.getLogger("tether.pool")
MEMORY_EVERY = 0.1  # seconds between RSS checks of busy children (with max_memory_per_child)
MAX_START_FAILURES = 3


class Fleet(Loop):
    """The children, kept by a supervisor loop (``tether-pool``): :meth:`open` starts it,
    :meth:`stop` closes the fleet (the pool ends the children)."""

    def __init__(
        self,
        size: int,
        config: PoolConfig,
        init: wire.Header,
        *,
        on_spawned: Callable[[Child], None],
        on_fatal: Callable[[BaseException], None],
        on_tick: Callable[[], float | None] = lambda: None,
    ) -> None:
        super().__init__("tether-pool", log=log, on_fatal=on_fatal,
                         died="process pool supervisor died")
        self.size = size
        self.config = config
        self.cond = threading.Condition()
        self.children: list[Child] = []
        self.closing = False
        self.started = False
        self.start_error: str | None = None
        self.spawned = 0
        self._init = init
        self._on_spawned = on_spawned
        self._on_tick = on_tick
        self._dirty = False
        self._failures = 0
        self._spawn_after = 0.0

    def open(self, timeout: float) -> str | None:
        """Start ``size`` children and wait until they are ready; the error if they are not."""
        self.start()
        with self.cond:
            ready = self.cond.wait_for(
                lambda: self.start_error is not None or self.serving() >= self.size, timeout)
            error = self.start_error or (None if ready else f"not ready after {timeout:.0f}s")
            self.started = error is None
        return error

    def wake(self) -> None:
        """Stop replacing children (the pool ends them), from ``stop()``."""
        with self.cond:
            self.closing = True
            self.poke()

    @property
    def stopping(self) -> bool:
        return self.closing

    def poke(self) -> None:
        """Wake the supervisor (lock held)."""
        self._dirty = True
        self.cond.notify_all()

    def serving(self) -> int:
        """Children that said ready and still serve (lock held)."""
        return sum(c.state in (State.IDLE, State.BUSY) for c in self.children)

    def ready(self, child: Child) -> bool:
        """A child said ready (lock held): it takes jobs from now on."""
        if child.state is not State.STARTING:
            return False
        child.state = State.IDLE
        self._failures = 0
        self.cond.notify_all()
        return True

    def remove(self, child: Child, returncode: int) -> str | None:
        """A child exited (lock held). Returns a fatal error when children keep failing to
        start."""
        before, child.state = child.state, State.DEAD
        if child in self.children:
            self.children.remove(child)
        self.poke()
        if before is not State.STARTING or self.closing:
            return None
        self._failures += 1
        self._spawn_after = clock.monotonic() + min(2.0, 0.1 * 2 ** self._failures)
        why = child.fatal or f"child {child.pid} {describe_exit(returncode)} before it was ready"
        if not self.started:
            self.start_error = why
        elif self._failures >= MAX_START_FAILURES:
            return f"{self._failures} children in a row could not start: {why}"
        return None

    def pids(self) -> list[int]:
        with self.cond:
            return [c.pid for c in self.children if c.state is not State.DEAD]

    # -- the supervisor loop ------------------------------------------------------------------
    def round(self) -> float:
        """SIGKILL what outlived its stop, replace what is missing, watch memory, run the
        pool's tick; then wait (on the fleet's lock) until poked or something is due."""
        with self.cond:
            if self.closing:
                return 0.0
            now = clock.monotonic()
            kill = [c for c in self.children
                    if c.kill_at is not None and not c.killed and c.kill_at <= now]
            for c in kill:
                c.killed = True
            missing = 0
            if self.start_error is None and now >= self._spawn_after:
                missing = self.size - sum(c.live for c in self.children)
            busy = [c for c in self.children
                    if c.entry is not None and c.stop_why is None]
        for c in kill:
            log.warning("child %d still alive %.1fs after SIGTERM: SIGKILL", c.pid,
                        self.config.stop_grace)
            c.signal(signal.SIGKILL)
        for _ in range(missing):
            self._spawn()
        if self.config.max_memory_per_child is not None:
            self._check_memory(busy, self.config.max_memory_per_child)
        hint = self._on_tick()
        with self.cond:
            if not self._dirty and not self.closing:
                wait = self._next_wait(bool(busy))
                self.cond.wait(wait if hint is None else min(wait, max(0.001, hint)))
            self._dirty = False
        return 0.0

    def _next_wait(self, busy: bool) -> float:
        now = clock.monotonic()
        wait = MEMORY_EVERY if busy and self.config.max_memory_per_child is not None else 1.0
        for c in self.children:
            if c.kill_at is not None and not c.killed:
                wait = min(wait, c.kill_at - now)
        if self._spawn_after > now:
            wait = min(wait, self._spawn_after - now)
        return max(0.001, wait)

    def _spawn(self) -> None:
        try:
            child = spawn(self._init)
        except OSError as exc:
            log.error("process pool: cannot start a child: %s", exc)
            with self.cond:
                self._failures += 1
                self._spawn_after = clock.monotonic() + 1.0
                if not self.started:
                    self.start_error = str(exc)
                    self.cond.notify_all()
            return
        self.spawned += 1
        with self.cond:
            self.children.append(child)
            late = self.closing
        self._on_spawned(child)
        if late:  # the pool closed meanwhile: end of file ends it
            child.writer.close()
        log.info("started child %d", child.pid)

    def _check_memory(self, busy: list[Child], limit: float) -> None:
        for child in busy:
            rss = child.rss_mib()
            if rss is None or rss <= limit:
                continue
            with self.cond:
                entry = child.entry
                if child.state is not State.BUSY or child.stop_why is not None or entry is None:
                    continue
                child.stop_why = (f"its RSS ({rss:.0f} MiB) passed max_memory_per_child "
                                  f"({limit:g} MiB)")
                child.killed = True
            log.warning("child %d running job %s attempt %s: %s; SIGKILL", child.pid,
                        entry.ctx.id, entry.ctx.attempt, child.stop_why)
            child.signal(signal.SIGKILL)
