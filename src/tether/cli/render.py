"""Terminal tables and JSON output for the CLI."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TextIO

from tether.stores.base import Job


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(text: str | None, width: int = 48) -> str:
    if not text:
        return "-"
    line = text.splitlines()[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None
) -> None:
    out = out or sys.stdout
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)), file=out)
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    if not rows:
        print("(none)", file=out)


def job_dict(job: Job) -> dict[str, Any]:
    data = asdict(job)
    for key in ("payload", "result", "checkpoint", "progress", "errors"):
        if data[key] is not None:
            data[key] = json.loads(data[key])
    return data


def dump_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(value, out, indent=2, sort_keys=True, default=str)
    out.write("\n")


def jobs_table(jobs: Sequence[Job], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    table(
        ["id", "task", "queue", "status", "attempt", "stalls", "run_at", "error"],
        [[j.id, short(j.task, 32), j.queue, j.status, j.attempt, j.stall_count, when(j.run_at),
          short(j.last_error, 40)] for j in jobs],
        out,
    )


def job_detail(job: Job, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    data = job_dict(job)
    errors = data.pop("errors")
    width = max(len(k) for k in data)
    for key, value in data.items():
        shown = when(value) if key.endswith("_at") or key == "lease_until" else value
        print(f"{key.ljust(width)}  {shown if shown is not None else '-'}", file=out)
    if errors:
        print("errors:", file=out)
        for e in errors:
            print(f"  attempt {e.get('attempt')} [{e.get('reason')}] {short(e.get('error'), 90)}",
                  file=out)
