"""``schedule_tick`` / ``schedules`` (issue #12): one job per (schedule, tick), whoever asks and
however often. The store, not a leader's memory, dedups the tick: a second leader, a paused one
waking late, or a replay of a call whose reply was lost enqueues nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.contract.helpers import at, fresh_queue, must_get, new_job
from tether.stores import Store


def _jobs_of(store: Store, queue: str) -> list[int]:
    return [j.id for j in store.list_jobs(queue=queue, limit=100)]


def test_first_tick_enqueues_and_is_recorded(store: Store, t0: float) -> None:
    q = fresh_queue()
    job_id = store.schedule_tick("s.every", t0, new_job(queue=q, payload='[[1],{}]'), now=t0)
    assert isinstance(job_id, int)
    job = must_get(store, job_id)
    assert (job.queue, job.status, job.payload) == (q, "pending", "[[1],{}]")
    [state] = store.schedules()
    assert (state.name, state.last_tick, state.last_job_id) == ("s.every", at(t0), job_id)
    assert state.updated_at == at(t0)


def test_the_same_tick_again_enqueues_nothing(store: Store, t0: float) -> None:
    q = fresh_queue()
    first = store.schedule_tick("s", t0, new_job(queue=q), now=t0)
    assert store.schedule_tick("s", t0, new_job(queue=q), now=t0 + 1) is None
    assert _jobs_of(store, q) == [first]
    assert store.schedules()[0].last_job_id == first


def test_an_older_tick_enqueues_nothing(store: Store, t0: float) -> None:
    q = fresh_queue()
    later = store.schedule_tick("s", t0 + 60, new_job(queue=q), now=t0)
    assert store.schedule_tick("s", t0, new_job(queue=q), now=t0 + 1) is None
    assert _jobs_of(store, q) == [later]
    assert store.schedules()[0].last_tick == at(t0 + 60)


def test_a_later_tick_enqueues_again(store: Store, t0: float) -> None:
    q = fresh_queue()
    a = store.schedule_tick("s", t0, new_job(queue=q), now=t0)
    b = store.schedule_tick("s", t0 + 1, new_job(queue=q), now=t0 + 1)
    assert a is not None and b is not None and a != b
    assert _jobs_of(store, q) == [a, b]
    assert store.schedules()[0].last_job_id == b


def test_job_none_records_a_skip(store: Store, t0: float) -> None:
    q = fresh_queue()
    enqueued = store.schedule_tick("s", t0, new_job(queue=q), now=t0)
    assert store.schedule_tick("s", t0 + 5, None, now=t0 + 5) is None
    [state] = store.schedules()
    # The skip moved the tick; the last job stays the one of the latest *enqueued* tick.
    assert (state.last_tick, state.last_job_id) == (at(t0 + 5), enqueued)
    assert store.schedule_tick("s", t0 + 5, new_job(queue=q), now=t0 + 6) is None
    assert _jobs_of(store, q) == [enqueued]


def test_a_skip_first_records_where_a_schedule_starts(store: Store, t0: float) -> None:
    assert store.schedule_tick("fresh", t0, None, now=t0) is None
    [state] = store.schedules()
    assert (state.name, state.last_tick, state.last_job_id) == ("fresh", at(t0), None)


def test_schedules_are_listed_by_name_and_kept_apart(store: Store, t0: float) -> None:
    q = fresh_queue()
    b = store.schedule_tick("b", t0, new_job(queue=q), now=t0)
    a = store.schedule_tick("a", t0, new_job(queue=q), now=t0)
    assert a is not None and b is not None and a != b
    assert [(s.name, s.last_job_id) for s in store.schedules()] == [("a", a), ("b", b)]


def test_no_schedule_lists_nothing(store: Store) -> None:
    assert store.schedules() == []


def test_the_job_keeps_enqueue_rules(store: Store, t0: float) -> None:
    q = fresh_queue()
    held = store.enqueue([new_job(queue=q, unique_key="k")], now=t0)[0]
    got = store.schedule_tick("s", t0, new_job(queue=q, unique_key="k", priority=3), now=t0)
    assert got == held  # the live holder of the key, as enqueue answers
    assert _jobs_of(store, q) == [held]
    assert store.schedules()[0].last_job_id == held
    other = store.schedule_tick("s", t0 + 1, new_job(queue=q, unique_key="k2", delay=30.0),
                                now=t0 + 1)
    assert other is not None
    job = must_get(store, other)
    assert (job.unique_key, job.run_at) == ("k2", at(t0 + 31))


def test_a_replay_after_a_lost_reply_enqueues_once(store: Store, t0: float) -> None:
    # The caller never saw the first reply; it sends the very same call again.
    q = fresh_queue()
    first = store.schedule_tick("s", t0, new_job(queue=q), now=t0)
    replay = store.schedule_tick("s", t0, new_job(queue=q), now=t0)
    assert first is not None and replay is None
    assert _jobs_of(store, q) == [first]


def _race(s: Store, barrier: threading.Barrier, tick: float, queue: str,
          results: list[int | None], errors: list[BaseException]) -> None:
    barrier.wait()
    try:
        results.append(s.schedule_tick("race", tick, new_job(queue=queue), now=tick))
    except BaseException as exc:
        errors.append(exc)


def test_concurrent_callers_with_the_same_tick_enqueue_exactly_one_job(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]]
) -> None:
    q = fresh_queue()
    callers = other_stores(4)
    for tick in range(5):
        results: list[int | None] = []
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(callers))

        threads = [threading.Thread(target=_race, args=(s, barrier, t0 + tick, q, results,
                                                         errors)) for s in callers]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert errors == []
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, results
    assert len(_jobs_of(store, q)) == 5


@pytest.mark.parametrize(
    ("name", "tick", "message"),
    [
        ("", 1.0, "schedule name"),
        ("x" * 256, 1.0, "schedule name"),
        ("a\x00b", 1.0, "schedule name"),
        (5, 1.0, "schedule name"),
        ("s", float("nan"), "tick"),
        ("s", -1.0, "tick"),
        ("s", "soon", "tick"),
        ("s", 1e300, "tick"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    store: Store, t0: float, name: object, tick: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.schedule_tick(name, tick, None, now=t0)  # type: ignore[arg-type]
    assert store.schedules() == []


def test_a_bad_job_is_refused_and_records_no_tick(store: Store, t0: float) -> None:
    with pytest.raises(ValueError, match="priority"):
        store.schedule_tick("s", t0, new_job(priority=2**40), now=t0)
    with pytest.raises(ValueError, match="job must be"):
        store.schedule_tick("s", t0, "not a job", now=t0)  # type: ignore[arg-type]
    assert store.schedules() == []


def test_the_spec_is_recorded_with_the_tick_and_kept_in_the_schedule_record(
    store: Store, t0: float
) -> None:
    """The schedule's record, never pruned, holds the spec its latest tick was recorded under
    (the scheduler tells a changed schedule by it, even once the last job is pruned)."""
    q = fresh_queue()
    spec = "0 9 */2 * mon Europe/Paris ü"
    assert store.schedule_tick("s", t0, None, now=t0, spec="every 60 UTC") is None
    assert store.schedules()[0].spec == "every 60 UTC"
    job_id = store.schedule_tick("s", t0 + 1, new_job(queue=q), now=t0 + 1, spec=spec)
    assert job_id is not None
    assert store.schedules()[0].spec == spec
    assert store.schedule_tick("s", t0 + 1, None, now=t0 + 2, spec="other") is None
    assert store.schedules()[0].spec == spec, "a tick not taken records nothing"
    assert store.schedule_tick("s", t0 + 2, None, now=t0 + 3) is None
    assert store.schedules()[0].spec == spec, "no spec given: the recorded one is kept"
    assert store.schedule_tick("bare", t0, None, now=t0) is None
    assert [s.spec for s in store.schedules()] == [None, spec]
    with pytest.raises(ValueError, match="schedule spec"):
        store.schedule_tick("s", t0 + 9, None, now=t0 + 9, spec="x" * 2001)
    with pytest.raises(ValueError, match="schedule spec"):
        store.schedule_tick("s", t0 + 9, None, now=t0 + 9, spec="a\x00b")
    assert store.schedules()[1].last_tick == at(t0 + 2), "refused: nothing recorded"
