"""The exactly-once example of docs/deploying.md, run for real by a worker.

The user's tables live on the user's own search_path (``public`` here), as in any app; tether's
live in its schema. ``current_job().transaction()`` used to hand out a connection whose
search_path was tether's schema only, so the example failed with "tether tables are missing".
The user even has a table named ``jobs`` of their own: tether's SQL is schema-qualified, so
neither side ever sees the other's.
"""

from __future__ import annotations

import psycopg
import pytest

import tether
from tests.worker.helpers import running, wait_until

pytestmark = pytest.mark.timeout(60)


def test_the_exactly_once_example_of_deploying_md(scratch_db: str) -> None:
    with psycopg.connect(scratch_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)")
        conn.execute("INSERT INTO accounts VALUES (1, 0)")
        conn.execute("CREATE TABLE payments_applied (payment_id int PRIMARY KEY)")
        conn.execute("CREATE TABLE jobs (note text)")  # the user's own, not tether's

    app = tether.App(scratch_db + "?schema=tether", lease_ttl=5, poll_interval=0.1)

    def fetch_amount(payment_id: int) -> int:
        return payment_id * 10

    @app.task
    def apply_payment(payment_id: int) -> None:
        job = tether.current_job()
        amount = fetch_amount(payment_id)  # anything outside the transaction may repeat
        with job.transaction() as conn:  # one transaction ...
            conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = 1", (amount,))
            conn.execute("INSERT INTO payments_applied (payment_id) VALUES (%s)",
                         (payment_id,))
            conn.execute("INSERT INTO jobs (note) VALUES ('mine')")
        # ... that also completes this attempt, fenced by its lease

    try:
        ids = [apply_payment.enqueue(n) for n in (1, 2, 3)]
        with running(app, concurrency=2):
            wait_until(lambda: all(app.get_job(i).status == "done" or app.get_job(i).failures
                                   for i in ids), timeout=20, what="the payments")
        for i in ids:
            job = app.get_job(i)
            assert (job.status, job.attempt, job.failures) == ("done", 1, 0), job.last_error
    finally:
        app.close()
    with psycopg.connect(scratch_db, autocommit=True) as conn:
        assert conn.execute("SELECT balance FROM accounts").fetchone() == (60,)
        assert conn.execute("SELECT count(*) FROM payments_applied").fetchone() == (3,)
        assert conn.execute("SELECT count(*) FROM public.jobs").fetchone() == (3,)
        assert conn.execute("SELECT count(*) FROM tether.jobs").fetchone() == (3,)
