"""``tether worker --metrics-port``: scrape /metrics from a real worker subprocess."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

import tether
from tests.ops.conftest import Spawn
from tests.ports import free_port
from tests.worker.helpers import wait_until

pytest.importorskip("prometheus_client")



def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_scrape_a_real_worker(tmp_path: Path, spawn: Spawn) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    port = free_port()
    proc = spawn("worker", "tests.ops.apps:app", "-c", "2", "--metrics-port", str(port),
                 env={"TETHER_URL": url})
    app = tether.App(url)
    try:
        ok = [app.enqueue("ops.add", i, 1, queue="ops") for i in range(3)]
        bad = app.enqueue("ops.boom", queue="ops", max_attempts=2)
        app.enqueue("ops.mail", "x", queue="mail", delay=3600)  # stays pending
        wait_until(lambda: all(app.get_job(i).status == "done" for i in ok)
                   and app.get_job(bad).status == "failed", timeout=30, what="jobs")

        def ready() -> dict[str, float] | None:
            try:
                m = scrape(port)
            except OSError:
                return None
            dead = 'tether_jobs_dead_lettered_total{queue="ops",reason="error",task="ops.boom"}'
            depth = 'tether_queue_depth{queue="mail",state="pending"}'
            return m if m.get(dead) == 1 and depth in m else None

        m = wait_until(ready, timeout=30, what="the metrics")
    finally:
        app.close()
    assert m['tether_jobs_claimed_total{queue="ops",task="ops.add"}'] == 3
    assert m['tether_jobs_completed_total{queue="ops",task="ops.add"}'] == 3
    assert m['tether_jobs_failed_total{queue="ops",reason="error",task="ops.boom"}'] == 2
    assert m['tether_jobs_retried_total{queue="ops",task="ops.boom"}'] == 1
    assert m['tether_attempt_duration_seconds_count{task="ops.add"}'] == 3
    assert m["tether_heartbeat_rtt_seconds_count"] >= 1
    assert m["tether_jobs_in_flight"] == 0
    assert m["tether_maintenance_leader"] == 1
    assert m['tether_queue_depth{queue="mail",state="pending"}'] == 1
    assert m['tether_queue_depth{queue="ops",state="done"}'] == 3
    assert m['tether_oldest_pending_age_seconds{queue="mail"}'] == 0  # due in an hour
    proc.terminate()
    proc.communicate(timeout=30)
    assert proc.returncode == 0
