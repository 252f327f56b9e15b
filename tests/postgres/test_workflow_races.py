"""The READ COMMITTED interleavings of job dependencies on PostgreSQL, forced (issue #20).

A statement's snapshot is taken when it starts. A finish that starts while an enqueue of a
child is still open, and then waits for that enqueue's lock on the parent row, cannot see the
child's link with its own snapshot once it may go on: resolved there, the child would wait
forever. Each test here holds one side's transaction open on a connection of its own (the
``conn=`` path, or a worker's finish in a caller's transaction), starts the other side on a
thread, waits until the server shows that side blocked behind the open transaction
(``pg_blocking_pids``), and only then commits: exactly the interleaving, every run. The
contract suite's concurrent tests (tests/contract/test_workflows.py) race the same calls
without forcing an order.

``test_the_hazard_is_real`` shows the same interleaving losing the link for a statement that
reads with its own snapshot: what ``resolve_links`` (a VOLATILE function, fresh snapshot per
statement) is there for.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.crash.harness import wait_for
from tether.stores import JobRecord, NewJob, Outcome
from tether.stores._postgres.store import PostgresStore

TTL = 30.0
DEP = "dependency_failed"


class Side:
    """A call run on a thread, its result or error kept for the test."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # handed to the test by join()
            self.error = exc

    def join(self) -> Any:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the blocked call never finished"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def tx(pg: PostgresStore) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own, not autocommit: the open transaction of one side."""
    with psycopg.connect(pg._connector.dsn) as conn:
        yield conn


def blocked_behind(admin: psycopg.Connection[Any], holder: psycopg.Connection[Any]) -> None:
    """Wait until some backend waits for a lock ``holder``'s transaction holds."""
    pid = holder.info.backend_pid

    def waiting() -> bool:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity "
                            "WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)).fetchone()
        return row is not None and row[0] > 0

    wait_for(waiting, 30, "the other side to wait for the open transaction's lock")


def running(pg: PostgresStore, queue: str, **fields: Any) -> JobRecord:
    [job_id] = pg.enqueue([NewJob("t", queue=queue, **fields)])
    [job] = pg.claim("w", [queue], 1, TTL)
    assert job.id == job_id
    return job


def must(pg: PostgresStore, job_id: int) -> JobRecord:
    job = pg.get_job(job_id)
    assert job is not None
    return job


def outcome(job: JobRecord, kind: str) -> Outcome:
    if kind == "done":
        return Outcome(job.lease, "done", result="1")
    return Outcome(job.lease, "dead", error="boom", reason="error")


def assert_cancelled_by(pg: PostgresStore, job_id: int, parent: int, word: str) -> None:
    job = must(pg, job_id)
    assert (job.status, job.failure_reason) == ("cancelled", DEP)
    assert job.last_error == f"dependency_failed: job {parent} ended {word}"
    assert [e["reason"] for e in json.loads(job.errors)] == [DEP]
    assert pg.job_links(job_id).waiting_on == 0


# -- an enqueue and its parent's end ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["done", "dead"])
def test_a_finish_that_waited_for_the_enqueue_resolves_its_link(
    pg: PostgresStore, tx: psycopg.Connection[Any], admin: psycopg.Connection[Any], kind: str
) -> None:
    """The enqueue locks the parent and links the child (waiting); the parent's finish starts
    (its snapshot: no link) and waits for that lock; the enqueue commits; the finish resolves
    the link all the same."""
    parent = running(pg, "p")
    [kid] = pg.enqueue([NewJob("t", queue="k", after=(parent.id,))], conn=tx)
    finish = Side(lambda: pg.finish([outcome(parent, kind)]))
    blocked_behind(admin, tx)
    tx.commit()
    assert finish.join() == []
    if kind == "done":
        assert (must(pg, kid).status, pg.job_links(kid).waiting_on) == ("pending", 0)
        assert [j.id for j in pg.claim("w", ["k"], 5, TTL)] == [kid]
    else:
        assert_cancelled_by(pg, kid, parent.id, "failed")


@pytest.mark.parametrize("kind", ["done", "dead"])
def test_an_enqueue_that_waited_for_the_finish_sees_the_parent_ended(
    pg: PostgresStore, tx: psycopg.Connection[Any], admin: psycopg.Connection[Any], kind: str
) -> None:
    """The other order: the finish (in a caller's transaction) holds the parent's row; the
    enqueue started before its commit waits for it, then reads the ended parent and inserts
    the child resolved, never waiting."""
    parent = running(pg, "p")
    assert pg.finish([outcome(parent, kind)], conn=tx) == []
    enqueue = Side(lambda: pg.enqueue([NewJob("t", queue="k", after=(parent.id,))]))
    blocked_behind(admin, tx)
    tx.commit()
    [kid] = enqueue.join()
    if kind == "done":
        assert (must(pg, kid).status, pg.job_links(kid).waiting_on) == ("pending", 0)
    else:
        assert_cancelled_by(pg, kid, parent.id, "failed")


