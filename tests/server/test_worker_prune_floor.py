"""A worker token's ``prune`` and ``delete_dead_workers`` cannot delete what is young (issue
#21 follow-up).

A worker token may prune, because a remote worker's maintainer runs the pruner. Without a
floor on the age, that right let any worker token delete every finished job (its result
with it) a moment after it finished: ``prune("done", 0.001)``. A real maintainer sends its
retention settings (a day for done jobs by default) and a day for dead worker rows; the
server raises a worker token's smaller age to a floor no pruner goes below
(``tether._server.handlers.WORKER_MIN_AGE``). An admin token prunes at
any age. A real server on a real SQLite store; the caller speaks only ``tether://``.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.crash.harness import wait_for
from tests.server.conftest import ADMIN_TOKEN, WORKER_TOKEN
from tether._server.serve import TetherServer
from tether._task import make_new_job
from tether.stores import Outcome, Store, WorkerInfo


def test_a_worker_token_cannot_prune_young_finished_jobs_or_worker_rows(
        backing: Store, serve: Callable[..., TetherServer],
        remote: Callable[[str], Store]) -> None:
    backing.migrate()
    port = serve(tokens=True).port
    worker = remote(f"tether://{WORKER_TOKEN}@127.0.0.1:{port}")
    admin = remote(f"tether://{ADMIN_TOKEN}@127.0.0.1:{port}")

    [job_id] = worker.enqueue([make_new_job("t", (), {})])
    [claimed] = worker.claim("w", ["default"], 1, 30.0)
    assert worker.finish([Outcome(claimed.lease, "done", result='"kept"')]) == []
    worker.register_worker(WorkerInfo(id="live", host="h", pid=1, queues=("default",),
                                      concurrency=1))
    done = backing.get_job(job_id)
    assert done is not None and done.finished_at is not None
    finished_at = done.finished_at
    wait_for(lambda: backing.now() > finished_at + 0.01, 10, "the store clock to move on")

    assert worker.prune("done", 0.001) == 0
    assert worker.prune("done", 0.0) == 0
    assert worker.delete_dead_workers(0.001) == 0
    kept = backing.get_job(job_id)
    assert kept is not None and (kept.status, kept.result) == ("done", '"kept"')
    assert [w.id for w in backing.list_workers()] == ["live"]

    # A client's clock does not get round the floor: the server's decides.
    assert worker.prune("done", 0.001, now=backing.now() + 3600) == 0

    # An admin token prunes at any age.
    assert admin.prune("done", 0.001) == 1
    assert backing.get_job(job_id) is None
    assert admin.delete_dead_workers(0.001) == 1
    assert backing.list_workers() == []
