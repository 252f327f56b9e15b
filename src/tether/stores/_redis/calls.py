"""What the sync store and the async producer (``aio.py``) share to run the same scripts the
same way: the scripts' text, the request-id rule of replay records, and reply codes.
"""

from __future__ import annotations

import secrets
from functools import cache

from tether import _limits as limits
from tether.stores import _queries as queries
from tether.stores._contract import CancelResult

CANCEL: dict[int, CancelResult] = {1: "cancelled", 2: "requested", 3: "finished"}
#: How long request records live (ms). A caller's own request id is honoured for 24 h (the
#: contract); an id the store draws itself only has to outlive redis-py's immediate retry of
#: the same call (seconds), so it costs little memory on busy servers.
CALLER_REQUEST_TTL_MS = 24 * 3600 * 1000
OWN_REQUEST_TTL_MS = 60 * 1000


@cache
def script_text(name: str) -> str:
    """The prelude and the script: one atomic EVALSHA."""
    pkg = "tether.stores._redis"
    return queries.read(pkg, "_lib.lua") + "\n" + queries.read(pkg, f"{name}.lua")


def request(request_id: str | None) -> tuple[str, str]:
    """(request id, its record TTL in ms): the caller's, else a fresh one of our own."""
    if request_id is None:
        return secrets.token_hex(16), str(OWN_REQUEST_TTL_MS)
    limits.check_text(request_id, "request_id", limit=limits.MAX_NAME)
    return request_id, str(CALLER_REQUEST_TTL_MS)


__all__ = ["CALLER_REQUEST_TTL_MS", "CANCEL", "OWN_REQUEST_TTL_MS", "request", "script_text"]
