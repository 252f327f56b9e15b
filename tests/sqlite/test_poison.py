"""Issue #8 item A on SQLite: no text in a row, whoever wrote it, can fail a claim or a listing.

SQLite stores whatever bytes it is given as TEXT and never checks them; Python's ``sqlite3``
refuses to decode invalid UTF-8 by default, so one bad row used to fail every later claim on
its queue (the claim's RETURNING reads the row) and every listing that reached it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tether._text import clean_error
from tether.stores import NewJob, Outcome
from tether.stores._sqlite.store import SQLiteStore

POISON_ERRORS = [
    "nul \x00 in the middle",
    "lone surrogate \udcff from os.listdir",
    "emoji \N{PILE OF POO} and \u00e9",
    "x" * 10_000,
]


@pytest.mark.parametrize("error", POISON_ERRORS, ids=["nul", "surrogate", "emoji", "long"])
def test_error_text_is_stored_cleaned_and_the_queue_goes_on(
    sqlite_store: SQLiteStore, error: str
) -> None:
    t0 = sqlite_store.now()
    sqlite_store.enqueue([NewJob("t", queue="p"), NewJob("t", queue="p")], now=t0)
    first, _ = sqlite_store.claim("w", ["p"], 2, 30.0, now=t0)
    assert sqlite_store.finish([Outcome(first.lease, "error", error=error)], now=t0 + 1) == []
    job = sqlite_store.get_job(first.id)
    assert job is not None
    assert job.last_error == clean_error(error)
    assert [r["error"] for r in json.loads(job.errors)] == [clean_error(error)]
    # The job comes back (retry) and the queue keeps working.
    again = sqlite_store.claim("w", ["p"], 5, 30.0, now=t0 + 2)
    assert [j.id for j in again] == [first.id]
    assert len(sqlite_store.list_jobs(queue="p")) == 2


def _poison_with_raw_bytes(path: Path, job_id: int) -> None:
    """Write invalid UTF-8 into every text column of a row, as another program could."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute(
            "UPDATE jobs SET payload = CAST(X'5b5b2280ff225d2c207b7d5d' AS TEXT),"
            " task = CAST(X'7461736bff' AS TEXT), unique_key = CAST(X'6bc328' AS TEXT),"
            " last_error = CAST(X'626164ed' AS TEXT), progress = CAST(X'22fe22' AS TEXT),"
            " errors = CAST(X'5b7b226572726f72223a2280ff227d5d' AS TEXT)"
            " WHERE id = ?",
            (job_id,),
        )
    finally:
        raw.close()


def test_undecodable_row_never_fails_a_claim_or_a_listing(
    sqlite_store: SQLiteStore, tmp_path: Path
) -> None:
    t0 = sqlite_store.now()
    bad, good, odd = sqlite_store.enqueue([NewJob("t", queue="p") for _ in range(3)], now=t0)
    _poison_with_raw_bytes(tmp_path / "tether.db", bad)
    raw = sqlite3.connect(tmp_path / "tether.db", isolation_level=None)
    raw.execute("UPDATE jobs SET errors = 'not json' WHERE id = ?", (odd,))
    raw.close()

    listed = sqlite_store.list_jobs(queue="p")
    assert [j.id for j in listed] == [bad, good, odd]
    job = sqlite_store.get_job(bad)
    assert job is not None
    assert job.task == "task\ufffd"
    assert job.payload == '[["\ufffd\ufffd"], {}]'
    assert "\ufffd" in (job.last_error or "")

    claimed = sqlite_store.claim("w", ["p"], 5, 30.0, now=t0)
    assert sorted(j.id for j in claimed) == [bad, good, odd]
    # The holder can end the attempt, and the record it appends stays readable; the reaper
    # is not stopped by a row whose error history is not JSON.
    leases = {j.id: j.lease for j in claimed}
    assert sqlite_store.finish([Outcome(leases[bad], "error", error="e")], now=t0 + 1) == []
    assert [r.job_id for r in sqlite_store.reap_expired(now=t0 + 100)] == [good, odd]
    for job_id in (bad, odd):
        job = sqlite_store.get_job(job_id)
        assert job is not None and job.status == "pending"
        assert job.error_history[-1]["error"] in ("e", "worker lease expired")
