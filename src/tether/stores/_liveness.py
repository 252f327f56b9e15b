"""What every store's :class:`~tether.stores._roles.Liveness` side shares (issue #22).

Invariant: a leader lease's holder string is the holder's worker id, then optionally
``" settings=..."`` (``tether._maintenance.leadership``); :func:`holder_worker` is the one place
a store reads the worker id back out of it, so a dead holder is matched to its token the same
way on every store.
"""

from __future__ import annotations

#: Where a stored leader holder's settings tag starts (``tether._maintenance.leadership.TAG``).
TAG_START = " settings="


def holder_worker(stored: str) -> str:
    """The worker id of a stored leader holder (the whole string when it has no tag)."""
    return stored.partition(TAG_START)[0]


__all__ = ["TAG_START", "holder_worker"]
