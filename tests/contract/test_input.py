"""Bad input: one clear error naming the field and the limit, the same on every store, and
nothing written (a batch is all or nothing)."""

from __future__ import annotations

import pytest

from tests.contract.helpers import fresh_queue, new_job, running_job
from tether import _limits as limits
from tether.stores import NewJob, Store

BAD_JOBS: dict[str, tuple[dict[str, object], str]] = {
    "run_at inf": ({"run_at": float("inf")}, "run_at"),
    "run_at nan": ({"run_at": float("nan")}, "run_at"),
    "run_at 1e300": ({"run_at": 1e300}, "run_at"),
    "run_at negative": ({"run_at": -5.0}, "run_at"),
    "delay 1e300": ({"delay": 1e300}, "delay"),
    "delay nan": ({"delay": float("nan")}, "delay"),
    "delay negative": ({"delay": -1.0}, "delay"),
    "priority 2**63": ({"priority": 2**63}, "priority"),
    "priority 2**31": ({"priority": 2**31}, "priority"),
    "priority str": ({"priority": "x"}, "priority"),
    "max_attempts 0": ({"max_attempts": 0}, "max_attempts"),
    "max_stalls 0": ({"max_stalls": 0}, "max_stalls"),
    "queue NUL": ({"queue": "a\x00b"}, "queue"),
    "queue empty": ({"queue": ""}, "queue"),
    "queue surrogate": ({"queue": "a\udcffb"}, "queue"),
    "queue too long": ({"queue": "q" * (limits.MAX_NAME + 1)}, "queue"),
    "unique_key too long": ({"unique_key": "k" * (limits.MAX_UNIQUE_KEY + 1)}, "unique_key"),
    "unique_key NUL": ({"unique_key": "k\x00"}, "unique_key"),
    "task empty": ({"task": ""}, "task name"),
    "task too long": ({"task": "t" * (limits.MAX_NAME + 1)}, "task name"),
}


@pytest.mark.parametrize("case", sorted(BAD_JOBS))
def test_a_bad_job_is_refused_naming_the_field(store: Store, t0: float, case: str) -> None:
    fields, name = BAD_JOBS[case]
    fields = dict(fields)
    task = str(fields.pop("task", "tests.task"))
    with pytest.raises(ValueError, match=name) as info:
        store.enqueue([NewJob(task=task, **fields)], now=t0)  # type: ignore[arg-type]
    assert "\n" not in str(info.value), "one line"
    assert store.counts() == []


def test_a_bad_job_in_a_batch_writes_none_of_it(store: Store, t0: float) -> None:
    q = fresh_queue()
    batch = [new_job(queue=q), new_job(queue=q, priority=2**40), new_job(queue=q)]
    with pytest.raises(ValueError, match=r"job 1 of the batch: priority"):
        store.enqueue(batch, now=t0)
    assert store.list_jobs(queue=q, limit=10) == []
    assert store.counts() == []
    assert len(store.enqueue([new_job(queue=q)], now=t0)) == 1, "the store still works"


def test_a_payload_that_is_not_text_json_can_carry_is_refused(store: Store, t0: float) -> None:
    with pytest.raises(TypeError, match="payload"):
        store.enqueue([new_job(payload='[["\udcff"], {}]')], now=t0)
    assert store.counts() == []


def test_limits_are_inclusive(store: Store, t0: float) -> None:
    q = "q" * limits.MAX_NAME
    key = "k" * limits.MAX_UNIQUE_KEY
    job = NewJob(task="t" * limits.MAX_NAME, queue=q, unique_key=key, priority=limits.MAX_INT32,
                 run_at=limits.MAX_EPOCH)
    [job_id] = store.enqueue([job], now=t0)
    back = store.get_job(job_id)
    assert back is not None
    assert (back.queue, back.unique_key, back.task, back.priority) == (
        q, key, job.task, limits.MAX_INT32)
    [low] = store.enqueue([NewJob(task="t", priority=limits.MIN_INT32, queue=q)], now=t0)
    assert store.get_job(low) is not None


@pytest.mark.parametrize("bad", ["7", 1.0, True, 0, -1, 2**63, 2**70, None])
def test_job_ids_that_no_store_can_hold(store: Store, t0: float, bad: object) -> None:
    for call in (
        lambda: store.get_job(bad),  # type: ignore[arg-type]
        lambda: store.cancel(bad, now=t0),  # type: ignore[arg-type]
        lambda: store.retry_failed([bad], now=t0),  # type: ignore[list-item]
    ):
        with pytest.raises(ValueError, match="job id"):
            call()


@pytest.mark.parametrize("limit", [0, -1, limits.MAX_PAGE + 1])
def test_list_jobs_limit_out_of_range(store: Store, t0: float, limit: int) -> None:
    running_job(store, t0)
    with pytest.raises(ValueError, match="limit"):
        store.list_jobs(limit=limit)


def test_result_checkpoint_progress_must_be_text_json_can_carry(store: Store, t0: float) -> None:
    from tether.stores import Outcome

    job = running_job(store, t0)
    with pytest.raises(TypeError):
        store.save_checkpoint(job.lease, '"\ud800"', now=t0 + 1)
    with pytest.raises(TypeError):
        store.set_progress(job.lease, '"\ud800"', now=t0 + 1)
    other = running_job(store, t0)
    good = Outcome(other.lease, "done", result="1")
    with pytest.raises(TypeError):
        store.finish([good, Outcome(job.lease, "done", result='"\udcff"')], now=t0 + 2)
    assert store.get_job(other.id).status == "running"  # type: ignore[union-attr]
    assert store.get_job(job.id).status == "running"  # type: ignore[union-attr]
