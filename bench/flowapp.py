"""The app of ``bench/flow.py``: ``tether worker bench.flowapp:app``.

``BENCH_FLOW`` picks what is declared, so one module serves every mode of the benchmark:

* ``none`` (default): ``bench.flow.job(key)`` with no limit; this also loads on code that
  predates flow control (main before issue #19), which the no-limit comparison runs against;
* ``key``: the same function declared ``concurrency=BENCH_FLOW_PER_KEY`` (default 2) per
  ``limit_key="key"``, so the worker passes a per-key limit with every claim.

Both modes enqueue the same payload (``key`` = job number mod the number of keys), so the
figures differ only by the declaration.
"""

from __future__ import annotations

import os
from typing import Any

import tether

TASK = "bench.flow.job"


def make_app(url: str | None = None, mode: str | None = None) -> tether.App:
    app = tether.App(url or os.environ.get("TETHER_URL"),
                     lease_ttl=float(os.environ.get("BENCH_LEASE_TTL", "30")))
    mode = mode or os.environ.get("BENCH_FLOW", "none")
    options: dict[str, Any] = {}
    if mode == "key":
        options = {"concurrency": int(os.environ.get("BENCH_FLOW_PER_KEY", "2")),
                   "limit_key": "key"}
    elif mode != "none":
        raise ValueError(f"BENCH_FLOW must be none or key, got {mode!r}")

    @app.task(name=TASK, **options)
    def job(key: int) -> None:
        return None

    return app


app = make_app()
