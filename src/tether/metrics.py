"""Prometheus metrics for a worker (the ``metrics`` extra: ``prometheus_client``).

``tether worker --metrics-port N`` serves ``/metrics``; from Python, :func:`serve` does the
same and :class:`Metrics` alone fills a registry of your choice. Why it is built on
:mod:`tether.events`: the worker's threads already announce every claim, outcome, lost lease,
reaped stall and heartbeat there, so counting costs the hot paths nothing they do not already
do, and the numbers agree with the logs line for line.

Queue-wide gauges (depth by queue and state, age of the oldest due pending job) are read from
the store at scrape time, cached for a few seconds, and only by the maintenance leader: summed
over a fleet they are then counted once, and a fleet of a hundred workers does not run a
hundred ``counts()`` per scrape. docs/monitoring.md lists every metric and what to alert on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tether import _clock as clock
from tether._errors import StoreError
from tether.stores._contract import STATUSES, Admin, JobFilter

if TYPE_CHECKING:
    from tether._app import App
    from tether._events import Event

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                    600, 1800, 3600)
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600,
                10800)
RTT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
QUEUE_CACHE = 5.0  # seconds a leader's queue snapshot is reused across scrapes
MAX_TRACKED = 65_536
ELECTION = "maintenance"


class QueueCollector(Collector):
    """Depth by queue and state, and the oldest due pending job's age: leader only."""

    def __init__(self, open_store: Callable[[], Admin]) -> None:
        self._open = open_store
        self._store: Admin | None = None
        self.leader = False
        self._cache: tuple[float, list[Any]] | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _read(self) -> list[Any]:
        if self._store is None:
            self._store = self._open()
        store = self._store
        depth = GaugeMetricFamily("tether_queue_depth", "Jobs per queue and state (from the "
                                  "maintenance leader)", labels=["queue", "state"])
        age = GaugeMetricFamily("tether_oldest_pending_age_seconds", "How long the oldest due "
                                "pending job of each queue has been waiting (from the "
                                "maintenance leader)", labels=["queue"])
        counts = store.counts()
        now = store.now()
        grid = {(c.queue, c.status): c.count for c in counts}
        for q in sorted({c.queue for c in counts}):
            for state in STATUSES:
                depth.add_metric([q, state], grid.get((q, state), 0))
            oldest = 0.0
            if grid.get((q, "pending")):
                first = store.search_jobs(JobFilter(status="pending", queue=q,
                                                    newest_first=False), limit=1)
                if first:
                    oldest = max(0.0, now - first[0].run_at)
            age.add_metric([q], oldest)
        return [depth, age]

    def collect(self) -> Iterator[Any]:
        if not self.leader:
            return
        with self._lock:
            now = clock.monotonic()
            if self._cache is None or now - self._cache[0] > QUEUE_CACHE:
                try:
                    self._cache = (now, self._read())
                except StoreError:
                    self._cache = None
                    return
            yield from self._cache[1]


