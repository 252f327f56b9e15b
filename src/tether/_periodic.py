"""Periodic schedules (issue #12): what ``@app.periodic(...)`` declares, and the ticks it gives.

Invariant: **a tick is a pure function of the declaration.** Every process with the same
declaration computes the same ticks, as the same floats: ``every=`` ticks are whole multiples
of the interval counted from the epoch (``k * every``), cron ticks are the epoch seconds of
whole minutes (see :mod:`tether._cron` for the DST rule). So whichever maintenance leader offers
a tick, the store sees the same value and ``Store.schedule_tick`` enqueues it once.

The maintenance leader does the scheduling (``tether._maintenance.scheduler``); this module
only declares, into the task registry that holds the app's tasks
(:class:`tether._registry.TaskRegistry`, named here by what :func:`declare` uses of it). The
job of a tick carries the tick and the schedule's name in its payload envelope
(``payload.with_meta``; handlers read ``current_job().scheduled_at``) and a unique key per
(schedule, tick).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tether import _limits as limits
from tether import _payload as payload
from tether._cron import Cron, CronError
from tether._errors import ConfigError
from tether.stores._contract import NewJob

if TYPE_CHECKING:
    from tether._task import Task

#: A task as the decorator got it: ``@app.periodic`` hands it back with its types.
TaskT = TypeVar("TaskT", bound="Task[Any, Any]")

CatchUp = Literal["latest", "all", "none"]
CATCH_UP: tuple[CatchUp, ...] = ("latest", "all", "none")
#: The shortest ``every=`` interval. Fractions of a second are allowed (tests); one second
#: is the shortest the docs promise on a loaded fleet.
MIN_EVERY = 0.05
#: The envelope key of a scheduled job: {"schedule": name, "tick": epoch seconds}.
META_KEY = "periodic"


@dataclass(frozen=True)
class Schedule:
    """One declared schedule of a task. ``name`` is what the store keys ticks by."""

    name: str
    task: Task[Any, Any]
    every: float | None
    cron: Cron | None
    tz: tzinfo
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    catch_up: CatchUp = "latest"
    #: The job of every tick but its envelope and unique key, encoded once at declaration
    #: through the task's codec (None: encoded per tick, for schedules built by hand).
    template: NewJob | None = None

    @property
    def spec(self) -> str:
        """The schedule as written: ``every 30s`` or the cron text."""
        if self.cron is not None:
            return self.cron.text
        assert self.every is not None
        return f"every {self.every:g}s"

    @property
    def fingerprint(self) -> str:
        """What the ticks depend on (spec and zone), carried in each job's envelope so a later
        leader can tell that the schedule was changed since its last job."""
        return f"{self.spec} {self.tz_name}"

    @property
    def tz_name(self) -> str:
        return str(getattr(self.tz, "key", None) or self.tz)

    def next_after(self, t: float) -> float:
        """The first tick strictly after epoch ``t``."""
        if self.cron is not None:
            return self.cron.next_after(t, self.tz)
        assert self.every is not None
        k = math.floor(t / self.every) + 1
        while k * self.every <= t:  # float rounding: the tick must be strictly later
            k += 1
        while k > 1 and (k - 1) * self.every > t:
            k -= 1
        return float(k * self.every)

    def ticks_between(self, after: float, until: float, limit: int) -> list[float]:
        """The last ``limit`` ticks in ``(after, until]``, oldest first, without walking every
        tick of a long gap: it looks back over windows growing eightfold until one holds
        enough (so it walks about ``8 * limit`` ticks at most on a regular schedule)."""
        window = 60.0
        while True:
            low = max(after, until - window)
            tail: deque[float] = deque(maxlen=limit)
            t = self.next_after(low)
            while t <= until:
                tail.append(t)
                t = self.next_after(t)
            if len(tail) >= limit or low <= after:
                return list(tail)
            window *= 8

    def new_job(self, tick: float) -> NewJob:
        """The job for ``tick``: the task's options, the fixed arguments, the tick in the
        envelope and a unique key per (schedule, tick)."""
        job = self.template or self.task.new_job(self.args, dict(self.kwargs))
        text = payload.with_meta(job.payload, **{META_KEY: {
            "schedule": self.name, "tick": tick, "spec": self.fingerprint}})
        return NewJob(task=job.task, payload=text, queue=job.queue, priority=job.priority,
                      run_at=job.run_at, delay=job.delay, max_attempts=job.max_attempts,
                      max_stalls=job.max_stalls, unique_key=unique_key(self.name, tick))


def unique_key(name: str, tick: float) -> str:
    return f"tether:periodic:{name}:{tick!r}"


def _entry(payload_text: str) -> dict[str, Any]:
    try:
        entry = payload.meta(payload_text).get(META_KEY)
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def tick_of(payload_text: str) -> float | None:
    """The tick a scheduled job was enqueued for (None for other jobs)."""
    tick = _entry(payload_text).get("tick")
    return float(tick) if isinstance(tick, int | float) else None


def fingerprint_of(payload_text: str) -> str | None:
    """The ``Schedule.fingerprint`` a scheduled job was enqueued under (None: not a scheduled
    job, or one from a release that did not record it)."""
    spec = _entry(payload_text).get("spec")
    return spec if isinstance(spec, str) else None


def _zone(tz: str | tzinfo | None) -> tzinfo:
    if tz is None:
        return UTC
    if isinstance(tz, tzinfo):
        return tz
    if not isinstance(tz, str) or not tz:
        raise ConfigError(f"periodic tz must be a zone name like 'Europe/Paris', got {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"periodic tz {tz!r} is not a known time zone ({exc})") from None


def _every(every: Any) -> float:
    if isinstance(every, bool) or not isinstance(every, int | float) or not math.isfinite(
            every):
        raise ConfigError(f"periodic every must be a number of seconds, got {every!r}")
    if every < MIN_EVERY:
        raise ConfigError(f"periodic every must be at least {MIN_EVERY} s, got {every!r}")
    if every > limits.MAX_DELAY:
        raise ConfigError(f"periodic every must be at most {limits.MAX_DELAY:.0f} s")
    return float(every)


class Schedules(Protocol):
    """Where :func:`declare` registers a schedule: the registry of the app's tasks."""

    def holds(self, task: Task[Any, Any]) -> bool:
        """Whether ``task`` is one of this registry's (a schedule runs its own app's tasks)."""

    def add_schedule(self, schedule: Schedule) -> None:
        """Keep ``schedule``; ConfigError when its name is taken."""


