"""The app of ``bench/workflows.py``: ``tether worker bench.wfapp:app``.

``bench.wf.step(x)`` returns ``x + 1``: a chain of n steps started at 0 ends at n, which
proves every step was given the result of the one before (the payload's ``pipe``).
``bench.wf.leaf()`` does nothing: the children of the fan-out.
"""

from __future__ import annotations

import os

import tether


def make_app(url: str | None = None) -> tether.App:
    app = tether.App(url or os.environ.get("TETHER_URL"),
                     lease_ttl=float(os.environ.get("BENCH_LEASE_TTL", "30")))

    @app.task(name="bench.wf.step")
    def step(x: int = 0) -> int:
        return x + 1

    @app.task(name="bench.wf.leaf")
    def leaf() -> None:
        return None

    return app


app = make_app()