class Metrics:
    """Counters, histograms and gauges fed by one app's events."""

    def __init__(self, app: App, registry: CollectorRegistry | None = None) -> None:
        from tether.stores import open_store

        self.registry = registry if registry is not None else CollectorRegistry()
        r, tq = self.registry, ["task", "queue"]
        self.enqueued = Counter("tether_jobs_enqueued", "Jobs enqueued by this process "
                                "(accepted by the store)", tq, registry=r)
        self.claimed = Counter("tether_jobs_claimed", "Attempts claimed", tq, registry=r)
        self.waited = Histogram("tether_job_wait_seconds", "Time from a job being due (its "
                                "run_at: enqueue, delay or retry) to its claim", tq,
                                buckets=WAIT_BUCKETS, registry=r)
        self.completed = Counter("tether_jobs_completed", "Jobs done", tq, registry=r)
        self.failed = Counter("tether_jobs_failed", "Attempts that failed (error or timeout), "
                              "retried or not", [*tq, "reason"], registry=r)
        self.retried = Counter("tether_jobs_retried", "Retries scheduled", tq, registry=r)
        self.dead = Counter("tether_jobs_dead_lettered", "Jobs dead-lettered (failed for good)",
                            [*tq, "reason"], registry=r)
        self.cancelled = Counter("tether_jobs_cancelled", "Jobs cancelled", tq, registry=r)
        self.released = Counter("tether_jobs_released", "Leases handed back on shutdown", tq,
                                registry=r)
        self.snoozed = Counter("tether_jobs_snoozed", "Attempts that snoozed their job "
                               "(tether.Snooze: not failures)", tq, registry=r)
        self.lost = Counter("tether_leases_lost", "Leases this worker lost", tq, registry=r)
        self.stalls = Counter("tether_stalls_reaped", "Expired leases the reaper took back "
                              "(counted by the maintenance leader)", ["outcome"], registry=r)
        self.child_stalls = Counter("tether_jobs_stalled", "Attempts ended as stalls because "
                                    "the process-pool child running them died",
                                    [*tq, "outcome"], registry=r)
        self.duration = Histogram("tether_attempt_duration_seconds", "Time from claim to "
                                  "outcome of one attempt", ["task"], buckets=DURATION_BUCKETS,
                                  registry=r)
        self.rtt = Histogram("tether_heartbeat_rtt_seconds", "Round trip of one batched lease "
                             "renewal", buckets=RTT_BUCKETS, registry=r)
        self.in_flight = Gauge("tether_jobs_in_flight", "Attempts claimed and not yet ended",
                               registry=r)
        self.leader = Gauge("tether_maintenance_leader", "1 while this process is the "
                            "maintenance leader", registry=r)
        runtime = app.runtime
        self.queues = QueueCollector(lambda: open_store(runtime.store_url))
        r.register(self.queues)
        self._claims: dict[tuple[int | None, int | None], tuple[float, str, str]] = {}
        self._lock = threading.Lock()
        for name in ("enqueued", "claimed", "completed", "retrying", "failed", "cancelled",
                     "released", "snoozed", "lease_lost", "stalled", "heartbeat",
                     "leadership_acquired", "leadership_lost"):
            runtime.events.on(name, self.on_event)

    def close(self) -> None:
        self.queues.close()

    def _end(self, event: Event) -> tuple[str, str]:
        """Labels of the attempt that ended, its duration observed."""
        with self._lock:
            found = self._claims.pop((event.job_id, event.attempt), None)
            self.in_flight.set(len(self._claims))
        task = str(event.detail.get("task") or (found[1] if found else "?"))
        queue = str(event.detail.get("queue") or (found[2] if found else "?"))
        if found is not None:
            self.duration.labels(task).observe(clock.monotonic() - found[0])
        return task, queue

    def on_event(self, event: Event) -> None:
        name, d = event.name, event.detail
        if name == "claimed":
            task, queue = str(d.get("task", "?")), str(d.get("queue", "?"))
            with self._lock:
                self._claims[(event.job_id, event.attempt)] = (clock.monotonic(), task, queue)
                while len(self._claims) > MAX_TRACKED:
                    self._claims.pop(next(iter(self._claims)))
                self.in_flight.set(len(self._claims))
            self.claimed.labels(task, queue).inc()
            self.waited.labels(task, queue).observe(float(d.get("waited", 0.0)))
        elif name == "enqueued":
            for (task, queue), n in d.get("counts", {}).items():
                self.enqueued.labels(task, queue).inc(n)
        elif name == "heartbeat":
            self.rtt.observe(float(d.get("rtt", 0.0)))
        elif name == "stalled":
            if d.get("kind") == "stalled":  # this worker's own attempt: its child died
                task, queue = self._end(event)
                self.child_stalls.labels(task, queue, "retried").inc()
            else:  # the reaper
                self.stalls.labels("dead_lettered" if d.get("status") == "failed"
                                   else "retried").inc()
        elif name in ("leadership_acquired", "leadership_lost"):
            if d.get("name", ELECTION) == ELECTION:
                self.queues.leader = name == "leadership_acquired"
                self.leader.set(1 if self.queues.leader else 0)
        else:
            task, queue = self._end(event)
            reason = str(d.get("reason") or "error")
            if name == "completed":
                self.completed.labels(task, queue).inc()
            elif name == "retrying":
                self.failed.labels(task, queue, reason).inc()
                self.retried.labels(task, queue).inc()
            elif name == "failed":
                if d.get("kind", "error") == "error":
                    self.failed.labels(task, queue, reason).inc()
                elif d.get("kind") == "stalled":  # a child's death spent the stall budget
                    self.child_stalls.labels(task, queue, "dead_lettered").inc()
                self.dead.labels(task, queue, reason).inc()
            elif name == "cancelled":
                self.cancelled.labels(task, queue).inc()
            elif name == "released":
                self.released.labels(task, queue).inc()
            elif name == "snoozed":
                self.snoozed.labels(task, queue).inc()
            elif name == "lease_lost":
                self.lost.labels(task, queue).inc()


def serve(app: App, port: int, host: str = "127.0.0.1") -> Callable[[], None]:
    """Serve ``/metrics`` for ``app``'s worker on ``host:port``; returns a function that
    stops the server."""
    metrics = Metrics(app)
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)
        metrics.close()

    return stop
