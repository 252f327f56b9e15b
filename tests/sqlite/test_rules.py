"""Issue #8 items D, H and I where SQLite differed from the other stores (regressions)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tether._errors import ConfigError
from tether.stores import Lease, NewJob, Outcome, RetryResult
from tether.stores._sqlite.store import SQLiteStore


def test_dead_letter_retry_reports_a_unique_key_conflict(sqlite_store: SQLiteStore) -> None:
    """It used to skip the job silently (UPDATE OR IGNORE) and report nothing."""
    t0 = sqlite_store.now()
    (old,) = sqlite_store.enqueue([NewJob("t", queue="u", unique_key="k")], now=t0)
    (job,) = sqlite_store.claim("w", ["u"], 1, 30.0, now=t0)
    sqlite_store.finish([Outcome(job.lease, "dead", error="boom")], now=t0 + 1)
    (live,) = sqlite_store.enqueue([NewJob("t", queue="u", unique_key="k")], now=t0 + 2)
    assert live != old
    sqlite_store.enqueue([NewJob("t", queue="f")], now=t0)
    (job,) = sqlite_store.claim("w", ["f"], 1, 30.0, now=t0)
    sqlite_store.finish([Outcome(job.lease, "dead", error="boom")], now=t0 + 1)

    result = sqlite_store.retry_failed(None, now=t0 + 3)
    assert result == RetryResult(retried=1, conflicts=(old,))
    kept = sqlite_store.get_job(old)
    assert kept is not None and kept.status == "failed"


@pytest.mark.parametrize("limit", [0, -1])
def test_list_jobs_refuses_a_page_size_below_one(sqlite_store: SQLiteStore, limit: int) -> None:
    """It used to return every job (SQLite's LIMIT -1 / 0 semantics)."""
    sqlite_store.enqueue([NewJob("t") for _ in range(3)])
    with pytest.raises(ValueError, match="limit"):
        sqlite_store.list_jobs(limit=limit)


def test_a_stale_lease_cannot_touch_a_job_that_reuses_its_id(
    sqlite_store: SQLiteStore, tmp_path: Path
) -> None:
    """Ids restart when the data is lost (here: rows and AUTOINCREMENT counter wiped, as a
    restored or recreated file would be). The same worker's stale attempt 1 of the old job 1
    must not complete the new job 1: the claim token differs."""
    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob("t", payload='[["old"], {}]')], now=t0)
    (old,) = sqlite_store.claim("w", ["default"], 1, 30.0, now=t0)
    raw = sqlite3.connect(tmp_path / "tether.db", isolation_level=None)
    raw.execute("DELETE FROM jobs")
    raw.execute("DELETE FROM sqlite_sequence")
    raw.close()
    sqlite_store.enqueue([NewJob("t", payload='[["new"], {}]')], now=t0)
    (new,) = sqlite_store.claim("w", ["default"], 1, 30.0, now=t0)
    assert (new.id, new.attempt, new.locked_by) == (old.id, old.attempt, old.locked_by)

    stale = old.lease
    assert sqlite_store.finish([Outcome(stale, "done", result="1")], now=t0 + 1) == [stale]
    assert not sqlite_store.save_checkpoint(stale, "1", now=t0 + 1)
    assert not sqlite_store.set_progress(stale, "1", now=t0 + 1)
    assert sqlite_store.heartbeat("w", [stale], 30.0, now=t0 + 1).lost == {stale}
    after = sqlite_store.get_job(new.id)
    assert after is not None
    assert (after.status, after.result, after.checkpoint) == ("running", None, None)
    assert sqlite_store.finish([Outcome(new.lease, "done", result="2")], now=t0 + 2) == []


def test_an_unfenced_token_is_refused(sqlite_store: SQLiteStore) -> None:
    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob("t")], now=t0)
    (job,) = sqlite_store.claim("w", ["default"], 1, 30.0, now=t0)
    assert job.lease.token.endswith(f":{job.id}") and len(job.lease.token) > 32
    forged = Lease(job.id, job.attempt, job.locked_by or "", "")
    assert sqlite_store.finish([Outcome(forged, "done", result="1")], now=t0 + 1) == [forged]


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("sqlite://relative.db", ["host", "relative.db", "sqlite:///relative.db"]),
        ("sqlite:///x.db?mode=ro", ["mode"]),
        ("sqlite:///x.db?timeout=5&cache=shared", ["timeout", "cache"]),
        ("sqlite:///", ["no file path"]),
        ("sqlite://user:secret@host/x.db", ["host"]),
    ],
)
def test_url_errors_name_the_problem(url: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        SQLiteStore(url)
    message = str(info.value)
    for word in words:
        assert word in message, message
    assert "secret" not in message
