"""Apps for the tests of ``tether.testing``: made fresh per test (each on its own store)."""

from __future__ import annotations

import threading

import tether


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def add(self, what: str) -> None:
        ctx = tether.current_job()
        with self.lock:
            self.calls.append((what, ctx.attempt))


def make_app(url: str) -> tuple[tether.App, dict[str, tether.Task], Recorder]:
    app = tether.App(url)
    seen = Recorder()

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        seen.add("add")
        return a + b

    @app.task(name="fan")
    def fan(n: int) -> int:
        seen.add("fan")
        for i in range(n):
            add.enqueue(i, 1)
        return n

    @app.task(name="flaky", max_attempts=5, retry=tether.Backoff(base=600, jitter=0))
    def flaky(ok_at: int) -> str:
        seen.add("flaky")
        if tether.current_job().attempt < ok_at:
            raise RuntimeError(f"not yet (attempt {tether.current_job().attempt})")
        return "ok"

    @app.task(name="boom", max_attempts=2, retry=tether.Backoff(base=0))
    def boom() -> None:
        seen.add("boom")
        raise ValueError("it went boom")

    @app.task(name="slow")
    def slow(seconds: float) -> None:
        seen.add("slow")
        ctx = tether.current_job()
        for _ in range(int(seconds * 100)):
            ctx.check_cancelled()
            threading.Event().wait(0.01)

    meetings: dict[int, threading.Barrier] = {}

    @app.task(name="meet")
    def meet(parties: int) -> None:
        """Returns once ``parties`` meet jobs run at the same moment; fails (broken barrier)
        if they do not within 30 s: proof of side-by-side running that no load can fake
        or break, unlike a bound on the wall time."""
        seen.add("meet")
        with seen.lock:
            barrier = meetings.setdefault(parties, threading.Barrier(parties))
        barrier.wait(timeout=30)

    @app.task(name="other", queue="other")
    def other() -> str:
        seen.add("other")
        return "other"

    tasks = {"add": add, "fan": fan, "flaky": flaky, "boom": boom, "slow": slow, "meet": meet,
             "other": other}
    return app, tasks, seen
