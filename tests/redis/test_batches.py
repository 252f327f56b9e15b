"""Atomic batches (issue #8, E): ``enqueue`` writes a whole batch or none of it.

Two layers keep it so: the store checks the whole batch with ``tether._limits.check_jobs``
before any write, and the Lua script itself checks every job before its first write (Redis
never rolls a script back: a script that fails half-way leaves its earlier writes behind).
"""

from __future__ import annotations

import pytest
import redis

from tests.redis.conftest import keys_under
from tether._errors import StoreError
from tether.stores import NewJob
from tether.stores._redis.store import RedisStore

BAD_FOR_LUA = {
    "run_at nan": NewJob("bad", run_at=float("nan")),
    "run_at inf": NewJob("bad", run_at=float("inf")),
    "delay inf": NewJob("bad", delay=float("inf")),
    "priority 2**70": NewJob("bad", priority=2**70),
    "queue empty": NewJob("bad", queue=""),
    "max_attempts 0": NewJob("bad", max_attempts=0),
}


def _job_keys(raw: redis.Redis, prefix: str) -> set[str]:
    return {k for k in keys_under(raw, prefix) if ":job:" in k or ":pending:" in k}


def test_a_bad_job_in_the_middle_writes_nothing(
    rstore: RedisStore, raw: redis.Redis, prefix: str
) -> None:
    batch = [NewJob("good"), NewJob("bad", run_at=float("nan")), NewJob("good")]
    with pytest.raises(ValueError, match="job 1 of the batch: run_at"):
        rstore.enqueue(batch)
    assert _job_keys(raw, prefix) == set(), "a half-written batch (or an orphan job hash)"
    assert rstore.counts() == []
    assert raw.get(f"{prefix}:ids") is None, "no id was even drawn"


@pytest.mark.parametrize("case", sorted(BAD_FOR_LUA))
def test_the_script_alone_is_all_or_nothing(
    rstore: RedisStore, raw: redis.Redis, prefix: str, monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    """With the Python check switched off, the Lua script still refuses the batch whole."""
    import tether.stores._redis.producer as module

    if hasattr(module, "limits"):  # (the code before the fix had no check to switch off)
        monkeypatch.setattr(module.limits, "check_jobs", lambda jobs: None)
    batch = [NewJob("good"), BAD_FOR_LUA[case], NewJob("good")]
    with pytest.raises(StoreError) as info:
        rstore.enqueue(batch)
    assert _job_keys(raw, prefix) == set(), "the script wrote before it failed"
    assert "\n" not in str(info.value)
    assert "job 1 of the batch" in str(info.value), str(info.value)
    assert rstore.counts() == []
