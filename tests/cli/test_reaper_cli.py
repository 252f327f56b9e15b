"""``tether reaper`` as a real process: it reaps, and a SIGTERM releases its leadership."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tether.stores import NewJob, open_store


@pytest.mark.slow
@pytest.mark.crash
@pytest.mark.timeout(60)
def test_standalone_reaper_reaps_and_releases_leadership(store_url: str) -> None:
    store = open_store(store_url)
    store.migrate()
    proc = None
    try:
        ids = store.enqueue([NewJob("t"), NewJob("t")])
        store.claim("dead-worker", ["default"], 2, 1.0)  # nobody will renew these
        proc = subprocess.Popen(
            [sys.executable, "-m", "tether._cli.main", "reaper", "--url", store_url,
             "--lease-ttl", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            jobs = [store.get_job(i) for i in ids]
            if all(j is not None and j.status == "pending" for j in jobs):
                break
            time.sleep(0.05)
        jobs = [store.get_job(i) for i in ids]
        assert all(j is not None and (j.status, j.stall_count) == ("pending", 1) for j in jobs)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, out
        # Released: another candidate takes over at once, with a newer term.
        successor = store.leader_acquire("maintenance", "successor", 5.0)
        assert successor is not None and successor.term >= 2, out
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        store.close()
