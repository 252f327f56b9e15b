"""An instrumented worker for the heartbeat scenario: ``python -m bench.hbworker N WINDOW K``.

A real :class:`tether._worker.worker.Worker` (the one ``tether worker`` runs) in this process,
with two counters on its heartbeat thread only:

* ``calls``: ``Store.heartbeat`` calls and the mean gap between them (the heartbeater's own
  count, ``beats``, cross-checks it);
* ``statements``: what the driver sent from that thread: psycopg ``Cursor.execute`` calls,
  redis-py ``execute_command`` calls (one per script run), SQLite statements seen by
  ``set_trace_callback`` (BEGIN and COMMIT count too: SQLite has no round trips).

Once N jobs are in flight it prints one JSON line per measuring window (K windows of WINDOW
seconds), then exits at once (the harness drops the store; there is nothing to drain).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections import Counter
from typing import Any

HB_THREAD = "tether-heartbeat"
STATEMENTS: Counter[str] = Counter()


def _count() -> None:
    STATEMENTS[threading.current_thread().name] += 1


def instrument() -> None:
    """Count driver-level statements per thread, for every store kind."""
    try:
        import psycopg

        for cls in (psycopg.Cursor,):
            original = cls.execute

            def execute(self: Any, *a: Any, _o: Any = original, **k: Any) -> Any:
                _count()
                return _o(self, *a, **k)

            cls.execute = execute  # type: ignore[method-assign]
    except ImportError:
        pass
    try:
        import redis

        original_cmd: Any = redis.Redis.execute_command

        def execute_command(self: Any, *a: Any, **k: Any) -> Any:
            _count()
            return original_cmd(self, *a, **k)

        redis.Redis.execute_command = execute_command  # type: ignore[method-assign]
    except ImportError:
        pass
    real_connect = sqlite3.connect

    def connect(*a: Any, **k: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real_connect(*a, **k)
        conn.set_trace_callback(lambda _sql: _count())
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    inflight, window, windows = int(argv[0]), float(argv[1]), int(argv[2])
    instrument()
    from bench.apps import app

    worker = app.worker(concurrency=inflight)
    hb = worker.heartbeater
    calls: list[float] = []  # monotonic time of every Store.heartbeat call
    real_heartbeat = hb.store.heartbeat

    def heartbeat(*a: Any, **k: Any) -> Any:
        calls.append(time.monotonic())
        return real_heartbeat(*a, **k)

    hb.store.heartbeat = heartbeat
    thread = threading.Thread(target=worker.run, kwargs={"install_signals": False},
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while len(worker.registry.entries()) < inflight:
        if time.monotonic() > deadline or not thread.is_alive():
            print(json.dumps({"error": f"only {len(worker.registry.entries())} in flight"}))
            sys.stdout.flush()
            os._exit(1)
        time.sleep(0.01)
    time.sleep(hb.interval)  # let the first beat with all leases go out
    for _ in range(windows):
        c0, s0, b0, t0 = len(calls), STATEMENTS[HB_THREAD], hb.beats, time.monotonic()
        time.sleep(window)
        times = calls[c0:]
        print(json.dumps({
            "seconds": time.monotonic() - t0, "calls": len(times),
            "mean_gap": (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None,
            "statements": STATEMENTS[HB_THREAD] - s0, "beats": hb.beats - b0,
            "interval": hb.interval, "inflight": len(worker.registry.entries()),
            "pid": os.getpid(),
        }))
        sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
