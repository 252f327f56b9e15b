"""saq's no-op drain, measured the way tether's is: one worker process, N queued no-op jobs.

Per run: a fresh saq queue (its own name, its keys deleted afterwards), N jobs enqueued, then
``python -m saq bench.saqapp.settings`` (one worker process) is started and the harness polls
the queue's ``incomplete`` count. The rate is N over the time from the first job seen finished
to the last (the worker's start-up is not counted, as tether's steady rate does not count it).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

from bench.common import REDIS_URL, ROOT


def available() -> bool:
    """saq is installed, and not switched off with ``BENCH_SAQ=0``."""
    if os.environ.get("BENCH_SAQ") == "0":
        return False
    try:
        import saq  # noqa: F401
    except ImportError:
        return False
    return True


def default_concurrency() -> int:
    import inspect

    from saq import Worker

    default: int = inspect.signature(Worker.__init__).parameters["concurrency"].default
    return default


async def _load(name: str, n: int) -> None:
    from saq import Queue

    queue = Queue.from_url(REDIS_URL, name=name)
    await queue.connect()
    try:
        for start in range(0, n, 500):
            await asyncio.gather(*(queue.enqueue("noop") for _ in range(min(500, n - start))))
    finally:
        await queue.disconnect()


def _incomplete(client: object, name: str) -> int:
    return int(client.zcard(f"saq:{name}:incomplete"))  # type: ignore[attr-defined]


def _cleanup(client: object, name: str) -> None:
    for pattern in (f"saq:{name}:*", f"saq:job:{name}:*", f"saq:{name}"):
        keys = list(client.scan_iter(match=pattern, count=5000))  # type: ignore[attr-defined]
        for i in range(0, len(keys), 2000):
            client.unlink(*keys[i:i + 2000])  # type: ignore[attr-defined]


def drain_once(n: int, concurrency: int | None, log_dir: str) -> float:
    """Jobs per second of one saq worker process draining n queued no-op jobs."""
    import redis

    name = "tbench_saq_" + uuid.uuid4().hex[:10]
    client = redis.Redis.from_url(REDIS_URL)
    proc: subprocess.Popen[bytes] | None = None
    try:
        asyncio.run(_load(name, n))
        queued = _incomplete(client, name)
        if queued != n:
            raise RuntimeError(f"saq queue holds {queued} jobs, expected {n}")
        env = dict(os.environ, BENCH_SAQ_URL=REDIS_URL, BENCH_SAQ_QUEUE=name,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        if concurrency is not None:
            env["BENCH_SAQ_CONCURRENCY"] = str(concurrency)
        with open(os.path.join(log_dir, f"saq-{time.time_ns()}.log"), "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "saq", "bench.saqapp.settings",
                                     "--workers", "1", "--quiet"], cwd=str(ROOT), env=env,
                                    stdout=log, stderr=log)
        first: float | None = None
        deadline = time.monotonic() + max(120.0, n / 200)
        while True:
            left = _incomplete(client, name)
            now = time.time()
            if first is None and left < n:
                first, at_first = now, left
            if left == 0:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"saq worker exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"saq drain not finished ({left} left)")
            time.sleep(0.005)
        assert first is not None
        return at_first / max(now - first, 1e-9)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _cleanup(client, name)
        client.close()
