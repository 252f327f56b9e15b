"""Stopping a maintainer waits for its housekeeping thread: the worker closes the
maintainer's store right after ``stop``, and closing an SQLite connection another thread is
still using crashed the process (SIGSEGV in ``_enable_wal`` under ``housekeeping``, seen when
``tether worker --burst`` stopped a few milliseconds after it started)."""

from __future__ import annotations

import threading
import uuid

from tether._config import make_settings
from tether._events import Events
from tether._maintenance.maintainer import Maintainer
from tether.stores._memory import MemoryStore


class SlowHousekeeping(MemoryStore):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.entered = threading.Event()
        self.release = threading.Event()

    def housekeeping(self) -> str | None:
        self.entered.set()
        self.release.wait(10)
        return None


def test_stop_waits_for_the_housekeeping_thread() -> None:
    store = SlowHousekeeping(f"memory://house-{uuid.uuid4().hex}")
    store.migrate()
    maintainer = Maintainer(store, "h1", make_settings(), Events())
    maintainer.start()
    try:
        assert store.entered.wait(10), "housekeeping started"
        threading.Timer(0.3, store.release.set).start()
        maintainer.stop(5.0)
        house = maintainer._housekeeper
        assert house is None or not house.is_alive(), "stop returned while housekeeping ran"
    finally:
        store.release.set()
        maintainer.stop(5.0)
        store.close()
