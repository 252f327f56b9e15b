"""A forced stop's hand-back: every lease the worker still holds is released in one write.

Why its own module: the worker's stop path is already long, and this is the one step of it
that must stay bounded whatever the store does (see :func:`hand_back`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tether import _clock as clock
from tether._errors import ShuttingDown
from tether._worker.completer import Completer, Pending, Written
from tether._worker.registry import Registry
from tether.stores._contract import Outcome

log = logging.getLogger("tether.worker")


def hand_back(registry: Registry, completer: Completer, exit_by: float,
              notify: Callable[[], None], recovery_bound: float) -> None:
    """Interrupt every handler and release every lease still held, in one write.

    Bounded: when the store does not take the write by ``exit_by`` (the forced stop's
    monotonic deadline), the leases stay with the store until they expire (the reaper
    returns them within the recovery bound), and the log says exactly that, never "handed
    back". ``notify`` wakes other workers once leases were released."""
    batch = []
    for entry in registry.unqueue():  # claimed ahead, never started
        entry.interrupt(ShuttingDown)
        batch.append(Pending(entry, Outcome(entry.lease, "released"), "released"))
    for entry in registry.entries():
        entry.interrupt(ShuttingDown)
        if not entry.lost and registry.settle_once(entry):
            batch.append(Pending(entry, Outcome(entry.lease, "released"), "released"))
    if not batch:
        return
    results: list[Written] = []
    writer = threading.Thread(
        target=lambda: results.append(completer.write(batch, give_up_at=exit_by)),
        name="tether-hand-back", daemon=True)
    writer.start()
    writer.join(max(0.05, exit_by - clock.monotonic()) + 0.5)
    registry.mark_many([p.entry for p in batch], settled=True)
    written = results[0] if results else None
    applied = len(written.applied) if written else 0
    if applied:
        notify()
        log.warning("handed back %d lease(s)", applied)
    if written and written.rejected:
        log.info("%d lease(s) were no longer this worker's (reaped or cancelled)",
                 len(written.rejected))
    lost = len(written.unwritten) if written else len(batch)
    if lost:
        why = (written.error if written else None) or "the store did not answer in time"
        log.warning("could not hand back %d lease(s) (%s); they come back by lease expiry: "
                    "the reaper returns them within lease_ttl + stall_grace + 2s (%.0fs) "
                    "of their last renewal", lost, why, recovery_bound)
