"""``tether demo --url`` on a store that holds the user's jobs leaves them untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ops.conftest import run_cli
from tests.servers import isolated_url
from tether._task import make_new_job
from tether.stores import WorkerInfo, open_store


@pytest.mark.crash
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_demo_on_a_shared_store_touches_nothing_of_the_users(tmp_path: Path) -> None:
    with isolated_url("postgres", tmp_path) as url:
        store = open_store(url)
        store.migrate()
        try:
            mine = store.enqueue([make_new_job("users.task", [i], {}) for i in range(5)])
            store.register_worker(WorkerInfo("users-worker", "elsewhere", 1, ("default",), 1))
            before = [store.get_job(i) for i in mine]
            result = run_cli("demo", "--url", url, "--jobs", "40", "--lease-ttl", "2",
                             timeout=170)
            assert result.returncode == 0, result.stdout + result.stderr
            assert "every invariant held" in result.stdout
            assert [store.get_job(i) for i in mine] == before
            assert {c.queue for c in store.counts() if c.count} == {"default"}
            assert [w.id for w in store.list_workers()] == ["users-worker"]
        finally:
            store.close()
