"""Request ids: how a caller retries a store write without applying it twice (issue #8, C).

A write whose reply is lost (the connection dropped after the server ran it) is sent again
with the *same* request id, and the store answers it from its record of that request: an
``enqueue`` returns the ids it inserted the first time, a ``claim`` the jobs it granted then
and nothing more. So a retry is always safe, and nothing is created twice or orphaned.

Every store takes ``request_id`` on ``enqueue`` and ``claim`` (the contract in base.py).
:func:`request_kw` passes it only to a method that accepts it, so a store written before the
parameter existed (or a wrapper that does not name it) still works; with it, a retry is
merely not deduplicated, as before.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from typing import Any

_ACCEPTS: dict[object, bool] = {}


def new_request_id() -> str:
    """128 random bits as 32 hex characters (a claim's lease tokens are built from it)."""
    return uuid.uuid4().hex


def accepts_request_id(method: Callable[..., Any]) -> bool:
    key = getattr(method, "__func__", method)
    known = _ACCEPTS.get(key)
    if known is None:
        try:
            params = list(inspect.signature(method).parameters.values())
        except (TypeError, ValueError):
            params = []
        known = any(p.name == "request_id" and p.kind is not inspect.Parameter.POSITIONAL_ONLY
                    for p in params)
        if len(_ACCEPTS) < 1024:
            _ACCEPTS[key] = known
    return known


def request_kw(method: Callable[..., Any], request_id: str) -> dict[str, Any]:
    """``{"request_id": request_id}`` when ``method`` takes it, else ``{}``."""
    return {"request_id": request_id} if accepts_request_id(method) else {}
