"""Plain-callback events. A failing callback is logged and never reaches the worker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether.errors import ConfigError

log = logging.getLogger("tether.events")

EVENTS = frozenset({
    "claimed", "completed", "retrying", "failed", "stalled", "lease_lost", "cancelled",
    "released", "leadership_acquired", "leadership_lost", "child_exited",
})


@dataclass(frozen=True, slots=True)
class Event:
    name: str
    job_id: int | None = None
    attempt: int | None = None
    worker: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


Callback = Callable[[Event], object]


class Events:
    def __init__(self) -> None:
        self._subscribers: dict[str, list[Callback]] = {}
        self._lock = threading.Lock()

    def on(self, name: str, callback: Callback) -> Callback:
        if name not in EVENTS:
            raise ConfigError(f"unknown event {name!r}; known: {', '.join(sorted(EVENTS))}")
        with self._lock:
            self._subscribers.setdefault(name, []).append(callback)
        return callback

    def emit(self, name: str, **kwargs: Any) -> None:
        subscribers = self._subscribers.get(name)
        if not subscribers:
            return
        event = Event(name, **kwargs)
        for callback in list(subscribers):
            try:
                callback(event)
            except Exception:
                log.exception("event callback %r for %s failed", callback, name)
