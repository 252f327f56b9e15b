"""Redis with an evicting ``maxmemory-policy``, and job hashes that are gone (issue 18, C).

An evicting policy deletes any key, tether's included (a job hash, ``schema_version``, the
epoch): tether refuses to start a worker, a producer or ``tether migrate`` there unless the URL
says ``allow_eviction=1``. Whatever the policy, one missing job hash never stops a claim, a reap
or a listing of the other jobs.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest

import tether
from tests.throwaway.redis import ThrowawayRedis
from tether._errors import ConfigError
from tether.stores import NewJob
from tether.stores._redis.store import RedisStore

pytestmark = [pytest.mark.timeout(60)]


def _one_clear_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    assert "allkeys-lru" in text and "noeviction" in text and "allow_eviction=1" in text
    return text


def test_migrate_and_opening_refuse_an_evicting_policy(server: ThrowawayRedis) -> None:
    RedisStore(f"{server.url}?prefix=ev").migrate()  # made while the policy was safe
    server.config("maxmemory-policy", "allkeys-lru")
    for call in (lambda s: s.migrate(), lambda s: s.check_schema()):
        store = RedisStore(f"{server.url}?prefix=ev")
        try:
            with pytest.raises(ConfigError) as info:
                call(store)
            _one_clear_line(info.value)
        finally:
            store.close()
    app = tether.App(f"{server.url}?prefix=ev")  # a producer
    with pytest.raises(ConfigError) as info:
        _ = app.runtime.store  # opened (and migrated) on a producer's first call
    _one_clear_line(info.value)
    app.close()


@pytest.mark.slow
def test_tether_migrate_and_worker_refuse_with_one_line(server: ThrowawayRedis) -> None:
    server.config("maxmemory-policy", "volatile-lru")
    url = f"{server.url}?prefix=ev"
    for argv in (["migrate", "--url", url],
                 ["worker", "tests.crash.apps:app", "--url", url]):
        done = subprocess.run([sys.executable, "-m", "tether._cli.main", *argv],
                              check=False, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0, argv
        lines = [ln for ln in done.stderr.splitlines() if "maxmemory-policy" in ln]
        assert len(lines) == 1 and "volatile-lru" in lines[0], done.stderr
        assert "allow_eviction=1" in lines[0]
        assert "Traceback" not in done.stderr


def test_the_explicit_option_allows_an_evicting_policy(
    server: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    server.config("maxmemory-policy", "allkeys-lru")
    store = RedisStore(f"{server.url}?prefix=ev&allow_eviction=1")
    try:
        with caplog.at_level(logging.WARNING, logger="tether.store.redis"):
            assert store.migrate() >= 1
        assert any("allkeys-lru" in r.getMessage() for r in caplog.records)
        (job_id,) = store.enqueue([NewJob("t")])
        assert store.claim("w", ["default"], 1, 30)[0].id == job_id
    finally:
        store.close()
    with pytest.raises(ConfigError, match="allow_eviction"):
        RedisStore(f"{server.url}?prefix=ev&allow_eviction=maybe")


def test_a_policy_that_cannot_be_read_is_a_warning_not_a_failure(
    server: ThrowawayRedis, caplog: pytest.LogCaptureFixture
) -> None:
    admin = server.client()
    # A managed Redis: neither CONFIG nor INFO may be run by the app's user.
    admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all",
                          "-config", "-info")
    admin.close()
    store = RedisStore(f"redis://app:pw@127.0.0.1:{server.port}/0?prefix=ev")
    try:
        with caplog.at_level(logging.WARNING, logger="tether.store.redis"):
            store.migrate()
        assert any("could not check" in r.getMessage() for r in caplog.records), \
            [r.getMessage() for r in caplog.records]
        store.enqueue([NewJob("t")])
    finally:
        store.close()


# -- a job hash that is gone (evicted, or deleted by hand) ----------------------------------


@pytest.fixture
def store(server: ThrowawayRedis) -> Iterator[RedisStore]:
    s = RedisStore(f"{server.url}?prefix=ev")
    s.migrate()
    try:
        yield s
    finally:
        s.close()


def _drop(server: ThrowawayRedis, job_id: int) -> None:
    with server.client() as c:
        assert c.delete(f"ev:job:{job_id}") == 1


def test_a_claim_skips_a_pending_job_whose_hash_is_gone(
    server: ThrowawayRedis, store: RedisStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.check_interval = 0.0  # look at the server on every claim (tests only)
    ids = store.enqueue([NewJob("t") for _ in range(3)])
    _drop(server, ids[0])
    claimed = store.claim("w", ["default"], 3, 30)
    assert [j.id for j in claimed] == ids[1:]
    with server.client() as c:
        assert not c.exists(f"ev:job:{ids[0]}"), "the claim made a half job out of nothing"
    with caplog.at_level(logging.WARNING, logger="tether.store.redis"):
        assert store.claim("w", ["default"], 3, 30) == []
        assert store.claim("w", ["default"], 3, 30) == []
    said = [r.getMessage() for r in caplog.records if "dropped from the queue" in r.getMessage()]
    assert len(said) == 1 and "1 job(s)" in said[0], said
    assert [j.id for j in store.list_jobs()] == ids[1:]
    assert sum(c.count for c in store.counts()) == 2
    assert store.info().extra["missing_jobs"] == "1"


def test_a_reap_and_listings_go_on_past_a_running_job_whose_hash_is_gone(
    server: ThrowawayRedis, store: RedisStore
) -> None:
    ids = store.enqueue([NewJob("t") for _ in range(3)])
    claimed = store.claim("w", ["default"], 3, 1)
    _drop(server, ids[1])
    assert [j.id for j in store.list_jobs(status="running")] == [ids[0], ids[2]]
    reaped = store.reap_expired(stall_grace=0, now=store.now() + 60)
    assert sorted(r.job_id for r in reaped) == [ids[0], ids[2]]
    assert store.reap_expired(stall_grace=0, now=store.now() + 60) == []
    again = store.claim("w", ["default"], 3, 30)
    assert sorted(j.id for j in again) == [ids[0], ids[2]] and len(claimed) == 3


def test_a_half_written_job_hash_does_not_wedge_the_reaper(
    server: ThrowawayRedis, store: RedisStore
) -> None:
    """What today's claim made of an evicted hash: a few lease fields and nothing else."""
    ids = store.enqueue([NewJob("t") for _ in range(2)])
    store.claim("w", ["default"], 2, 1)
    with server.client() as c:
        c.delete(f"ev:job:{ids[0]}")
        c.hset(f"ev:job:{ids[0]}", mapping={"status": "running", "attempt": 1,
                                            "locked_by": "w", "lease_token": "x"})
    reaped = store.reap_expired(stall_grace=0, now=store.now() + 60)
    assert [r.job_id for r in reaped] == [ids[1]]
    assert store.reap_expired(stall_grace=0, now=store.now() + 60) == []
    assert [j.id for j in store.list_jobs()] == [ids[1]]

