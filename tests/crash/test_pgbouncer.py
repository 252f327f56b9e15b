"""Real ``tether worker`` processes behind a real PgBouncer in ``pool_mode = transaction``
(issue 18, A): 300 jobs, 3 workers, a producer on ``get_job`` / ``wait_for_finish``; every job
done exactly once, nothing dead-lettered, no error in any log.

The same run behind session pooling (``pooler=session``) too. Before ``pooler=transaction``
existed the same run (without the option) failed with random
``StoreError: prepared statement "_pg3_0" already exists`` in every loop; with it, the URL
was refused by libpq ("invalid URI query parameter"). Both wake-up paths run: polling (no
``direct=``) and LISTEN on a direct session connection to the server.
"""

from __future__ import annotations

import re
import signal
import threading
from collections import Counter
from typing import Any

import pytest

from tests.crash.conftest import MakeCluster
from tests.crash.harness import enqueue, get, wait_for
from tests.throwaway.pgbouncer import pgbouncer
from tether.stores import Store, open_store

JOBS = 300
WORKERS = 3
BATCH = 30
#: A log line that must never appear in a run that went right.
_BAD = re.compile(r"\b(ERROR|CRITICAL)\b|Traceback")


def _produce(store: Store, out: dict[str, Any]) -> None:
    """Enqueue in batches; wait for each job with wait_for_finish, then read it."""
    try:
        for _ in range(JOBS // BATCH):
            ids = enqueue(store, "crash.work", 0.0, n=BATCH)
            out["ids"] += ids
            for job_id in ids:
                while not store.wait_for_finish([job_id], 60.0):
                    pass
                assert get(store, job_id).status == "done", get(store, job_id)
    except BaseException as exc:  # reported by the test thread
        out["error"] = exc


@pytest.mark.crash
@pytest.mark.parametrize("wakeups", ["polling", "direct", "session"])
def test_300_jobs_through_pgbouncer(pg_url: str, make_cluster: MakeCluster,
                                    wakeups: str) -> None:
    """``polling``/``direct``: transaction pooling, 4 server connections for the 3 workers'
    ~20 and the producer's. ``session``: session pooling, sized for every connection (a
    client finding none free is queued until one is released)."""
    mode = "session" if wakeups == "session" else "transaction"
    with pgbouncer(mode, pool_size=4 if mode == "transaction" else 40) as bouncer:
        url = bouncer.url(pg_url) + f"&pooler={mode}"
        if wakeups == "direct":
            url += "&direct=127.0.0.1:5432"
        store = open_store(url)
        try:
            store.migrate()  # through the pooler too: one transaction, xact-scoped lock
            cluster = make_cluster(url, lease_ttl=5.0)
            workers = [cluster.spawn(2) for _ in range(WORKERS)]
            cluster.wait_registered(store, *workers)
            out: dict[str, Any] = {"ids": [], "error": None}
            producer = threading.Thread(target=_produce, args=(store, out))
            producer.start()
            producer.join(240)
            assert not producer.is_alive(), "the producer did not finish in 240 s"
            if out["error"] is not None:
                raise out["error"]
            ids: list[int] = out["ids"]
            assert len(ids) == JOBS
            wait_for(lambda: all(get(store, i).status == "done" for i in ids), 30,
                     "every job done")
            records = [get(store, i) for i in ids]
            assert {(r.status, r.attempt, r.failures, r.stall_count) for r in records} == {
                ("done", 1, 0, 0)}
            assert store.list_jobs(status="failed", limit=10) == []
            starts = Counter(r["job"] for r in cluster.records("runs") if r["event"] == "start")
            assert sorted(starts) == sorted(ids) and set(starts.values()) == {1}
            for worker in workers:
                worker.send(signal.SIGTERM)
            for worker in workers:
                worker.proc.wait(30)
            for worker in workers:
                text = worker.log_text()
                bad = [line for line in text.splitlines() if _BAD.search(line)]
                assert bad == [], f"{worker}: {bad}"
                assert worker.proc.returncode == 0, text
                # the mode is said once per process (one store per worker thread)
                assert text.count(f"PostgreSQL pooler={mode}") == 1, text
        finally:
            store.close()
