"""The app that ``tether demo`` runs in its worker processes.

Each attempt appends a line to a ledger (job id, attempt, pid) and returns who ran it, so the
demo can prove at the end which attempt's result the store kept. The handler deliberately does
*not* poll ``check_cancelled()``: a paused worker then really tries to complete a job it no
longer holds, and the demo shows the store rejecting that write.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import tether
from tether._events import Event

_DIR = Path(os.environ.get("TETHER_DEMO_DIR", "."))
app = tether.App(
    lease_ttl=float(os.environ.get("TETHER_DEMO_LEASE_TTL", "3")),
    shutdown_timeout=5.0,
    poll_interval=0.2,
)


def _append(name: str, record: dict[str, Any]) -> None:
    with open(_DIR / name, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


@app.task(name="demo.work", max_attempts=5, max_stalls=3)
def work(n: int, ms: int) -> dict[str, Any]:
    job = tether.current_job()
    _append(f"ledger-{os.getpid()}.jsonl", {"job": job.id, "attempt": job.attempt,
                                            "pid": os.getpid(), "event": "start"})
    time.sleep(ms / 1000.0)  # not interruptible on purpose: see the module docstring
    return {"n": n, "pid": os.getpid(), "attempt": job.attempt}


def _on_lease_lost(event: Event) -> None:
    _append(f"rejected-{os.getpid()}.jsonl", {"job": event.job_id, "attempt": event.attempt,
                                              "pid": os.getpid(), **event.detail})


app.on("lease_lost", _on_lease_lost)
