"""The deadline of a call to a network store (PostgreSQL, Redis): how long one store call may
wait for a server that does not answer before it raises :class:`StoreUnavailable`.

Why tether needs one of its own: a server that refuses or resets is noticed at once, but a
silent partition (packets dropped, no FIN, no RST) or a frozen server (SIGSTOP, a paused VM, a
wedged proxy whose kernel still acknowledges) leaves a call waiting for a reply. TCP notices a
dead peer only through keepalive and ``TCP_USER_TIMEOUT``, and only when the peer's kernel is
gone too; a producer call took 19-27 s to fail on a real partition (issue 18), and a call
through a frozen peer never failed. So every network wait of a call (connecting, waiting for
a free pooled connection, reading the reply) is bounded by the deadline, and the stores set
their sockets' keepalive and user timeout from it as well.

A call that timed out may still have run on the server (its request may have arrived): that
is a lost reply, which every store call survives (request ids, idempotent writes).

``?deadline=SECONDS`` in the URL, or ``open_store(url, deadline=SECONDS)`` (which wins).
"""

from __future__ import annotations

import math

from tether._errors import ConfigError
from tether.stores._urls import redact, take_param

#: Seconds; a web request waits at most about this long on a partitioned store.
DEFAULT_DEADLINE = 5.0
MAX_DEADLINE = 86_400.0


def check_deadline(value: object, url: str = "") -> float:
    """``value`` as seconds (a number or its text), or ConfigError naming the option."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (math.isfinite(seconds)
                                       and 0 < seconds <= MAX_DEADLINE):
        where = f" in {redact(url)!r}" if url else ""
        raise ConfigError(f"deadline{where} must be a number of seconds above 0 and at most "
                          f"{MAX_DEADLINE:g}, got {value!r}")
    return seconds


def take_deadline(url: str, given: float | None) -> tuple[str, float]:
    """(the URL without ``deadline``, the deadline: ``given``, else the URL's, else the
    default). The parameter is tether's: the driver must not see it."""
    rest, raw = take_param(url, "deadline")
    if given is not None:
        return rest, check_deadline(given, url)
    return rest, DEFAULT_DEADLINE if raw is None else check_deadline(raw, url)


__all__ = ["DEFAULT_DEADLINE", "MAX_DEADLINE", "check_deadline", "take_deadline"]
