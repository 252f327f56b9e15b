"""Terminal tables and JSON output for the CLI.

One shape for ``--json`` everywhere: JSON values decoded (never Python reprs), times as ISO 8601
strings with their zone, durations in seconds. In a terminal, tables use ``rich`` when it is
installed (colours follow ``NO_COLOR``); piped output is always plain text, so scripts and
``grep`` see the same columns whatever is installed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from tether.stores._contract import JobLinks, JobRecord, WorkerInfo

STATUS_STYLE = {"waiting": "magenta", "pending": "yellow", "running": "cyan", "done": "green",
                "failed": "red", "cancelled": "dim", "live": "green", "dead": "red"}
_TIMES = ("run_at", "created_at", "started_at", "finished_at", "lease_until")


def when(ts: float | None) -> str:
    """A time for people: UTC, to the second, zone spelled out."""
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ts: float | None) -> str | None:
    """A time for machines: ISO 8601 with offset (``2024-05-01T12:00:00.123456+00:00``)."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.2f}s"
    if value < 3600:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def short(text: str | None, width: int = 48) -> str:
    if not text:
        return "-"
    line = text.splitlines()[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def fancy(out: TextIO) -> bool:
    """Rich output: only to a terminal, and only when rich is installed."""
    if os.environ.get("TERM") == "dumb" or not out.isatty():
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def console(out: TextIO) -> Any:
    from rich.console import Console

    return Console(file=out, no_color=bool(os.environ.get("NO_COLOR")), highlight=False)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
               style_col: int | None = None) -> Any:
    from rich.table import Table

    t = Table(*[h.upper() for h in headers], title=title, title_justify="left",
              header_style="bold")
    for row in rows:
        cells = [str(c) for c in row]
        if style_col is not None and cells[style_col] in STATUS_STYLE:
            st = STATUS_STYLE[cells[style_col]]
            cells[style_col] = f"[{st}]{cells[style_col]}[/{st}]"
        t.add_row(*cells)
    return t


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None,
    *, title: str | None = None, style_col: int | None = None,
) -> None:
    out = out or sys.stdout
    if fancy(out):
        console(out).print(rich_table(headers, rows, title, style_col))
        if not rows:
            print("(none)", file=out)
        return
    if title:
        print(title, file=out)
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
          file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    if not rows:
        print("(none)", file=out)


def _decoded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def duration(job: JobRecord) -> float | None:
    """How long the last attempt ran (finished jobs only)."""
    if job.finished_at is None or job.started_at is None:
        return None
    return max(0.0, job.finished_at - job.started_at)


def job_dict(job: JobRecord) -> dict[str, Any]:
    """A job as JSON: decoded values, ISO 8601 times; the claim's token is left out."""
    payload = json.loads(job.payload)
    data: dict[str, Any] = {
        "id": job.id, "uid": job.uid, "task": job.task, "queue": job.queue, "status": job.status,
        "priority": job.priority, "attempt": job.attempt, "max_attempts": job.max_attempts,
        "failures": job.failures, "stall_count": job.stall_count, "max_stalls": job.max_stalls,
        "interruptions": job.interruptions, "tries": job.tries,
        "handed_back": job.interruptions, "snoozes": job.snoozes,
        "limit_key": job.limit_key, "unique_key": job.unique_key,
        "cancel_requested": job.cancel_requested, "locked_by": job.locked_by,
        "args": payload[0], "kwargs": payload[1],
        "meta": payload[2] if len(payload) == 3 else {},
        "result": _decoded(job.result), "checkpoint": _decoded(job.checkpoint),
        "progress": _decoded(job.progress),
        "failure_reason": job.failure_reason, "last_error": job.last_error,
        "duration": duration(job),
    }
    for key in _TIMES:
        data[key] = iso(getattr(job, key))
    data["errors"] = [{**e, "at": iso(e.get("at"))} for e in json.loads(job.errors)]
    return data


#: How many parents or children ``tether job`` names with their status (JSON: every id).
SHOWN_LINKS = 20


def links_dict(links: JobLinks) -> dict[str, Any]:
    """A job's place in a workflow, for ``tether job --json`` (issue #20)."""
    return {"parents": list(links.parents), "children": list(links.children),
            "waiting_on": links.waiting_on, "allow_failure": links.allow_failure}


