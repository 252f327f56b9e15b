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


def test_enqueue_counter_and_wait_histogram(tmp_path: Path) -> None:
    """Producers count what they enqueue (per task and queue, ``enqueue_many`` included);
    workers observe how long each job waited from due to claim, by the store's clock."""
    from datetime import UTC, datetime, timedelta

    from prometheus_client import CollectorRegistry

    from tests.worker.helpers import running
    from tether.metrics import Metrics

    app = tether.App(f"sqlite:///{tmp_path / 'm.db'}", lease_ttl=1.5, poll_interval=0.05)
    registry = CollectorRegistry()
    metrics = Metrics(app, registry)

    @app.task(name="m.noop", queue="mq")
    def noop(i: int) -> None:
        return None

    try:
        ids = [noop.enqueue(1), *noop.enqueue_many([((2,), {}), ((3,), {})])]
        overdue = datetime.now(UTC) - timedelta(seconds=120)
        ids.append(app.enqueue("m.noop", 4, run_at=overdue))
        ids.append(app.enqueue("m.noop", 5, queue="other"))
        sample = registry.get_sample_value
        assert sample("tether_jobs_enqueued_total", {"task": "m.noop", "queue": "mq"}) == 4
        assert sample("tether_jobs_enqueued_total", {"task": "m.noop", "queue": "other"}) == 1
        with running(app, concurrency=2, queues=["mq", "other"]):
            wait_until(lambda: all(app.get_job(i).status == "done" for i in ids), what="jobs")
            labels = {"task": "m.noop", "queue": "mq"}
            wait_until(lambda: sample("tether_job_wait_seconds_count", labels) == 4,
                       what="four waits observed")
        waited = sample("tether_job_wait_seconds_sum", labels)
        assert waited is not None and waited >= 120  # the overdue job waited two minutes
        over_a_minute = 4 - (sample("tether_job_wait_seconds_bucket", {**labels, "le": "60.0"})
                             or 0)
        assert over_a_minute == 1
    finally:
        metrics.close()
        app.close()
