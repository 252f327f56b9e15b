"""The worker's per-job objects built without their frozen dataclass ``__init__`` (issue #23)
are the very objects ``__init__`` builds: equal, equally hashed, with every field set."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tether._events import Event, Events
from tether.stores._records import JobRecord, Lease, Outcome, done_outcome, job_of


def _row() -> list[object]:
    names = [f.name for f in fields(JobRecord)]
    row: list[object] = list(range(len(names)))
    row[names.index("locked_by")] = "worker-1"
    row[names.index("lease_token")] = "tok"
    return row


def test_job_of_builds_the_record_init_builds() -> None:
    row = _row()
    job = job_of(row)
    assert job == JobRecord(*row)  # type: ignore[arg-type]
    assert [getattr(job, f.name) for f in fields(JobRecord)] == row


def test_job_of_refuses_a_row_of_the_wrong_length_as_init_does() -> None:
    with pytest.raises(TypeError):
        job_of([*_row(), "one too many"])


def test_a_records_lease_is_the_lease_init_builds() -> None:
    lease = job_of(_row()).lease
    expected = Lease(job_id=0, attempt=lease.attempt, owner="worker-1", token="tok")
    assert lease == expected and hash(lease) == hash(expected)


def test_done_outcome_is_the_outcome_init_builds() -> None:
    lease = Lease(1, 2, "w", "t")
    assert done_outcome(lease) == Outcome(lease, "done", result="null")
    assert done_outcome(lease, '{"a":1}') == Outcome(lease, "done", result='{"a":1}')
    assert hash(done_outcome(lease)) == hash(Outcome(lease, "done", result="null"))


def test_emit_job_delivers_the_event_emit_delivers() -> None:
    events = Events()
    seen: list[Event] = []
    events.on("claimed", seen.append)
    events.emit("claimed", job_id=3, attempt=1, worker="w", detail={"task": "t", "queue": "q"})
    events.emit_job("claimed", 3, 1, "w", {"task": "t", "queue": "q"})
    assert seen[0] == seen[1]
    assert events.listeners("claimed") and not events.listeners("heartbeat")


def test_emit_job_survives_a_failing_callback() -> None:
    events = Events()
    seen: list[Event] = []

    def boom(event: Event) -> None:
        raise RuntimeError("subscriber bug")

    events.on("completed", boom)
    events.on("completed", seen.append)
    events.emit_job("completed", 1, 1, "w", {})
    assert len(seen) == 1


def test_a_built_record_is_a_record_in_every_respect() -> None:
    """slot_builder's twin-then-__class__ record: the type, pickling, replace, frozenness."""
    import dataclasses
    import pickle

    row = _row()
    job = job_of(row)
    assert type(job) is JobRecord and hash(job) == hash(JobRecord(*row))  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(job)) == job
    assert dataclasses.replace(job, task="other").task == "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.task = "x"  # type: ignore[misc]
