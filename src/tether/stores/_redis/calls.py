"""What the sync store and the async producer (``aio.py``) share to run the same scripts the
same way: the scripts' text, the request-id rule of replay records, and reply codes.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from functools import cache
from typing import Any

import redis

from tether import _limits as limits
from tether.stores import _queries as queries
from tether.stores._contract import CancelResult

CANCEL: dict[int, CancelResult] = {1: "cancelled", 2: "requested", 3: "finished"}
#: How long request records live (ms). A caller's own request id is honoured for 24 h (the
#: contract); an id the store draws itself only has to outlive redis-py's immediate retry of
#: the same call (seconds), so it costs little memory on busy servers.
CALLER_REQUEST_TTL_MS = 24 * 3600 * 1000
OWN_REQUEST_TTL_MS = 60 * 1000


#: Scripts that run even at maxmemory on Redis >= 7 (the ``allow-oom`` flag of a ``#!lua``
#: line, which older servers cannot parse): renewing the leases a worker holds writes nothing
#: new, and finishing them grows memory by at most the outcomes of the jobs held while claims
#: are refused, so a worker at the limit keeps and finishes what it holds instead of having it
#: reaped and run again once memory frees. Leader calls write a few bytes and keep the
#: maintenance leader, whose pruner only deletes and so frees memory at the limit.
ALLOW_OOM = frozenset({"heartbeat", "finish", "leader_acquire", "leader_renew",
                       "leader_release"})


@cache
def script_text(name: str, allow_oom: bool = False) -> str:
    """The prelude and the script: one atomic EVALSHA (with the allow-oom flag line first)."""
    pkg = "tether.stores._redis"
    text = queries.read(pkg, "_lib.lua") + "\n" + queries.read(pkg, f"{name}.lua")
    return "#!lua flags=allow-oom\n" + text if allow_oom else text


def request(request_id: str | None) -> tuple[str, str]:
    """(request id, its record TTL in ms): the caller's, else a fresh one of our own."""
    if request_id is None:
        return secrets.token_hex(16), str(OWN_REQUEST_TTL_MS)
    limits.check_text(request_id, "request_id", limit=limits.MAX_NAME)
    return request_id, str(CALLER_REQUEST_TTL_MS)


__all__ = ["ALLOW_OOM", "CALLER_REQUEST_TTL_MS", "CANCEL", "OWN_REQUEST_TTL_MS", "arun", "request",
           "run", "script_text"]


def run(script: Any, args: Sequence[Any]) -> Any:
    """Run a registered script (EVALSHA). redis-py answers NOSCRIPT by loading the script and
    running it again; a second flush in between (another client's SCRIPT FLUSH, a failover to
    a replica that never saw the script) raises NOSCRIPT once more. The script did not run
    either time, so it is sent whole with EVAL, which needs no cache."""
    try:
        return script(args=args)
    except redis.exceptions.NoScriptError:
        return script.registered_client.eval(script.script, 0, *args)


async def arun(script: Any, args: Sequence[Any]) -> Any:
    """:func:`run` for redis-py's asyncio client."""
    try:
        return await script(args=args)
    except redis.exceptions.NoScriptError:
        return await script.registered_client.eval(script.script, 0, *args)
