"""What the pages show, read through the store contract only (so every store works).

Rates (jobs done and failed per minute) come from the difference between two samples of
``counts()`` taken by this process; the store keeps no history, and pruning would make any
count taken from finished rows wrong.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tether import _clock as clock
from tether._cli.common import live_workers
from tether._cli.inspect import durability_warnings
from tether._config import Settings
from tether._flowview import Declared, limit_rows, slots_text
from tether.dashboard._graph import svg, walk
from tether.stores._contract import STATUSES, Admin, JobFilter, JobRecord

ELECTION = "maintenance"
SOON = 10.0  # seconds: a lease expiring within this is "about to expire"


@dataclass
class Rates:
    """Samples of (monotonic time, done total, failed total) for per-minute rates."""

    samples: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=120))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, done: int, failed: int) -> tuple[float | None, float | None]:
        now = clock.monotonic()
        with self.lock:
            self.samples.append((now, done, failed))
            old = next((s for s in self.samples if now - s[0] <= 300), None)
        if old is None or now - old[0] < 5:
            return None, None
        minutes = (now - old[0]) / 60
        return max(0, done - old[1]) / minutes, max(0, failed - old[2]) / minutes


def overview(store: Admin, settings: Settings, rates: Rates,
             limits: list[Declared] | None = None) -> dict[str, Any]:
    """``limits``: the app's declared flow limits (None: the app is not known, so none are
    shown; they live in its code, not in the store)."""
    counts = store.counts()
    now = store.now()
    paused = set(store.paused_queues())
    grid = {(c.queue, c.status): c.count for c in counts}
    queues = []
    for q in sorted({c.queue for c in counts} | paused):
        row: dict[str, Any] = {"name": q, "paused": q in paused,
                               **{s: grid.get((q, s), 0) for s in STATUSES}}
        row["oldest"] = None
        if row["pending"]:
            first = store.search_jobs(JobFilter(status="pending", queue=q, newest_first=False),
                                      limit=1)
            if first:
                row["oldest"] = max(0.0, now - first[0].run_at)
        queues.append(row)
    running = store.search_jobs(JobFilter(status="running"), limit=1000)
    held: dict[str, int] = {}
    for j in running:
        held[j.locked_by or "?"] = held.get(j.locked_by or "?", 0) + 1
    listed = store.list_workers()
    live = live_workers(store, listed, now, settings.lease_ttl)  # dead at once (issue #22)
    workers = [{"w": w, "live": live[w.id], "held": held.get(w.id, 0),
                "seen_ago": max(0.0, now - w.last_seen)} for w in listed]
    expiring = sorted((j for j in running if j.lease_until is not None
                       and j.lease_until - now < SOON), key=lambda j: j.lease_until or 0)
    done = sum(grid.get((q["name"], "done"), 0) for q in queues)
    failed = sum(grid.get((q["name"], "failed"), 0) for q in queues)
    done_rate, fail_rate = rates.add(done, failed)
    recent_failed = store.search_jobs(JobFilter(status="failed"), limit=200)
    info = store.info()
    flow = None if limits is None else limit_rows(
        store, limits, {q["name"]: q["running"] for q in queues})
    for row in flow or ():
        row["slots"] = slots_text(row)
    return {
        "limits": flow,
        "now": now, "queues": queues, "workers": workers, "leader": store.leader(ELECTION),
        "expiring": expiring[:20], "done_rate": done_rate, "fail_rate": fail_rate,
        "stalled_dead": sum(1 for j in recent_failed if j.failure_reason == "stalled"),
        "recent_failed": len(recent_failed), "info": info,
        "warnings": durability_warnings(info.extra),
        "totals": {s: sum(q[s] for q in queues) for s in STATUSES},
    }


def pretty(value: Any) -> str:
    """JSON for a <pre>: on one line when short, indented when not."""
    compact = json.dumps(value, ensure_ascii=False)
    return compact if len(compact) <= 100 else json.dumps(value, indent=2, ensure_ascii=False)


def decoded(text: str | None) -> str:
    """Stored JSON text for a <pre> (or '-')."""
    if text is None:
        return "-"
    try:
        return pretty(json.loads(text))
    except ValueError:
        return text


#: How many parents, and children, the job page lists (the graph shows up to MAX_JOBS).
SHOWN_LINKS = 50


def links_view(store: Admin, job: JobRecord) -> dict[str, Any]:
    """The job's place in a workflow (issue #20): its parents and children with their
    status, and the SVG graph of the jobs around it; nothing for a job without links (one
    read of its links, the common case)."""
    links = store.job_links(job.id)
    if not (links.parents or links.children):
        return {"links": links, "graph": None}
    graph = walk(store, job.id)

    def named(ids: tuple[int, ...]) -> list[tuple[int, str]]:
        return [(i, graph.nodes.get(i, ("", "?"))[1]) for i in ids[:SHOWN_LINKS]]

    return {"links": links, "graph": svg(graph), "graph_cut": graph.cut,
            "graph_size": len(graph.nodes), "parents": named(links.parents),
            "children": named(links.children),
            "more_parents": max(0, len(links.parents) - SHOWN_LINKS),
            "more_children": max(0, len(links.children) - SHOWN_LINKS)}


def job_view(job: JobRecord) -> dict[str, Any]:
    value = json.loads(job.payload)
    attempts = []
    for e in json.loads(job.errors):
        head, _, tb = (e.get("error") or "").partition("\n")
        attempts.append({**e, "head": head, "traceback": tb.strip()})
    return {
        "job": job, "args": pretty(value[0]), "kwargs": pretty(value[1]),
        "result": decoded(job.result), "progress": decoded(job.progress),
        "checkpoint": decoded(job.checkpoint), "attempts": attempts,
        "live": job.status in ("waiting", "pending", "running"),
        "pipe": value[2].get("pipe") if len(value) == 3 and isinstance(value[2], dict) else None,
    }
