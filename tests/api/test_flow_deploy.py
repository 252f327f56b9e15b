"""What docs/flow-control.md says of a rolling deploy, held: each claim is checked against the
limits its own worker declares, counting every running job of the group whoever claimed it.
Old workers at concurrency=5 and new ones at 3: the new ones claim only below 3, the old ones
below 5; lowering a limit stops no running job; a worker that declares none claims freely."""

from __future__ import annotations

import pytest

from tether._task import make_new_job
from tether.stores import Store
from tether.stores._records import FlowLimit, JobRecord, Outcome

OLD = FlowLimit("task", "deploy.sync", concurrency=5)
NEW = FlowLimit("task", "deploy.sync", concurrency=3)


def claim(store: Store, owner: str, flow: FlowLimit | None) -> list[JobRecord]:
    try:
        return store.claim(owner, ["default"], 10, 30, flow=[] if flow is None else [flow])
    except NotImplementedError:
        pytest.skip(f"{store.kind}: flow limits not implemented on this branch yet")


def test_each_claim_holds_its_own_workers_limit(store: Store) -> None:
    store.enqueue([make_new_job("deploy.sync", [n], {}) for n in range(12)])
    assert len(claim(store, "new-1", NEW)) == 3
    assert claim(store, "new-2", NEW) == []  # 3 run: the new limit is reached
    old = claim(store, "old-1", OLD)
    assert len(old) == 2  # the old worker fills up to its own 5, counting the new ones' 3
    assert claim(store, "old-2", OLD) == []
    store.finish([Outcome(job.lease, "done") for job in old])
    assert claim(store, "new-2", NEW) == []  # still 3 running: no room under the new limit
    assert len(claim(store, "old-2", OLD)) == 2  # room under the old one
    # A worker whose code declares no limit for the task claims without one.
    assert len(claim(store, "older", None)) == 5
