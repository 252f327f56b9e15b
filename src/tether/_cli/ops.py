"""Steering commands: cancel, purge, pause, resume, and the health probe."""

from __future__ import annotations

import argparse
import socket
import sys

from tether._cli.common import connect, live_workers, target
from tether._cli.inspect import memory_warning
from tether._cli.render import dump_json
from tether.stores._contract import Admin, JobStatus

#: What ``purge`` deletes unless told otherwise: work nobody has started. Running jobs are never
#: purged (their holder's lease stands; cancel them instead).
PURGE_DEFAULT: tuple[JobStatus, ...] = ("pending",)
PURGEABLE: tuple[JobStatus, ...] = ("waiting", "pending", "done", "failed", "cancelled")


def cmd_cancel(args: argparse.Namespace) -> int:
    store = connect(target(args).url)
    try:
        result = store.cancel(args.id)
    finally:
        store.close()
    text = {"cancelled": f"job {args.id} cancelled",
            "requested": f"job {args.id} is running: cancellation requested (its handler is "
                         "told at the next heartbeat)",
            "finished": f"job {args.id} had already finished; nothing to cancel"}[result]
    dump_json({"id": args.id, "result": result}) if args.json else print(text)
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    """Delete with ``--yes``; otherwise first show what would go, then ask at a terminal and
    refuse elsewhere (a script must say ``--yes``): issue #24 found purge deleting unasked."""
    statuses: tuple[JobStatus, ...] = tuple(args.status) if args.status else PURGE_DEFAULT
    store = connect(target(args).url)
    try:
        if not args.yes:
            grid = {c.status: c.count for c in store.counts() if c.queue == args.queue}
            found = {s: grid.get(s, 0) for s in statuses}
            total = sum(found.values())
            listed = ", ".join(f"{n} {s}" for s, n in found.items())
            if args.json:
                dump_json({"queue": args.queue, "statuses": list(statuses),
                           "would_delete": found, "deleted": 0})
            elif not total:
                print(f"nothing to delete: queue {args.queue} has no {'/'.join(statuses)} job")
            else:
                print(f"queue {args.queue}: {listed} job(s) would be deleted")
            if not total or args.dry_run:
                return 0
            if args.json or not sys.stdin.isatty():
                print("tether: error: not deleted: add --yes to delete them", file=sys.stderr)
                return 2
            answer = input(f"delete these {total} job(s)? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("nothing deleted")
                return 1
        deleted = store.purge(args.queue, statuses)
    finally:
        store.close()
    if args.json:
        dump_json({"queue": args.queue, "statuses": list(statuses), "deleted": deleted})
    else:
        print(f"deleted {deleted} {'/'.join(statuses)} job(s) from queue {args.queue}")
    return 0


def _unused(store: Admin, queue: str, app_queues: list[str]) -> bool:
    """True when no job in the store, no registered worker and no task of the app names
    ``queue``: pausing it is most likely a typo (issue #24), though a queue may be paused
    before its first job, so this only warns."""
    if queue in app_queues:
        return False
    if any(c.queue == queue for c in store.counts()):
        return False
    return not any(queue in w.queues for w in store.list_workers())


def cmd_pause(args: argparse.Namespace) -> int:
    t = target(args)
    store = connect(t.url)
    try:
        if args.paused and _unused(store, args.queue, t.queues() or []):
            print(f"warning: no job, worker or task uses queue {args.queue!r} (a typo?); "
                  "pausing it anyway", file=sys.stderr)
        changed = store.pause_queue(args.queue) if args.paused else \
            store.resume_queue(args.queue)
    finally:
        store.close()
    state = "paused" if args.paused else "active"
    if args.json:
        dump_json({"queue": args.queue, "state": state, "changed": changed})
    else:
        note = "" if changed else f" (it already was {state})"
        print(f"queue {args.queue} {state}{note}" + (
            ": workers stop claiming from it within a few seconds; running jobs finish"
            if args.paused and changed else ""))
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    """Exit 0 when the store answers (and, with --worker, when every queue has a live
    worker); 1 when a queue has none; 3 when the store is unreachable or its schema is off."""
    t = target(args)
    store = connect(t.url)
    try:
        now = store.now()
        workers = store.list_workers() if args.worker else []
        live_ids = live_workers(store, workers, now, args.lease_ttl or t.settings.lease_ttl)
        full = memory_warning(store.info().extra)  # answers, but refuses writes
    finally:
        store.close()
    if full and not args.json:
        print(f"warning: {full}", file=sys.stderr)
    served: dict[str, int] = {}
    if args.worker:
        queues = args.queue or t.queues() or ["default"]
        host = socket.gethostname() if args.local else None
        live = [w for w in workers if live_ids[w.id] and (host is None or w.host == host)]
        served = {q: sum(1 for w in live if q in w.queues) for q in queues}
    idle = [q for q, n in served.items() if not n]
    code = 1 if idle else 0
    if args.json:
        dump_json({"store": "ok", "queues": served, "healthy": code == 0,
                   "warnings": [full] if full else []})
    elif idle:
        print(f"unhealthy: no live worker{' on this host' if args.local else ''} serves "
              f"queue(s) {', '.join(idle)}", file=sys.stderr)
    else:
        extra = "".join(f"; {q}: {n} live worker(s)" for q, n in served.items())
        print(f"ok: store reachable{extra}")
    return code
