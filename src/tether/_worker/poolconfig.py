"""How a worker runs its handlers: on threads in its own process, or in child processes.

* ``thread`` (the default): handlers share the worker's process. Cheap, but a sync handler
  cannot be stopped from outside (after a lost lease, a cancel or a timeout it is only fenced
  and told to stop), a crash in a handler kills the worker, and one worker uses one core.
* ``process``: each slot is a child process that runs one attempt at a time. A handler that
  must stop is killed (SIGTERM, SIGKILL after ``stop_grace``), a crash costs only that attempt,
  and handlers use every core. Costs: a JSON message each way per job (jobs are sent ahead to
  busy children, so neither side waits for the other between short jobs), a process per slot,
  and ``current_job().transaction()`` is not available (the child has no store connection).

Options are checked here, once, so a wrong one fails before the worker touches a job.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether._appname import check_spec, derive_spec
from tether._errors import ConfigError

if TYPE_CHECKING:
    from tether._runtime import Runtime

POOLS = ("thread", "process")
CHILD_ENV = "TETHER_POOL_CHILD"  # set by a pool child to its own pid


@dataclass(frozen=True, slots=True)
class PoolConfig:
    kind: str = "thread"
    app_spec: str | None = None
    max_tasks_per_child: int | None = None
    max_memory_per_child: float | None = None  # MiB of resident memory
    stop_grace: float = 0.5  # seconds between SIGTERM and SIGKILL
    #: The store URL the worker serves, which children use instead of the one the app module
    #: sets (``tether worker --url`` changes only the parent's app object).
    url: str | None = None


def in_pool_child() -> bool:
    """True inside a process-pool child (grandchildren it starts do not count)."""
    return os.environ.get(CHILD_ENV) == str(os.getpid())


def make_pool_config(
    runtime: Runtime,
    pool: str = "thread",
    *,
    app_spec: str | None = None,
    max_tasks_per_child: int | None = None,
    max_memory_per_child: float | None = None,
) -> PoolConfig:
    if in_pool_child():
        raise ConfigError(
            "a process-pool child imported the app and that import started a worker: guard "
            "app.run_worker() with `if __name__ == \"__main__\":`")
    if pool not in POOLS:
        raise ConfigError(f"pool must be 'thread' or 'process', got {pool!r}")
    if pool == "thread":
        given = [name for name, value in (("app_spec", app_spec),
                                          ("max_tasks_per_child", max_tasks_per_child),
                                          ("max_memory_per_child", max_memory_per_child))
                 if value is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} only apply to pool='process'")
        return PoolConfig()
    if max_tasks_per_child is not None and (
        isinstance(max_tasks_per_child, bool) or not isinstance(max_tasks_per_child, int)
        or max_tasks_per_child < 1
    ):
        raise ConfigError(
            f"max_tasks_per_child must be an integer >= 1, got {max_tasks_per_child!r}")
    if max_memory_per_child is not None:
        if (isinstance(max_memory_per_child, bool)
                or not isinstance(max_memory_per_child, int | float)
                or not math.isfinite(max_memory_per_child) or max_memory_per_child <= 0):
            raise ConfigError(
                f"max_memory_per_child must be a number of MiB > 0, got {max_memory_per_child!r}")
        if not os.path.exists(f"/proc/{os.getpid()}/statm"):
            raise ConfigError("max_memory_per_child needs /proc/<pid>/statm (Linux)")
    spec = check_spec(app_spec) if app_spec is not None else derive_spec(runtime)
    return PoolConfig("process", spec, max_tasks_per_child,
                      None if max_memory_per_child is None else float(max_memory_per_child),
                      url=runtime.url)
