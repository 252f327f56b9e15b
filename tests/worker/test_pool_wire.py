"""The pipe protocol of the process pool: a batch of jobs crosses as one ``runs`` message, the
texts verbatim, and what ``run_size`` promises bounds what is written (a write to a busy child
must never block)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tether._worker.processes import wire
from tether.stores import JobRecord


def job(job_id: int, payload: str, checkpoint: str | None = None) -> JobRecord:
    fields: dict[str, object] = {f.name: None for f in dataclasses.fields(JobRecord)}
    fields.update(id=job_id, task="t.é\n", queue="default", status="running", priority=0,
                  run_at=1.5, attempt=2, max_attempts=3, failures=0, stall_count=0, max_stalls=3,
                  interruptions=0, locked_by="w", lease_until=2.5, created_at=1.0,
                  started_at=1.5, cancel_requested=False, lease_token="tok", payload=payload,
                  checkpoint=checkpoint, progress=None)
    return JobRecord(**fields)  # type: ignore[arg-type]


def test_a_batch_of_jobs_crosses_in_one_message_verbatim() -> None:
    jobs = [job(1, '[["a\\nb"], {}]'), job(2, '[["\u2713 \u0000"], {"k": "\U0001F600"}]', "ck\n"),
            job(3, "[[], {}]")]
    data = wire.encode_runs(jobs)
    assert sum(wire.run_size(j) for j in jobs) >= len(data)
    r, w = os.pipe()
    try:
        os.write(w, data + data[:10])
        reader = wire.Reader(r)
        [msg] = reader.take() or []
        runs = wire.split_runs(*msg)
        assert [wire.run_key(h) for h, _ in runs] == [(1, 2), (2, 2), (3, 2)]
        for (header, blobs), sent in zip(runs, jobs, strict=True):
            assert header["op"] == "run"
            got = wire.job_of(header, blobs)
            for name in (*wire._JOB_FIELDS, "payload", "checkpoint", "progress"):
                assert getattr(got, name) == getattr(sent, name), name
        os.close(w)  # the start of a next message is left: it was cut short
        w = -1
        with pytest.raises(wire.ProtocolError):
            reader.take()  # end of file inside a message
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_take_returns_every_message_of_one_read_and_none_at_end_of_file() -> None:
    r, w = os.pipe()
    try:
        os.write(w, wire.encode({"op": "start", "start": [1, 1, 0.5]})
                 + wire.encode({"op": "outcome", "job": 1}, ["null", None]))
        reader = wire.Reader(r)
        got = reader.take()
        assert got == [({"op": "start", "start": [1, 1, 0.5]}, []),
                       ({"op": "outcome", "job": 1}, ["null", None])]
        os.close(w)
        w = -1
        assert reader.take() is None
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
