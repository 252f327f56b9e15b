"""The saq worker settings the Redis comparison runs: ``python -m saq bench.saqapp.settings``.

saq (https://github.com/tobymao/saq) is measured, never depended on: install it into the
bench environment only (``pip install saq``). The queue name and concurrency come from the
environment (``BENCH_SAQ_URL``, ``BENCH_SAQ_QUEUE``, ``BENCH_SAQ_CONCURRENCY``; unset: saq's
default concurrency).
"""

from __future__ import annotations

import os
from typing import Any

from saq import Queue


async def noop(ctx: Any) -> None:
    return None


queue = Queue.from_url(os.environ.get("BENCH_SAQ_URL", "redis://127.0.0.1:6379/0"),
                       name=os.environ.get("BENCH_SAQ_QUEUE", "default"))
settings: dict[str, Any] = {"queue": queue, "functions": [noop]}
if os.environ.get("BENCH_SAQ_CONCURRENCY"):
    settings["concurrency"] = int(os.environ["BENCH_SAQ_CONCURRENCY"])
