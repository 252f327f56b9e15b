"""The pruner: deletes finished jobs past their retention, in bounded batches.

Bounded batches keep each delete short, so pruning a large backlog never holds locks long
enough to slow claims. Only terminal states are ever touched.
"""

from __future__ import annotations

import logging

from tether.stores.base import JobStatus, Store

log = logging.getLogger("tether.pruner")


class Pruner:
    def __init__(
        self, store: Store, retention: dict[JobStatus, float], *, batch: int = 1000,
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
        return deleted
