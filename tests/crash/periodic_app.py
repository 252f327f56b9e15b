"""The app of the periodic crash test (``tests.crash.periodic_app:app``): one ``every=1``
schedule on an ordinary task, and the leadership events of every worker recorded to
``events-<pid>.jsonl`` in ``TETHER_TEST_DIR`` (name, term, wall time), so the test can tell a
missed tick that fell in a leader change from one that did not, and the scheduler's
``schedule_skipped`` events (the tick enqueued after a gap, how many ticks it passed over, and
why), so every missed tick can be matched to the catch-up decision that passed it over.
Written synchronously (``Events.emit`` calls back inline, before the tick's write), so a
SIGKILLed leader's record of a decision it was about to act on is never lost.

Paused mid-tick, on demand: when the file ``pause-mid-round`` exists in ``TETHER_TEST_DIR``, the
first leader to pass ticks over (a catch-up round, after an outage) takes the file, records
``paused_mid_round`` and blocks its maintenance thread *inside the round* until the file
``resume-mid-round`` appears: it has read the store's clock and the last tick and is about to
offer the due tick. Another leader takes over (this one's lease is not renewed) and enqueues
it; when the test resumes this one, its offer of that old tick must enqueue nothing (the store
dedups the tick, not the leader's memory). Only that thread stops, not the process: a SIGSTOP
could catch another thread inside an SQLite write and stop every process on the file."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import tether
from tether._events import Event

app = tether.App(
    lease_ttl=float(os.environ.get("TETHER_TEST_LEASE_TTL", "2.0")),
    shutdown_timeout=float(os.environ.get("TETHER_TEST_SHUTDOWN_TIMEOUT", "10")),
    poll_interval=0.2,
)


@app.periodic(every=1, name="crash.every_second")
@app.task(name="crash.beat", queue="periodic")
def beat() -> float:
    at = tether.current_job().scheduled_at
    return at.timestamp() if at is not None else -1.0


def _record(event: Event) -> None:
    line = json.dumps({"event": event.name, "pid": os.getpid(), "t": time.time(),
                       "job_id": event.job_id, **event.detail}) + "\n"
    path = Path(os.environ.get("TETHER_TEST_DIR", ".")) / f"events-{os.getpid()}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _pause_mid_round(event: Event) -> None:
    if event.detail.get("why") == "start":
        return
    folder = Path(os.environ.get("TETHER_TEST_DIR", "."))
    try:  # one process takes the trigger (unlink is atomic)
        os.unlink(folder / "pause-mid-round")
    except FileNotFoundError:
        return
    _record(Event("paused_mid_round", detail={"tick": event.detail["tick"]}))
    deadline = time.monotonic() + 60  # never hang a worker for good if the test is gone
    while time.monotonic() < deadline:
        try:
            os.unlink(folder / "resume-mid-round")
            break
        except FileNotFoundError:
            time.sleep(0.02)
    _record(Event("resumed_mid_round", detail={"tick": event.detail["tick"]}))


for _name in ("leadership_acquired", "leadership_lost", "schedule_skipped",
              "schedule_enqueued"):
    app.on(_name, _record)
app.on("schedule_skipped", _pause_mid_round)  # after _record: the decision is logged first
