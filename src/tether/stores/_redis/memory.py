"""Whether a Redis server at its memory limit has room again: the claim gate.

Invariant: after any store of this process saw the server refuse a write for memory (OOM),
``claim`` on that server raises :class:`StoreFull` without claiming until ``INFO memory``
shows ``used_memory`` below :data:`RESUME_BELOW` of ``maxmemory`` (or no limit).

Why: at the limit Redis refuses every write, but keys that expire (request records) or a
prune free a little memory now and then, and a claim that slips into such a gap takes jobs
whose heartbeats and outcomes the full server then refuses: they only wedge the queue (issue
18, C). Claims resume when there is room to finish what they take. The gate is per server
(its redacted URL), shared by every store of the process: the completer's store may be the one
that meets the refusal, the fetcher's the one that must stop claiming.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from tether._errors import StoreFull

#: Claims resume once used_memory is below this share of maxmemory.
RESUME_BELOW = 0.95

_full: set[str] = set()
_lock = threading.Lock()


def refused(server: str) -> None:
    """A call to ``server`` was refused for memory: claims wait for room from now on."""
    with _lock:
        _full.add(server)


def usage(client: Any) -> tuple[int, int, str] | None:
    """(used_memory, maxmemory, maxmemory_policy) from INFO memory; None when refused."""
    try:
        memory = client.info("memory")
    except redis.ResponseError:  # INFO renamed or not allowed (a managed Redis, an ACL)
        return None
    return (int(memory.get("used_memory", 0)), int(memory.get("maxmemory", 0)),
            str(memory.get("maxmemory_policy", "?")))


def check_room(server: str, client: Any) -> None:
    """Raise StoreFull while ``server`` was refused and has no room yet; redis errors of the
    look itself are the caller's (``io()``) to translate."""
    if server not in _full:
        return
    seen = usage(client)
    if seen is not None:
        used, limit, _ = seen
        if limit and used >= RESUME_BELOW * limit:
            raise StoreFull(
                f"redis is at its memory limit: used_memory {used} of maxmemory {limit}; no "
                f"new claims until it is below {RESUME_BELOW:.0%} (free memory or raise "
                "maxmemory; docs/deploying.md)"
            )
    with _lock:  # room again (or nothing to look at: let the next write find out)
        _full.discard(server)


__all__ = ["RESUME_BELOW", "check_room", "refused", "usage"]
