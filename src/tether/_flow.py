"""Flow control as an application declares it: task and queue limits, their checks, and the
key a job is limited by (issue #19).

Invariant: **limits live in the application's code and are enforced by the store at claim.**
``@app.task(concurrency=, rate=, limit_key=)`` and ``app.queue(...)`` turn into
:class:`~tether.stores._records.FlowLimit` values that every worker passes with every claim;
the store counts a group's slots as its ``running`` rows (live leases) and its rate as the
starts it recorded, so no counter exists that a dead worker could leak. Every bad declaration
is one :class:`~tether._errors.ConfigError` when it is made; a bad key value is one
``TypeError`` at enqueue, before anything is written.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether._errors import ConfigError
from tether.stores._records import FlowLimit

__all__ = [
    "QueueLimits",
    "Rate",
    "check_concurrency",
    "key_of",
    "key_reader",
    "parse_queues",
    "parse_rate",
    "slots_for",
    "task_limit",
]

_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
          "h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$")


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts in any window of ``per`` seconds; ``text`` as declared."""

    count: int
    per: float
    text: str


def parse_rate(value: Any, where: str) -> Rate:
    """``"N/s"``, ``"N/m"``, ``"N/h"`` (also ``"N/d"``, and a multiple: ``"N/10s"``,
    ``"N/5m"``), the spellings Celery's ``rate_limit`` and Oban's limits taught users."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: rate must be a string like '100/m', got {value!r}")
    match = _RATE.match(value.lower())
    unit = None
    if match is not None:  # "m", "min", "minute" and "minutes" alike
        word = match.group(3)
        unit = _UNITS.get(word, _UNITS.get(word[:-1]) if word.endswith("s") else None)
    if match is None or unit is None:
        raise ConfigError(f"{where}: rate {value!r} is not 'N/s', 'N/m' or 'N/h' "
                          "(a multiple works too: '10/30s')")
    count = int(match.group(1))
    per = float(match.group(2) or 1) * unit
    if count <= 0 or per <= 0:
        raise ConfigError(f"{where}: rate {value!r} must allow at least one start in a "
                          "window longer than zero")
    return Rate(count, per, value.strip())


def check_concurrency(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: concurrency must be a positive int, got {value!r}")
    return value


def task_limit(task: str, func: Callable[..., Any], *, concurrency: Any, rate: Any,
               limit_key: Any) -> FlowLimit | None:
    """The task's limit (None when it declares none); checks every option first."""
    where = f"task {task}"
    count = check_concurrency(concurrency, where)
    parsed = None if rate is None else parse_rate(rate, where)
    if limit_key is not None:
        if not isinstance(limit_key, str) or not limit_key:
            raise ConfigError(f"{where}: limit_key must name a parameter, got {limit_key!r}")
        if limit_key not in _named_parameters(func):
            raise ConfigError(f"{where}: limit_key {limit_key!r} is not a parameter of the "
                              "function (name one it takes by name)")
    if count is None and parsed is None and limit_key is None:
        return None
    return FlowLimit("task", task, concurrency=count,
                     rate=None if parsed is None else parsed.count,
                     per=0.0 if parsed is None else parsed.per, per_key=limit_key is not None)


def _named_parameters(func: Callable[..., Any]) -> set[str]:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return set()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY,
             inspect.Parameter.POSITIONAL_ONLY)
    return {p.name for p in params if p.kind in named}


