"""The maintainer: runs the reaper, the pruner and store housekeeping, under leadership unless
election is off.

Runs as a thread inside each worker (by default) or alone as ``tether reaper``. Its loop never
dies on a store error (it logs and tries again); an unexpected exception stops the worker that
hosts it, because a worker without its reaper would quietly break the recovery bound.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tether import clock
from tether.config import Settings
from tether.errors import StoreError
from tether.events import Events
from tether.maintenance.leadership import LeaderElector
from tether.maintenance.pruner import Pruner
from tether.maintenance.reaper import Reaper
from tether.stores.base import Store

log = logging.getLogger("tether.maintainer")
ELECTION = "maintenance"
HOUSEKEEPING_EVERY = 2.0  # a statistics read; the VACUUM it may start runs on its own thread


class Maintainer:
    def __init__(
        self,
        store: Store,
        holder: str,
        settings: Settings,
        events: Events,
        *,
        on_fatal: Callable[[BaseException], None] | None = None,
        reap: bool = True,
    ) -> None:
        self.store = store
        self.settings = settings
        self.reaper = Reaper(store, events, stall_grace=settings.stall_grace,
                             interval=settings.reap_every) if reap else None
        self.pruner = Pruner(store, {
            "done": settings.retention_done, "failed": settings.retention_failed,
            "cancelled": settings.retention_cancelled,
        }) if settings.prune_interval > 0 else None
        self.elector = LeaderElector(store, ELECTION, holder, events,
                                     ttl=settings.leader_lease,
                                     retry=settings.leader_retry_every) if settings.election \
            else None
        self._on_fatal = on_fatal
        self._housekeeper: threading.Thread | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.run, name="tether-maintainer", daemon=True)

    @property
    def acting(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def run(self) -> None:
        """The loop; returns when stopped. Leadership is released on the way out."""
        try:
            self._loop()
        except BaseException as exc:
            log.critical("maintainer died", exc_info=True)
            if self._on_fatal is None:
                raise
            self._on_fatal(exc)
        finally:
            if self.elector is not None:
                self.elector.release()

    def housekeep(self) -> None:
        """Start store housekeeping unless a run is still going; never blocks the reaper."""
        if self._housekeeper is not None and self._housekeeper.is_alive():
            return

        def run() -> None:
            try:
                done = self.store.housekeeping()
                if done:
                    log.info("housekeeping: %s", done)
            except StoreError as exc:
                log.warning("housekeeping failed: %s", exc)

        self._housekeeper = threading.Thread(target=run, name="tether-housekeeping",
                                             daemon=True)
        self._housekeeper.start()

    def _loop(self) -> None:
        next_election = next_reap = next_prune = next_house = clock.monotonic()
        while not self._stop.is_set():
            now = clock.monotonic()
            if self.elector is not None and now >= next_election:
                next_election = now + self.elector.run_once()
            if self.acting:
                try:
                    if self.reaper is not None and now >= next_reap:
                        self.reaper.run_once()
                        next_reap = clock.monotonic() + self.reaper.next_wait()
                    if self.pruner is not None and now >= next_prune:
                        self.pruner.run_once()
                        next_prune = clock.monotonic() + self.settings.prune_interval
                    if now >= next_house:
                        self.housekeep()
                        next_house = clock.monotonic() + HOUSEKEEPING_EVERY
                except StoreError as exc:
                    log.warning("maintenance sweep failed (%s); retrying", exc)
                    next_reap = clock.monotonic() + 1.0
            else:
                next_reap = next_prune = clock.monotonic()  # act at once on becoming leader
            due = [next_election] if self.elector is not None else []
            if self.acting:
                due += [t for t, on in ((next_reap, self.reaper), (next_prune, self.pruner)) if on]
                due.append(next_house)
            wait = (min(due) - clock.monotonic()) if due else self.settings.reap_every
            self._stop.wait(max(0.005, wait))
