"""The declared flow limits as ``tether stats`` and the dashboard show them (issue #19).

Why this reads the app, not the store: limits live in the application's code and travel with
every claim (:mod:`tether._flow`); the store holds no row for them. So the limits are shown
only when the app is known (``--app`` / ``$TETHER_APP``), and what is "running now" is read
through the store contract alone: a queue's ``running`` count from ``counts()``, a task's
running jobs from ``search_jobs`` (status ``running``, at most :data:`SCAN` of them), which is
also exactly what the store counts as the limit's slots (a slot is a running job's lease).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether import _limits as limits
from tether.stores._records import FlowLimit, JobFilter

if TYPE_CHECKING:
    from tether._registry import TaskRegistry
    from tether.stores._roles import Admin

__all__ = ["SCAN", "Declared", "declared", "limit_rows", "rate_text"]

#: The most running jobs of one task read to count its slots (one page of ``search_jobs``);
#: more show as "at least" this many.
SCAN = limits.MAX_PAGE

_UNITS = ((86400.0, "d"), (3600.0, "h"), (60.0, "m"), (1.0, "s"))


@dataclass(frozen=True, slots=True)
class Declared:
    """One limit as the app declares it; ``key`` is the ``limit_key`` parameter's name."""

    limit: FlowLimit
    key: str | None = None


def declared(registry: TaskRegistry | None) -> list[Declared]:
    """Every limit the app declares, tasks' first (by name), then queues' (by name)."""
    if registry is None:
        return []
    tasks = [Declared(t.config.flow, t.config.limit_key)
             for _, t in sorted(registry.tasks.items()) if t.config.flow is not None]
    return tasks + [Declared(q) for q in registry.queue_limits.all()]


def rate_text(limit: FlowLimit) -> str | None:
    """``"100/m"``, ``"5/s"``, ``"10/30s"``: the rate in the spelling ``rate=`` takes."""
    if limit.rate is None:
        return None
    for size, unit in _UNITS:
        if limit.per == size:
            return f"{limit.rate}/{unit}"
    return f"{limit.rate}/{limit.per:g}s"


def limit_rows(store: Admin, limits_: list[Declared],
               running_by_queue: dict[str, int]) -> list[dict[str, Any]]:
    """The JSON shape: one dict per limit with ``running`` now (and, per key, the busiest
    key's count and how many keys run); ``running_by_queue`` is from ``counts()``."""
    rows = []
    for d in limits_:
        lim = d.limit
        row: dict[str, Any] = {"scope": lim.scope, "name": lim.name,
                               "concurrency": lim.concurrency, "rate": rate_text(lim),
                               "limit_key": d.key, "running": 0, "at_least": False}
        if lim.scope == "queue":
            row["running"] = running_by_queue.get(lim.name, 0)
        else:
            jobs = store.search_jobs(JobFilter(status="running", task=lim.name), limit=SCAN)
            row["running"], row["at_least"] = len(jobs), len(jobs) == SCAN
            if lim.per_key:
                keys = Counter(j.limit_key for j in jobs)
                busiest = keys.most_common(1)
                row["keys_running"] = len(keys)
                row["busiest_key"] = busiest[0][0] if busiest else None
                row["busiest_running"] = busiest[0][1] if busiest else 0
        rows.append(row)
    return rows


def slots_text(row: dict[str, Any]) -> str:
    """``3 of 5 running``, ``4 running (2 per key; busiest acme: 2, 2 keys)``, ``-``."""
    plus = "+" if row["at_least"] else ""
    running = f"{row['running']}{plus}"
    if row["concurrency"] is None:
        return f"{running} running"
    if row.get("limit_key") is None:
        return f"{running} of {row['concurrency']} running"
    busiest = ""
    if row.get("busiest_key") is not None:
        busiest = (f"; busiest {row['busiest_key']}: {row['busiest_running']}, "
                   f"{row['keys_running']} key(s)")
    return f"{running} running ({row['concurrency']} per {row['limit_key']}{busiest})"