def key_of(value: Any, task: str, param: str) -> str:
    """A key value as the store keeps it: a str as it is, an int as its decimal text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{task}: the limit key argument {param!r} must be a str or an int, got "
                    f"{type(value).__name__} {value!r}")


def key_reader(task: str, func: Callable[..., Any], param: str) \
        -> Callable[[Sequence[Any], Mapping[str, Any]], str]:
    """What reads the key out of one call's arguments: the argument bound to ``param`` (its
    default when the call leaves it out). A call that does not bind is the enqueue's
    TypeError, as it would be when the worker runs it."""
    signature = inspect.signature(func)
    index = list(signature.parameters).index(param)
    kind = signature.parameters[param].kind
    positional = kind is not inspect.Parameter.KEYWORD_ONLY

    def read(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        if param in kwargs and kind is not inspect.Parameter.POSITIONAL_ONLY:
            return key_of(kwargs[param], task, param)
        if positional and index < len(args):
            return key_of(args[index], task, param)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{task}: {exc}") from None
        bound.apply_defaults()
        if param not in bound.arguments:
            raise TypeError(f"{task}: the call gives no value for the limit key {param!r}")
        return key_of(bound.arguments[param], task, param)

    return read


class QueueLimits:
    """The fleet-wide limits of queues, declared with ``app.queue(...)``: one per name.

    Declaring a queue twice with the same limits is allowed (a module imported twice, a
    shared settings file); with other limits it is a ConfigError, since two workers could
    otherwise enforce different limits from the same code."""

    def __init__(self) -> None:
        self._limits: dict[str, FlowLimit] = {}
        self._rates: dict[str, str] = {}

    def declare(self, name: Any, *, concurrency: Any = None, rate: Any = None) -> FlowLimit:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"app.queue: the queue name must be a non-empty str, got {name!r}")
        where = f"queue {name}"
        count = check_concurrency(concurrency, where)
        parsed = None if rate is None else parse_rate(rate, where)
        if count is None and parsed is None:
            raise ConfigError(f"{where}: give concurrency= or rate= (or both)")
        limit = FlowLimit("queue", name, concurrency=count,
                          rate=None if parsed is None else parsed.count,
                          per=0.0 if parsed is None else parsed.per)
        known = self._limits.get(name)
        if known is not None and known != limit:
            raise ConfigError(f"{where} is already declared with other limits")
        self._limits[name] = limit
        if parsed is not None:
            self._rates[name] = parsed.text
        return limit

    def all(self) -> list[FlowLimit]:
        return [self._limits[n] for n in sorted(self._limits)]

    def get(self, name: str) -> FlowLimit | None:
        return self._limits.get(name)


def parse_queues(queues: Iterable[str] | Mapping[str, int | None] | None) \
        -> tuple[list[str] | None, dict[str, int]]:
    """``["images=2", "default"]`` or ``{"images": 2, "default": None}`` → the queue names in
    order and the per-queue slot caps of one worker (``-q images=2 -q default=8``)."""
    if queues is None:
        return None, {}
    items: list[tuple[Any, Any]] = []
    if isinstance(queues, Mapping):
        items = list(queues.items())
    else:
        if isinstance(queues, str):
            queues = [queues]
        for entry in queues:
            if not isinstance(entry, str):
                raise ConfigError(f"queues must be names (or 'name=N'), got {entry!r}")
            name, eq, text = entry.partition("=")
            if not eq:
                items.append((entry, None))
                continue
            try:
                items.append((name.strip(), int(text)))
            except ValueError:
                raise ConfigError(f"queue slots {entry!r}: the part after '=' must be a "
                                  "positive int (e.g. images=2)") from None
    names: list[str] = []
    caps: dict[str, int] = {}
    for name, count in items:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a queue name must be a non-empty str, got {name!r}")
        if name in names:
            raise ConfigError(f"queue {name!r} is listed twice")
        names.append(name)
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
                raise ConfigError(f"queue {name!r}: slots must be a positive int, got "
                                  f"{count!r}")
            caps[name] = count
    return names, caps


#: A worker's slots when neither ``concurrency`` nor a count for every queue says.
DEFAULT_CONCURRENCY = 10


def slots_for(concurrency: Any, names: list[str] | None, caps: Mapping[str, int]) -> int:
    """A worker's concurrency: as given, else the sum of the per-queue counts when every
    queue has one, else :data:`DEFAULT_CONCURRENCY`; the counts must fit in it and leave
    the queues without a count at least one slot."""
    if concurrency is not None and (isinstance(concurrency, bool)
                                    or not isinstance(concurrency, int) or concurrency < 1):
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if not caps:
        return DEFAULT_CONCURRENCY if concurrency is None else concurrency
    counted = sum(caps.values())
    uncounted = [q for q in names or () if q not in caps]
    if concurrency is None:
        return counted if not uncounted else max(DEFAULT_CONCURRENCY, counted + 1)
    if counted > concurrency or (uncounted and counted >= concurrency):
        shown = ", ".join(f"{q}={n}" for q, n in caps.items())
        rest = f"; {', '.join(uncounted)} would get no slot" if uncounted else ""
        raise ConfigError(f"queue slots ({shown}) do not fit in concurrency {concurrency}"
                          f"{rest}")
    return concurrency