def declare(
    registry: Schedules, *, every: float | None = None, cron: str | None = None,
    tz: str | tzinfo | None = None, args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None, catch_up: str = "latest",
    name: str | None = None,
) -> Callable[[TaskT], TaskT]:
    """``App.periodic``: check everything now (ConfigError naming the option), register the
    schedule when applied to a task. See docs/periodic.md."""
    from tether._task import Task

    if (every is None) == (cron is None):
        raise ConfigError("periodic needs exactly one of every= (seconds) or cron= (text)")
    parsed: Cron | None = None
    seconds: float | None = None
    if cron is not None:
        try:
            parsed = Cron.parse(cron)
        except CronError as exc:
            raise ConfigError(f"periodic cron: {exc}") from None
    else:
        seconds = _every(every)
        if tz is not None:
            raise ConfigError("periodic tz applies to cron= only (every= counts seconds)")
    zone = _zone(tz)
    if catch_up not in CATCH_UP:
        raise ConfigError(f"periodic catch_up must be one of {', '.join(CATCH_UP)}, "
                          f"got {catch_up!r}")
    if not isinstance(args, list | tuple):
        raise ConfigError("periodic args must be a tuple or list")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ConfigError(f"periodic kwargs must be a mapping of argument names, got "
                          f"{type(kwargs).__name__}")
    fixed = dict(kwargs or {})

    def apply(task: TaskT) -> TaskT:
        if not isinstance(task, Task):
            raise ConfigError("@app.periodic goes above @app.task(...) (it schedules a task)")
        if not registry.holds(task):
            raise ConfigError(f"task {task.name} belongs to another App")
        sched_name = task.name if name is None else name
        try:
            limits.check_text(sched_name, "periodic name", limit=limits.MAX_NAME)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        # Encoded now, as every tick will send them (the task's codec and options), and
        # decoded as the worker will: bad arguments fail here, at import, not as a dead job
        # every tick.
        try:
            template = task.new_job(tuple(args), fixed)
            task.arguments(template.payload)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"periodic {sched_name} args/kwargs: {exc}") from None
        registry.add_schedule(Schedule(sched_name, task, seconds, parsed, zone, tuple(args),
                                       fixed, catch_up, template))
        return task

    return apply


__all__ = ["CATCH_UP", "META_KEY", "MIN_EVERY", "CatchUp", "Schedule", "Schedules", "declare",
           "fingerprint_of", "tick_of", "unique_key"]