def links_rows(links: JobLinks, status: Mapping[int, str]) -> list[tuple[str, str]]:
    """``parents``/``children`` lines: each id with its status (``gone``: pruned or purged),
    the first :data:`SHOWN_LINKS` of each."""
    def named(ids: tuple[int, ...]) -> str:
        text = ", ".join(f"{i} ({status.get(i, 'gone')})" for i in ids[:SHOWN_LINKS])
        more = len(ids) - SHOWN_LINKS
        return text + (f", ... and {more} more" if more > 0 else "")

    rows = []
    if links.parents:
        rows.append(("parents", named(links.parents)))
        if links.waiting_on:
            rows.append(("waiting_on", f"{links.waiting_on} of {len(links.parents)}"))
        if links.allow_failure:
            rows.append(("allow_failure", "true"))
    if links.children:
        rows.append(("children", named(links.children)))
    return rows


def worker_dict(w: WorkerInfo, live: bool) -> dict[str, Any]:
    return {"id": w.id, "host": w.host, "pid": w.pid, "queues": list(w.queues),
            "concurrency": w.concurrency, "started_at": iso(w.started_at),
            "last_seen": iso(w.last_seen), "state": "live" if live else "dead"}


def dump_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(value, out, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    out.write("\n")


def jobs_table(jobs: Sequence[JobRecord], out: TextIO | None = None) -> None:
    table(
        ["id", "task", "queue", "status", "attempt", "created", "finished", "took", "error"],
        [[j.id, short(j.task, 32), short(j.queue, 20), j.status,
          attempt_short(j), when(j.created_at), when(j.finished_at),
          seconds(duration(j)), short(j.last_error, 40)] for j in jobs],
        out, style_col=3,
    )


def attempt_short(job: JobRecord) -> str:
    """``2/3``, and the hand-backs and snoozes apart (``2/3 (5 handed back)``, ``1/3 (4
    snoozed)``): a job released without running (a crashed pool child's queue, a shutdown)
    or snoozed by its handler (``tether.Snooze``) spent no attempt."""
    back = f" ({job.interruptions} handed back)" if job.interruptions else ""
    snoozed = f" ({job.snoozes} snoozed)" if job.snoozes else ""
    return f"{job.tries}/{job.max_attempts}{back}{snoozed}"


def attempt_long(job: JobRecord) -> str:
    """``2 of 3, 5 handed back (claim 7)``: the claim number is the attempt in dedup keys and
    in the error history."""
    if not job.interruptions:
        return f"{job.tries} of {job.max_attempts}"
    return (f"{job.tries} of {job.max_attempts}, {job.interruptions} handed back "
            f"(claim {job.attempt})")


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def job_detail(job: JobRecord, out: TextIO | None = None,
               links: list[tuple[str, str]] | None = None) -> None:
    """Readable values (JSON), times with their zone, each error's traceback set apart;
    ``links``: the workflow lines (:func:`links_rows`), after the status."""
    out = out or sys.stdout
    data = job_dict(job)
    rows: list[tuple[str, str]] = []
    for key in ("id", "uid", "task", "queue", "status", "failure_reason", "attempt",
                "failures", "stall_count", "max_stalls", "snoozes", "priority", "limit_key",
                "unique_key", "cancel_requested", "locked_by"):
        if key == "attempt":
            rows.append((key, attempt_long(job)))
        elif key == "snoozes" and not job.snoozes:
            continue  # most jobs never snooze: the line would be noise
        elif data[key] is not None:
            rows.append((key, _value(data[key])))
        if key == "failure_reason" and links:
            rows.extend(links)
    for key in _TIMES:
        ts = getattr(job, key)
        if ts is not None:
            rows.append((key, when(ts)))
    if data["duration"] is not None:
        rows.append(("duration", seconds(data["duration"])))
    for key in ("args", "kwargs", "result", "checkpoint", "progress"):
        if data[key] is not None or key in ("args", "kwargs"):
            rows.append((key, json.dumps(data[key], ensure_ascii=False)))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}", file=out)
    for record in json.loads(job.errors):
        head, _, tb = (record.get("error") or "").partition("\n")
        print(f"\nattempt {record.get('attempt')} {record.get('reason')} at "
              f"{when(record.get('at'))} (worker {record.get('owner') or '-'}): {head}", file=out)
        if tb.strip():
            print("    " + tb.strip().replace("\n", "\n    "), file=out)
