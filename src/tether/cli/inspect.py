"""Read-side commands: jobs, job, dlq, stats, migrate, enqueue."""

from __future__ import annotations

import argparse
import json
import sys

from tether.cli.render import dump_json, job_detail, job_dict, jobs_table, table, when
from tether.errors import JobNotFound
from tether.stores import open_store
from tether.stores.base import STATUSES, JobStatus, Store
from tether.task import make_new_job


def _store(args: argparse.Namespace, migrate: bool = False) -> Store:
    store = open_store(args.url)
    store.migrate() if migrate else store.check_schema()
    return store


def cmd_jobs(args: argparse.Namespace) -> int:
    status: JobStatus | None = args.status
    store = _store(args)
    try:
        jobs = store.list_jobs(status=status, queue=args.queue, after_id=args.after,
                               limit=args.limit)
    finally:
        store.close()
    if args.json:
        dump_json([job_dict(j) for j in jobs])
    else:
        jobs_table(jobs)
        if len(jobs) == args.limit:
            print(f"(more: --after {jobs[-1].id})")
    return 0


def cmd_job(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        job = store.get_job(args.id)
    finally:
        store.close()
    if job is None:
        raise JobNotFound(args.id)
    dump_json(job_dict(job)) if args.json else job_detail(job)
    return 0


def cmd_dlq(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        if args.action == "list":
            jobs = store.list_jobs(status="failed", after_id=args.after, limit=args.limit)
            if args.json:
                dump_json([job_dict(j) for j in jobs])
            else:
                table(["id", "task", "queue", "reason", "attempt", "failed_at", "error"],
                      [[j.id, j.task, j.queue, j.failure_reason or "-", j.attempt,
                        when(j.finished_at), (j.last_error or "-").splitlines()[0][:50]]
                       for j in jobs])
            return 0
        if not args.all and not args.ids:
            print("tether dlq retry: give job ids or --all", file=sys.stderr)
            return 2
        outcome = store.retry_failed(None if args.all else args.ids)
    finally:
        store.close()
    moved, held = outcome.retried, list(outcome.conflicts)
    if args.json:
        dump_json({"retried": moved, "conflicts": held})
    else:
        print(f"retried {moved} job(s)")
        if held:
            print(f"not retried (their unique_key is held by a live job): "
                  f"{', '.join(map(str, held))}")
    return 0 if moved or (args.all and not held) else 1


def durability_warnings(extra: dict[str, str]) -> list[str]:
    """Settings under which a store can silently lose jobs (see docs/stores.md)."""
    warnings = []
    if extra.get("aof_enabled") == "0":
        warnings.append("Redis append-only file is off: a restart loses recent jobs "
                        "(set appendonly yes)")
    policy = extra.get("maxmemory_policy")
    if policy not in (None, "?", "noeviction"):
        warnings.append(f"Redis maxmemory-policy is {policy}: eviction can delete jobs "
                        "(set noeviction)")
    return warnings


def cmd_stats(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        counts = store.counts()
        workers = store.list_workers()
        info = store.info()
    finally:
        store.close()
    queues = sorted({c.queue for c in counts})
    grid = {(c.queue, c.status): c.count for c in counts}
    if args.json:
        dump_json({
            "store": info.kind, "schema_version": info.schema_version,
            "queues": {q: {s: grid.get((q, s), 0) for s in STATUSES} for q in queues},
            "workers": [w.id for w in workers], "store_info": info.extra,
            "warnings": durability_warnings(info.extra),
        })
        return 0
    print(f"store: {info.kind} (schema v{info.schema_version})  workers: {len(workers)}")
    for warning in durability_warnings(info.extra):
        print(f"warning: {warning}")
    table(["queue", *STATUSES], [[q, *(grid.get((q, s), 0) for s in STATUSES)] for q in queues])
    if workers:
        print()
        table(["worker", "host", "pid", "queues", "concurrency", "last_seen"],
              [[w.id, w.host, w.pid, ",".join(w.queues), w.concurrency, when(w.last_seen)]
               for w in workers])
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    store = open_store(args.url)
    try:
        version = store.migrate()
    finally:
        store.close()
    print(f"schema at version {version}")
    return 0


def cmd_enqueue(args: argparse.Namespace) -> int:
    try:
        value = json.loads(args.args)
    except json.JSONDecodeError as exc:
        print(f"tether enqueue: --args is not JSON: {exc}", file=sys.stderr)
        return 2
    if isinstance(value, list):
        call_args, call_kwargs = value, {}
    elif isinstance(value, dict):
        call_args, call_kwargs = [], value
    else:
        print("tether enqueue: --args must be a JSON list (positional) or object (keyword)",
              file=sys.stderr)
        return 2
    job = make_new_job(args.task, call_args, call_kwargs, queue=args.queue,
                       priority=args.priority, delay=args.delay, unique_key=args.unique_key,
                       max_attempts=args.max_attempts)
    store = _store(args, migrate=True)
    try:
        (job_id,) = store.enqueue([job])
    finally:
        store.close()
    dump_json({"id": job_id}) if args.json else print(job_id)
    return 0
