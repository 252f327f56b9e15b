"""The task registry: the tasks and periodic schedules an app declared, and the modules that
declare them (``App(include=...)``).

Invariant: **a name means one task and one schedule.** Registering a second task or schedule
under a taken name raises ConfigError at declaration, so a worker, a process-pool child and a
producer that imported the same modules resolve every stored task name to the same function.

The registry belongs to the runtime (:class:`tether._runtime.Runtime`), which the worker, the
process-pool child, results and the CLI use; the App only fills it (``@app.task``,
``@app.periodic``), so the schedules live and die with the app that declared them.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tether._errors import ConfigError
from tether._flow import QueueLimits

if TYPE_CHECKING:
    from tether._periodic import Schedule
    from tether._task import Task
    from tether.stores._records import FlowLimit


class TaskRegistry:
    """The tasks by name, the schedules by name, and the ``include`` modules that declare
    more of them (imported once, on the first lookup that misses or when a worker starts)."""

    def __init__(self, include: Iterable[str] = ()) -> None:
        if isinstance(include, str):
            include = [include]
        self.include: tuple[str, ...] = tuple(include)
        if not all(isinstance(m, str) and m for m in self.include):
            raise ConfigError(f"include must be module names, got {self.include!r}")
        self.included = not self.include
        self.tasks: dict[str, Task[Any, Any]] = {}
        self._schedules: dict[str, Schedule] = {}
        self._lock = threading.RLock()
        #: ``app.queue(...)`` declarations.
        self.queue_limits = QueueLimits()

    # -- declaring ---------------------------------------------------------------------------
    def add_task(self, task: Task[Any, Any]) -> None:
        if task.name in self.tasks:
            raise ConfigError(f"a task named {task.name!r} is already registered")
        self.tasks[task.name] = task

    def holds(self, task: Task[Any, Any]) -> bool:
        """Whether ``task`` is the one registered here under its name."""
        return self.tasks.get(task.name) is task

    def add_schedule(self, schedule: Schedule) -> None:
        if schedule.name in self._schedules:
            raise ConfigError(f"a schedule named {schedule.name!r} is already declared; give "
                              "name= to schedule a task twice")
        self._schedules[schedule.name] = schedule

    def schedules(self) -> list[Schedule]:
        """Every declared schedule, by name."""
        return [s for _, s in sorted(self._schedules.items())]

    def flow(self) -> list[FlowLimit]:
        """Every declared fleet-wide limit (tasks', then queues'), what a worker's claims
        pass to the store; empty when none is declared, and then claims are unchanged."""
        tasks = [t.config.flow for _, t in sorted(self.tasks.items())
                 if t.config.flow is not None]
        return tasks + self.queue_limits.all()

    def queues(self) -> list[str]:
        """The queues of the registered tasks (``["default"]`` when there are none)."""
        return sorted({t.config.queue for t in self.tasks.values()}) or ["default"]

    # -- looking up --------------------------------------------------------------------------
    def import_includes(self) -> None:
        """Import the modules of ``include`` (once; a failed import is tried again next
        time). An error names the module."""
        if self.included:
            return
        with self._lock:
            if self.included:
                return
            for module in self.include:
                try:
                    importlib.import_module(module)
                except Exception as exc:
                    raise ConfigError(f"cannot import {module!r} (listed in App(include=...)): "
                                      f"{type(exc).__name__}: {exc}") from exc
            self.included = True

    async def aimport_includes(self) -> None:
        """:meth:`import_includes` on a thread, for the async reads that decode by a task's
        annotations: an import reads files and runs module code (a Django project's takes
        seconds), which must not hold the caller's event loop. A broken include is left to
        the read (plain JSON) and the worker (which reports it)."""
        if self.included:
            return
        try:
            await asyncio.to_thread(self.import_includes)
        except ConfigError:
            pass

    def find_task(self, name: str) -> Task[Any, Any] | None:
        """The task registered as ``name``; the ``include`` modules are imported first when
        it is not known yet. None when no module declares it."""
        task = self.tasks.get(name)
        if task is None and not self.included:
            self.import_includes()
            task = self.tasks.get(name)
        return task

    def reading_task(self, name: str, *, imports: bool = True) -> Task[Any, Any] | None:
        """The task that decodes a stored job's values for a read (``imports=False``: never
        import the ``include`` modules here, an event loop's caller did, or tried, on a
        thread); a broken include is not a read's error (the worker reports it; the read
        shows plain JSON), so it gives only the tasks already known."""
        try:
            return self.find_task(name) if imports else self.tasks.get(name)
        except ConfigError:
            return self.tasks.get(name)
