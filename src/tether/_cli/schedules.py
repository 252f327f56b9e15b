"""``tether schedules MODULE:APP``: every periodic schedule, its next run and its last run.

Read-only: the app gives the declarations (task, spec, zone, catch-up) and the store what the
maintenance leader recorded (``Store.schedules``: the last tick and the job of the last
enqueued tick, whose status is read too). Schedules the store knows but the app no longer
declares are listed as such, so a removed schedule's history stays visible.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from tether._cli.common import connect
from tether._cli.render import dump_json, iso, table, when
from tether._errors import ConfigError
from tether._periodic import Schedule, tick_of
from tether.stores._contract import Admin, ScheduleState


def cmd_schedules(args: argparse.Namespace) -> int:
    from tether._appspec import load_app

    spec = args.target_app or getattr(args, "app", None) or os.environ.get("TETHER_APP")
    if not spec:
        raise ConfigError("tether schedules needs the app that declares them: "
                          "tether schedules MODULE:APP (or --app, or $TETHER_APP)")
    runtime = load_app(spec).runtime
    store = connect(args.url or runtime.url)
    try:
        now = store.now()
        states = {s.name: s for s in store.schedules()}
        declared = {s.name: s for s in runtime.registry.schedules()}
        rows = [describe(store, declared.get(name), states.get(name), now, name)
                for name in sorted(declared.keys() | states.keys())]
    finally:
        store.close()
    if args.json:
        dump_json(rows)
        return 0
    table(["schedule", "task", "spec", "tz", "catch-up", "next run", "last tick", "last job",
           "job status"],
          [[r["name"], r["task"] or "(not declared)", r["spec"] or "-", r["tz"] or "-",
            r["catch_up"] or "-", _next(r), when_iso(r["last_tick"]),
            r["last_job_id"] if r["last_job_id"] is not None else "-",
            r["last_job_status"] or "-"] for r in rows], style_col=8)
    return 0


def describe(store: Admin, schedule: Schedule | None, state: ScheduleState | None,
             now: float, name: str) -> dict[str, Any]:
    """One schedule as a plain dict (times ISO 8601, as every ``--json`` output)."""
    row: dict[str, Any] = {
        "name": name, "task": None, "spec": None, "tz": None, "catch_up": None,
        "next_run": None, "overdue_since": None, "last_tick": None, "last_job_id": None,
        "last_job_tick": None, "last_job_status": None,
    }
    if schedule is not None:
        row.update(task=schedule.task.name, spec=schedule.spec, tz=schedule.tz_name,
                   catch_up=schedule.catch_up)
        after = now if state is None else max(state.last_tick, now)
        row["next_run"] = iso(schedule.next_after(after))
        if state is not None:
            first_due = schedule.next_after(state.last_tick)
            if first_due <= now:  # no leader has offered it yet
                row["overdue_since"] = iso(first_due)
    if state is not None:
        row["last_tick"] = iso(state.last_tick)
        row["last_job_id"] = state.last_job_id
        if state.last_job_id is not None:
            job = store.get_job(state.last_job_id)
            if job is not None:
                row["last_job_status"] = job.status
                row["last_job_tick"] = iso(tick_of(job.payload))
            else:
                row["last_job_status"] = "(pruned)"
    return row


def when_iso(text: str | None) -> str:
    from datetime import datetime

    return "-" if text is None else when(datetime.fromisoformat(text).timestamp())


def _next(row: dict[str, Any]) -> str:
    if row["next_run"] is None:
        return "-"
    text = when_iso(row["next_run"])
    if row["overdue_since"] is not None:
        text += f" (overdue since {when_iso(row['overdue_since'])})"
    return text
