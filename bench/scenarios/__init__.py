"""One module per scenario; each exposes ``run(kind, cfg) -> list[Figure]``."""

from __future__ import annotations

from collections.abc import Callable

from bench.common import Config, Figure

Scenario = Callable[[str, Config], list[Figure]]


def registry() -> dict[str, Scenario]:
    from bench.scenarios import (
        drain,
        enqueue,
        heartbeat,
        latency,
        memory,
        pool,
        reap,
        recovery,
        startup,
    )

    return {
        "enqueue": enqueue.run,
        "drain": drain.run,
        "latency": latency.run,
        "recovery": recovery.run,
        "heartbeat": heartbeat.run,
        "reap": reap.run,
        "memory": memory.run,
        "pool": pool.run,
        "startup": startup.run,
    }


ORDER = ("drain", "enqueue", "startup", "latency", "recovery", "heartbeat", "reap", "memory",
         "pool")
