"""Noticing that the Redis server restarted or lost tether's data, and saying so loudly.

Why: Redis without an append-only file forgets everything on restart, including the job id
counter. The per-claim token keeps every old claim fenced off the new jobs that reuse its
ids, but jobs were lost and people must learn it: every process whose store lived through the
incident logs it once at ERROR (logger ``tether.store.redis``), and ``P:incidents`` counts it
once for ``tether stats``. The look (``observe.lua``) costs one round trip and runs at most
every ``interval`` seconds on the worker's hot calls (claim, heartbeat), and at once after the
store saw a connection error (a restart always cuts connections). When to look, and logging
an incident once per process, are shared with PostgreSQL's watch (``_incident_watch.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tether.stores._incident_watch import IncidentWatch, first_report

log = logging.getLogger("tether.store.redis")


class ServerWatch(IncidentWatch):
    """What this store saw of the server last: the prefix's epoch and the server's run id; it
    notices "data_loss" and "restart"."""

    def __init__(self, where: str) -> None:
        super().__init__(where, log)  # where: "<url> prefix <p>" (no password)
        self.run_id = ""
        #: Job hashes found gone so far (P:incidents.missing_jobs); None before the first look.
        self.missing: int | None = None

    def known(self) -> tuple[str, str]:
        with self._lock:
            return self.epoch, self.run_id

    def update(self, reply: Sequence[Any]) -> None:
        """Take the reply of ``observe.lua``: log what changed since this store last looked."""
        epoch, run_id, lost, restarted = str(reply[0]), str(reply[1]), int(reply[2]), int(reply[3])
        missing = int(reply[4]) if len(reply) > 4 else 0
        with self._lock:
            seen_missing, self.missing = self.missing, missing
            old_run = self.run_id
            if run_id:
                self.run_id = run_id
            self._take(epoch, "data_loss" if lost else "restart" if restarted else None)
        if lost:
            self._say_lost(
                epoch,
                "redis %s: tether's data was lost (the server restarted without "
                "persistence, was flushed, or failed over to an empty replica): jobs "
                "enqueued, claimed or finished before are gone and job ids are being handed "
                "out again. Claims held from before stay fenced off. Turn on appendonly "
                "(docs/stores.md).",
            )
        elif restarted and first_report(self.where, "restart", run_id):
            log.error(
                "redis %s: the server restarted or failed over (run_id %s -> %s); writes it "
                "acknowledged in its last moments may be lost unless appendfsync is always "
                "(docs/stores.md)",
                self.where, old_run[:8], run_id[:8],
            )
        if seen_missing is not None and missing > seen_missing and \
                first_report(self.where, "missing", str(missing)):
            log.warning(
                "redis %s: %d job(s) whose data was gone (evicted, or deleted by hand) were "
                "dropped from the queue (%d so far); their jobs are lost. Set maxmemory-policy "
                "noeviction (docs/deploying.md)",
                self.where, missing - seen_missing, missing,
            )
