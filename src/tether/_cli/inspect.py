"""Read-side commands: jobs, job, dlq, stats, migrate, enqueue."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tether import _limits as limits
from tether._cli.common import connect, json_value, live_workers, target
from tether._cli.render import (
    SHOWN_LINKS,
    dump_json,
    iso,
    job_detail,
    job_dict,
    jobs_table,
    links_dict,
    links_rows,
    short,
    table,
    when,
    worker_dict,
)
from tether._errors import ConfigError, JobNotFound
from tether._flowview import declared, limit_rows, slots_text
from tether._registry import TaskRegistry
from tether._task import make_new_job
from tether.stores._contract import STATUSES, Admin, JobFilter


def cmd_jobs(args: argparse.Namespace) -> int:
    store = connect(target(args).url)
    newest = not args.oldest_first
    cursor = args.before if newest else args.after
    if args.after is not None and args.before is None:  # --after alone reads oldest first
        newest, cursor = False, args.after
    try:
        jobs = store.search_jobs(
            JobFilter(status=args.status, queue=args.queue, task=args.task, since=args.since,
                      newest_first=newest), cursor=cursor, limit=args.limit)
    finally:
        store.close()
    if args.json:
        dump_json([job_dict(j) for j in jobs])
    else:
        jobs_table(jobs)
        if len(jobs) == args.limit:
            print(f"(more: --{'before' if newest else 'after'} {jobs[-1].id})")
    return 0


def get_job(store: Admin, job_id: int) -> Any:
    job = store.get_job(job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job


def cmd_job(args: argparse.Namespace) -> int:
    store = connect(target(args).url)
    try:
        job = get_job(store, args.id)
        if args.follow:
            from tether._cli.live import follow

            return follow(store, job, args.json, args.interval)
        links = store.job_links(job.id)
        shown = links.parents[:SHOWN_LINKS] + links.children[:SHOWN_LINKS]
        status = {j.id: j.status for j in store.get_jobs(shown)} if shown else {}
    finally:
        store.close()
    if args.json:
        dump_json({**job_dict(job), **links_dict(links)})
    else:
        job_detail(job, links=links_rows(links, status))
    return 0


def cmd_dlq(args: argparse.Namespace) -> int:
    store = connect(target(args).url)
    try:
        if args.action == "list":
            jobs = store.search_jobs(JobFilter(status="failed", queue=args.queue, task=args.task,
                                               since=args.since), cursor=args.before,
                                     limit=args.limit)
            if args.json:
                dump_json([job_dict(j) for j in jobs])
            else:
                table(["id", "task", "queue", "reason", "attempt", "failed", "error"],
                      [[j.id, short(j.task, 32), j.queue, j.failure_reason or "-", j.attempt,
                        when(j.finished_at), short(j.last_error, 50)] for j in jobs])
            return 0
        if not args.all and not args.ids:
            print("tether dlq retry: give job ids or --all", file=sys.stderr)
            return 2
        missing = []
        if not args.all:
            missing = [i for i in args.ids if store.get_job(i) is None]
        outcome = store.retry_failed(None if args.all else args.ids)
        moved, held = outcome.retried, list(outcome.conflicts)
    finally:
        store.close()
    if args.json:
        dump_json({"retried": moved, "conflicts": held, "missing": missing})
    else:
        print(f"retried {moved} job(s)")
        if held:
            print(f"not retried (their unique_key is held by a live job): "
                  f"{', '.join(map(str, held))}")
        if missing:
            print(f"no such job: {', '.join(map(str, missing))}", file=sys.stderr)
    if missing and not moved:
        return 4
    return 0 if moved or (args.all and not held) else 1


#: Share of maxmemory from which Redis counts as at its limit (the claim gate's, _redis/memory.py).
FULL_FROM = 0.95


def memory_warning(extra: dict[str, str]) -> str | None:
    """A store at its memory limit refuses writes: say so, with the figures (Redis only)."""
    used, limit = extra.get("used_memory", ""), extra.get("maxmemory", "")
    if not (used.isdigit() and limit.isdigit()) or int(limit) == 0:
        return None
    if int(used) < FULL_FROM * int(limit):
        return None
    policy = extra.get("maxmemory_policy", "?")
    return (f"Redis is at its memory limit: used_memory {used} of maxmemory {limit} "
            f"({int(used) * 100 // int(limit)}%, policy {policy}): it refuses writes, producers "
            "get StoreFull and workers stop claiming until memory frees (free memory or raise "
            "maxmemory; docs/deploying.md)")


def durability_warnings(extra: dict[str, str]) -> list[str]:
    """Settings under which a store can silently lose jobs (see docs/stores.md), and a store
    at its memory limit."""
    warnings = []
    full = memory_warning(extra)
    if full:
        warnings.append(full)
    missing = extra.get("missing_jobs", "0")
    if missing not in ("0", "?"):
        warnings.append(f"Redis lost the data of {missing} job(s) (evicted or deleted): they "
                        "were dropped from tether's indexes (set maxmemory-policy noeviction)")
    if extra.get("aof_enabled") == "0":
        warnings.append("Redis append-only file is off: a restart loses recent jobs "
                        "(set appendonly yes)")
    lost = extra.get("data_loss", "0")
    if lost not in ("0", "?"):
        at = extra.get("last_data_loss_at")
        last = when(float(at)) if at else "?"
        if "timeline" in extra:  # PostgreSQL: a failover to a standby that lagged
            warnings.append(f"PostgreSQL lost tether's data in a failover {lost} time(s) "
                            f"(last {last}): the jobs enqueued or finished just before are gone "
                            "and job ids were reused (use synchronous replication; see "
                            "docs/guarantees.md)")
        else:
            warnings.append(f"Redis lost tether's data {lost} time(s) (last {last}): the jobs "
                            "it held then are gone and job ids were reused (set appendonly yes; "
                            "see docs/stores.md)")
    policy = extra.get("maxmemory_policy")
    if policy not in (None, "?", "noeviction"):
        warnings.append(f"Redis maxmemory-policy is {policy}: eviction can delete jobs "
                        "(set noeviction)")
    return warnings


def snapshot(store: Admin, lease_ttl: float,
             registry: TaskRegistry | None = None) -> dict[str, Any]:
    """Everything ``tether stats`` shows, as the JSON shape (also what --watch redraws).

    ``limits``: the app's declared flow limits with their running jobs now; None when the
    app is not known (limits live in its code, not in the store: docs/flow-control.md)."""
    counts = store.counts()
    workers = store.list_workers()
    info = store.info()
    now = store.now()
    paused = set(store.paused_queues())
    queues = sorted({c.queue for c in counts} | paused)
    grid = {(c.queue, c.status): c.count for c in counts}
    live = live_workers(store, workers, now, lease_ttl)
    return {
        "store": info.kind, "url": info.url, "schema_version": info.schema_version,
        "time": iso(now),
        "queues": {q: {**{s: grid.get((q, s), 0) for s in STATUSES}, "paused": q in paused}
                   for q in queues},
        "workers": [worker_dict(w, live[w.id]) for w in workers],
        "store_info": info.extra, "warnings": durability_warnings(info.extra),
        "limits": None if registry is None else limit_rows(
            store, declared(registry), {q: grid.get((q, "running"), 0) for q in queues}),
    }


def print_stats(data: dict[str, Any]) -> None:
    live = sum(1 for w in data["workers"] if w["state"] == "live")
    print(f"store: {data['store']} {data['url']} (schema v{data['schema_version']})  "
          f"workers: {live} live, {len(data['workers']) - live} dead  at "
          f"{when(_epoch(data['time']))}")
    for warning in data["warnings"]:
        print(f"warning: {warning}")
    table(["queue", *STATUSES, "state"],
          [[q, *(row[s] for s in STATUSES), "paused" if row["paused"] else "active"]
           for q, row in data["queues"].items()], title="jobs")
    if data.get("limits"):
        print()
        table(["scope", "name", "concurrency", "slots", "rate"],
              [[row["scope"], row["name"], row["concurrency"] or "-", slots_text(row),
                row["rate"] or "-"] for row in data["limits"]],
              title="flow limits (declared by the app, enforced at claim)")
    if data["workers"]:
        print()
        table(["worker", "state", "queues", "concurrency", "last_seen"],
              [[w["id"], w["state"], ",".join(w["queues"]), w["concurrency"],
                when(_epoch(w["last_seen"]))] for w in data["workers"]],
              title="workers", style_col=1)


def _epoch(text: str | None) -> float | None:
    from datetime import datetime

    return None if text is None else datetime.fromisoformat(text).timestamp()


def cmd_stats(args: argparse.Namespace) -> int:
    t = target(args)
    lease_ttl = args.lease_ttl or t.settings.lease_ttl
    registry = t.runtime.registry if t.runtime is not None else None
    store = connect(t.url)
    try:
        if args.watch:
            from tether._cli.live import watch

            return watch(lambda: snapshot(store, lease_ttl, registry), print_stats,
                         args.interval, args.json, args.count)
        data = snapshot(store, lease_ttl, registry)
    finally:
        store.close()
    dump_json(data) if args.json else print_stats(data)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    store = connect(target(args).url, upgrade=True)
    try:
        version = store.info().schema_version
    finally:
        store.close()
    dump_json({"schema_version": version}) if args.json else print(
        f"schema at version {version}")
    return 0


def _call(text: str) -> tuple[list[Any], dict[str, Any]]:
    try:
        value = json_value(text)
    except ValueError as exc:
        raise ConfigError(f"--args is not JSON: {exc}") from None
    if isinstance(value, list):
        return value, {}
    if isinstance(value, dict):
        return [], value
    raise ConfigError("--args must be a JSON list (positional) or object (keyword)")


def cmd_enqueue(args: argparse.Namespace) -> int:
    """With --app the task's own queue, priority, attempt and stall budgets apply (options
    given here override them); without it, the defaults of ``@app.task``."""
    t = target(args)
    call_args, call_kwargs = _call(args.args)
    try:
        if t.runtime is not None:
            task = t.runtime.registry.find_task(args.task)
            if task is None:
                known = ", ".join(sorted(t.runtime.registry.tasks)) or "none"
                raise ConfigError(f"the app has no task named {args.task!r} (known: {known})")
            job = task.new_job(call_args, call_kwargs, delay=args.delay,
                               priority=args.priority, unique_key=args.unique_key,
                               queue=args.queue, limit_key=args.limit_key, after=args.after,
                               allow_failure=args.allow_failure)
            if args.max_attempts is not None:
                job = _replace(job, max_attempts=args.max_attempts)
        else:
            job = make_new_job(args.task, call_args, call_kwargs, queue=args.queue or "default",
                               priority=args.priority or 0, delay=args.delay,
                               unique_key=args.unique_key, max_attempts=args.max_attempts or 5,
                               limit_key=args.limit_key, after=args.after,
                               allow_failure=args.allow_failure)
        limits.check_job(job)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(str(exc)) from None
    store = connect(t.url, create=True)
    try:
        (job_id,) = store.enqueue([job])
    finally:
        store.close()
    if args.json:
        dump_json({"id": job_id, "queue": job.queue})
    else:
        print(job_id)
    return 0


def _replace(job: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(job, **changes)
