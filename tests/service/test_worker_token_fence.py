"""A worker token cannot write for another worker's claim (issue #21: "a worker token cannot
cancel others' jobs").

A job's lease token is the fence of its claim: ``finish`` (done, dead, cancelled, released),
``heartbeat``, ``save_checkpoint`` and ``set_progress`` accept whoever presents it. The store
hands it out with the job (``get_job``), so a server that passed it on to any worker token
let that token cancel a job another worker is running. A real in-process server on a real
SQLite store; the attacker speaks only ``tether://`` with a worker token.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tether._server.auth import Authorizer, Tokens
from tether._server.serve import TetherServer
from tether._task import make_new_job
from tether.stores import Lease, Outcome, Store, open_store

WORKER, ADMIN = "w" + "1" * 31, "a" + "2" * 31


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Store, int]]:
    store = open_store(f"sqlite:///{tmp_path / 'fence.db'}")
    store.migrate()
    tokens = Tokens.parse(f"{WORKER} worker\n{ADMIN} admin\n")
    server = TetherServer(store, authorizer=Authorizer(tokens))
    port = server.start()
    try:
        yield store, port
    finally:
        server.stop(0)
        store.close()


def test_a_worker_token_reads_jobs_without_their_lease_token(
        served: tuple[Store, int]) -> None:
    store, port = served
    victim = open_store(f"tether://{WORKER}@127.0.0.1:{port}")
    attacker = open_store(f"tether://{WORKER}@127.0.0.1:{port}")
    admin = open_store(f"tether://{ADMIN}@127.0.0.1:{port}")
    try:
        [job_id] = victim.enqueue([make_new_job("t", (), {})])
        [claimed] = victim.claim("victim-worker", ["default"], 1, 30.0)
        assert claimed.lease.token, "the claimer gets its own lease token"

        seen = attacker.get_job(job_id)
        assert seen is not None and seen.status == "running"
        assert seen.lease_token is None
        assert [j.lease_token for j in attacker.get_jobs([job_id])] == [None]
        forged = Lease(job_id, seen.attempt, seen.locked_by or "", seen.lease_token or "")
        assert attacker.finish([Outcome(forged, "cancelled")]) == [forged]
        assert not attacker.set_progress(forged, '"owned"')
        after = store.get_job(job_id)
        assert after is not None and (after.status, after.progress) == ("running", None)

        # An admin token still sees everything; the claimer's own lease still works.
        shown = admin.get_job(job_id)
        assert shown is not None and shown.lease_token == claimed.lease.token
        assert victim.finish([Outcome(claimed.lease, "done")]) == []
        done = store.get_job(job_id)
        assert done is not None and done.status == "done"
    finally:
        for s in (victim, attacker, admin):
            s.close()


def test_maintenance_calls_cannot_take_live_leases_or_negative_ages(
        served: tuple[Store, int]) -> None:
    """``reap_expired`` takes back leases that ran out ``stall_grace`` ago: a negative grace
    would take back live ones (and, repeated, dead-letter every running job as stalled).
    No maintainer sends one (settings refuse a negative stall_grace); the server refuses it,
    and negative ages for prune and delete_dead_workers, as bad input."""
    store, port = served
    remote = open_store(f"tether://{WORKER}@127.0.0.1:{port}")
    try:
        [job_id] = remote.enqueue([make_new_job("t", (), {})])
        remote.claim("live-worker", ["default"], 1, 30.0)
        with pytest.raises(ValueError, match="stall_grace"):
            remote.reap_expired(-3600.0)
        with pytest.raises(ValueError, match="older_than"):
            remote.prune("done", -1.0)
        with pytest.raises(ValueError, match="older_than"):
            remote.delete_dead_workers(-1.0)
        job = store.get_job(job_id)
        assert job is not None and (job.status, job.stall_count) == ("running", 0)
        assert remote.reap_expired(0.0) == []  # the real call still works
    finally:
        remote.close()
