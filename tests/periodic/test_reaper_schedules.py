"""``tether reaper MODULE:APP`` leads the schedule duty too: with no worker running, the app's
``every=1`` schedule still gets its jobs (they wait for a worker to run them)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crash.harness import REPO, wait_for
from tether._periodic import tick_of
from tether.stores import open_store


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(60)
def test_standalone_reaper_enqueues_scheduled_jobs(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    store.migrate()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether._cli.main", "reaper", "tests.crash.periodic_app:app"],
        cwd=REPO, env={**os.environ, "TETHER_URL": store_url, "TETHER_TEST_DIR": str(tmp_path)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        jobs = wait_for(lambda: len(found := store.list_jobs(queue="periodic")) >= 2 and found,
                        30, "two scheduled jobs")
        ticks = [tick_of(j.payload) for j in jobs]
        assert None not in ticks and len(set(ticks)) == len(ticks)
        assert all(j.status == "pending" for j in jobs)  # nobody runs them: no worker
        lead = store.leader("maintenance:schedule")
        assert lead is not None and lead.holder.startswith("reaper:")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, out
        assert b"schedule crash.every_second" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        store.close()
