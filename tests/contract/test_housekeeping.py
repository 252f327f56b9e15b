"""housekeeping(): safe to call at any time, and it never changes a job."""

from __future__ import annotations

from tether.stores import NewJob, Outcome, Store


def test_housekeeping_changes_no_job(store: Store) -> None:
    t0 = store.now()
    ids = store.enqueue([NewJob("t") for _ in range(5)], now=t0)
    claimed = store.claim("w", ["default"], 3, 30, now=t0)
    store.finish([Outcome(claimed[0].lease, "done", result="1")], now=t0)
    before = [store.get_job(i) for i in ids]
    done = store.housekeeping()
    assert done is None or isinstance(done, str)
    assert [store.get_job(i) for i in ids] == before
