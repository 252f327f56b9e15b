"""The pruner: deletes finished jobs past their retention, in bounded batches.

Bounded batches keep each delete short, so pruning a large backlog never holds locks long
enough to slow claims. Only terminal states are ever touched. It also forgets worker rows
silent for longer than ``DEAD_WORKER_RETENTION`` (workers SIGKILLed or lost with their machine
never unregister), so ``tether stats`` and the dashboard do not list them forever.
"""

from __future__ import annotations

import logging

from tether.stores._contract import JobStatus, Maintenance

log = logging.getLogger("tether.pruner")
DEAD_WORKER_RETENTION = 86_400.0


class Pruner:
    def __init__(
        self, store: Maintenance, retention: dict[JobStatus, float], *, batch: int = 1000,
        max_batches: int = 10,
    ) -> None:
        for status in retention:
            if status not in ("done", "failed", "cancelled"):
                raise ValueError(f"only terminal jobs are pruned, not {status!r}")
        self.store = store
        self.retention = retention
        self.batch = batch
        self.max_batches = max_batches

    def run_once(self, *, now: float | None = None) -> int:
        deleted = 0
        for status, keep in self.retention.items():
            for _ in range(self.max_batches):
                n = self.store.prune(status, keep, now=now, limit=self.batch)
                deleted += n
                if n < self.batch:
                    break
        if deleted:
            log.info("pruned finished jobs count=%d", deleted)
        gone = self.store.delete_dead_workers(DEAD_WORKER_RETENTION, now=now)
        if gone:
            log.info("forgot %d worker row(s) silent for over a day", gone)
        return deleted
