"""Request ids: how a caller retries a store write without applying it twice (issue #8, C).

A write whose reply is lost (the connection dropped after the server ran it) is sent again
with the *same* request id, and the store answers it from its record of that request: an
``enqueue`` returns the ids it inserted the first time, a ``claim`` the jobs it granted then
and nothing more. So a retry is always safe, and nothing is created twice or orphaned.

Every store takes ``request_id`` on ``enqueue`` and ``claim`` (the contract in base.py).
"""

from __future__ import annotations

import os


def new_request_id() -> str:
    """128 random bits as 32 hex characters (a claim's lease tokens are built from it).

    ``os.urandom(16).hex()``, not ``uuid.uuid4().hex``: the same 128 bits from the same
    source, without building a UUID object, about 4x cheaper on the single-enqueue path."""
    return os.urandom(16).hex()