def test_a_cancel_that_waited_for_the_enqueue_cancels_the_child(
    pg: PostgresStore, tx: psycopg.Connection[Any], admin: psycopg.Connection[Any]
) -> None:
    [parent] = pg.enqueue([NewJob("t", queue="p")])
    [kid] = pg.enqueue([NewJob("t", queue="k", after=(parent,))], conn=tx)
    cancel = Side(lambda: pg.cancel(parent))
    blocked_behind(admin, tx)
    tx.commit()
    assert cancel.join() == "cancelled"
    assert_cancelled_by(pg, kid, parent, "cancelled")


def test_a_descendant_linked_while_its_ancestor_fails_is_cancelled(
    pg: PostgresStore, tx: psycopg.Connection[Any], admin: psycopg.Connection[Any]
) -> None:
    """Transitively: a grandchild is enqueued (locking the waiting child) while the root's
    failure is cancelling that child. The cancellation waits for the child's row, then looks
    for the child's own children with a fresh snapshot: the grandchild is cancelled too."""
    root = running(pg, "p")
    [kid] = pg.enqueue([NewJob("t", queue="k", after=(root.id,))])
    [grandkid] = pg.enqueue([NewJob("t", queue="g", after=(kid,))], conn=tx)
    finish = Side(lambda: pg.finish([outcome(root, "dead")]))
    blocked_behind(admin, tx)
    tx.commit()
    assert finish.join() == []
    assert_cancelled_by(pg, kid, root.id, "failed")
    assert_cancelled_by(pg, grandkid, kid, "cancelled")


def test_prune_and_purge_skip_a_parent_an_open_enqueue_links(
    pg: PostgresStore, tx: psycopg.Connection[Any]
) -> None:
    """Neither waits (SKIP LOCKED) nor takes the parent from under the open enqueue."""
    done_parent = running(pg, "p")
    assert pg.finish([outcome(done_parent, "done")]) == []
    [pending_parent] = pg.enqueue([NewJob("t", queue="purged")])
    [kid, other] = pg.enqueue([NewJob("t", queue="k", after=(done_parent.id,)),
                               NewJob("t", queue="k", after=(pending_parent,))], conn=tx)
    far = pg.now() + 3600
    assert pg.prune("done", 0, now=far) == 0
    assert pg.purge("purged", ["pending"]) == 0
    tx.commit()
    assert pg.prune("done", 0, now=far) == 0, "its child is pending"
    assert must(pg, kid).status == "pending"
    assert pg.purge("purged", ["pending"]) == 1
    job = must(pg, other)
    assert (job.status, job.failure_reason) == ("cancelled", DEP)
    assert (job.last_error or "").startswith(f"dependency_failed: job {pending_parent} ")


# -- two parents of one child ----------------------------------------------------------------
@pytest.mark.parametrize(("first", "second", "tolerant", "expected"), [
    ("done", "done", False, "pending"),
    ("done", "dead", False, "second"),
    ("dead", "done", False, "first"),
    ("dead", "dead", True, "pending"),
])
def test_two_parents_ending_at_once_resolve_the_child_once(
    pg: PostgresStore, tx: psycopg.Connection[Any], admin: psycopg.Connection[Any],
    first: str, second: str, tolerant: bool, expected: str
) -> None:
    """The first parent's finish (open) has counted the child down and holds its row; the
    second's waits for that row, then counts down the newest version: released exactly when
    both resolved, cancelled when one failed, never left waiting."""
    a = running(pg, "a")
    b = running(pg, "b")
    [kid] = pg.enqueue([NewJob("t", queue="k", after=(a.id, b.id), allow_failure=tolerant)])
    assert pg.finish([outcome(a, first)], conn=tx) == []
    finish = Side(lambda: pg.finish([outcome(b, second)]))
    blocked_behind(admin, tx)
    tx.commit()
    assert finish.join() == []
    if expected == "pending":
        assert (must(pg, kid).status, pg.job_links(kid).waiting_on) == ("pending", 0)
        assert [j.id for j in pg.claim("w", ["k"], 5, TTL)] == [kid]
    else:
        parent = a.id if expected == "first" else b.id
        assert_cancelled_by(pg, kid, parent, "failed")


# -- why a fresh snapshot --------------------------------------------------------------------
def test_the_hazard_is_real(
    pg: PostgresStore, tx: psycopg.Connection[Any], admin: psycopg.Connection[Any]
) -> None:
    """The same interleaving as the first test, with a statement that writes the parent and
    counts its links in its own snapshot: after waiting for the enqueue's lock it writes the
    newest row, yet counts no link. Resolving there would have left the child waiting."""
    parent = running(pg, "p")
    pg.enqueue([NewJob("t", queue="k", after=(parent.id,))], conn=tx)
    schema = pg.schema
    write = Side(lambda: admin.execute(
        f'UPDATE "{schema}".jobs SET priority = priority WHERE id = %s '
        f'RETURNING has_children, (SELECT count(*) FROM "{schema}".job_links '
        "WHERE parent_id = %s)", (parent.id, parent.id)).fetchone())
    with psycopg.connect(pg._connector.dsn, autocommit=True) as watcher:
        blocked_behind(watcher, tx)
    tx.commit()
    assert write.join() == (True, 0), "the flag is read from the newest row, the links are not"
    assert pg.job_links(parent.id).children != ()
