"""What the sync store and the async producer (``aio.py``) share to run the same scripts the
same way: the scripts' text, the request-id rule of replay records, and reply codes.
"""

from __future__ import annotations

import re
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
    """The prelude and the script: one atomic EVALSHA (with the allow-oom flag line first).
    The prelude keeps only the definitions the script uses (:func:`prelude_for`)."""
    pkg = "tether.stores._redis"
    script = queries.read(pkg, f"{name}.lua")
    text = prelude_for(queries.read(pkg, "_lib.lua"), script) + "\n" + script
    return "#!lua flags=allow-oom\n" + text if allow_oom else text


#: A top-level definition of the prelude: ``local function name`` or ``local a, b =``.
_DEFINES = re.compile(r"local\s+(?:function\s+([A-Za-z_]\w*)|([A-Za-z_][\w\s,]*?)\s*=)")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _words(texts: Sequence[str]) -> set[str]:
    """The names used by ``texts``, whole-line comments left out (they name functions in
    prose); a trailing comment's words count, which can only keep more."""
    return {w for text in texts for line in text.splitlines()
            if not line.lstrip().startswith("--") for w in _WORD.findall(line)}


def prelude_for(lib: str, script: str) -> str:
    """``lib`` without the top-level definitions that ``script`` never reaches. Why: a
    script's whole text runs on every call, so each of the prelude's ~40 functions and
    tables was made anew by every EVALSHA: 53k of the 366k server instructions of a single
    enqueue went to definitions it never called (issue #23).

    A definition starts at a column-0 ``local`` line and runs to the next column-0 line that
    is not ``end`` (code inside a definition is indented). It is kept when a name it defines
    is a word of the script or of a kept definition, to a fixpoint: a word in a comment or
    string keeps one needlessly, never drops one in use. Lua locals are visible only after
    their definition, so dropping one no later line names cannot change what the rest
    means. Comments and blank lines stay (compiled once, they cost no call)."""
    parts: list[tuple[frozenset[str] | None, list[str]]] = []  # (names defined, lines)
    code = -1  # the definition indented lines and ``end`` belong to
    for line in lib.splitlines(keepends=True):
        if line.startswith("local"):
            found = _DEFINES.match(line)
            names = None if found is None else frozenset(
                n.strip() for n in (found.group(1) or found.group(2)).split(","))
            parts.append((names, [line]))
            code = len(parts) - 1
        elif code >= 0 and (line[:1] in (" ", "\t") or line.startswith("end")):
            parts[code][1].append(line)
        else:
            parts.append((None, [line]))  # a comment or blank line: kept
            if line.strip():
                code = -1
    keep = [names is None for names, _ in parts]
    words = _words([script])
    for i, (_, lines) in enumerate(parts):
        if keep[i]:
            words |= _words(lines)
    changed = True
    while changed:
        changed = False
        for i, (names, lines) in enumerate(parts):
            if not keep[i] and names is not None and names & words:
                keep[i] = changed = True
                words |= _words(lines)
    return "".join("".join(lines) for (_, lines), kept in zip(parts, keep, strict=True) if kept)


def request(request_id: str | None) -> tuple[str, str]:
    """(request id, its record TTL in ms): the caller's, else a fresh one of our own."""
    if request_id is None:
        return secrets.token_hex(16), str(OWN_REQUEST_TTL_MS)
    limits.check_text(request_id, "request_id", limit=limits.MAX_NAME)
    return request_id, str(CALLER_REQUEST_TTL_MS)


__all__ = ["ALLOW_OOM", "CALLER_REQUEST_TTL_MS", "CANCEL", "OWN_REQUEST_TTL_MS", "arun",
           "prelude_for", "request", "run", "script_text"]


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
