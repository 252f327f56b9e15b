"""``tether worker MODULE:APP --burst``: a real worker process that runs what is due and exits."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tether
from tests.servers import STORE_KINDS, isolated_url

APP = '''
import tether

app = tether.App()


@app.task(name="burst.add")
def add(a: int, b: int) -> int:
    return a + b


@app.task(name="burst.fan")
def fan(n: int) -> int:
    for i in range(n):
        add.enqueue(i, 100)
    return n


@app.task(name="burst.boom", max_attempts=1)
def boom() -> None:
    raise ValueError("boom")


@app.task(name="burst.later", retry=tether.Backoff(base=600))
def later() -> None:
    raise ValueError("again in ten minutes")
'''


@pytest.fixture(params=STORE_KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with isolated_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def producer(url: str, tmp_path: Path) -> Iterator[tether.App]:
    (tmp_path / "burst_app.py").write_text(APP)
    app = tether.App(url)
    yield app
    app.close()


def burst(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "worker", "burst_app:app", "--url", url, "--burst",
         *extra], cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"})


def test_burst_runs_every_due_job_then_exits_0(
    producer: tether.App, url: str, tmp_path: Path
) -> None:
    first = producer.enqueue("burst.add", 1, 2)
    producer.enqueue("burst.fan", 5)
    delayed = producer.enqueue("burst.add", 0, 0, delay=3600)
    done = burst(tmp_path, url, "-c", "4")
    assert done.returncode == 0, done.stderr
    jobs = producer.store.list_jobs(limit=100)
    assert len(jobs) == 8, "the fan's five children ran in the same burst"
    assert {j.status for j in jobs if j.id != delayed} == {"done"}, (
        [(j.id, j.task, j.status, j.run_at, j.last_error) for j in jobs], done.stderr)
    assert producer.get_job(first).result_value == 3
    assert producer.get_job(delayed).status == "pending", "not due: left alone"
    assert "burst done: ran 7 job(s) (7 done); 1 pending job(s) left" in done.stderr
    assert producer.store.list_workers() == [], "it unregistered"


def test_an_empty_queue_exits_0_at_once(producer: tether.App, url: str, tmp_path: Path) -> None:
    producer.store.check_schema()
    done = burst(tmp_path, url)
    assert done.returncode == 0, done.stderr
    assert "ran 0 job(s)" in done.stderr


def test_failed_jobs_exit_0_unless_strict(producer: tether.App, url: str, tmp_path: Path) -> None:
    producer.enqueue("burst.boom", max_attempts=1)
    retrying = producer.enqueue("burst.later")
    done = burst(tmp_path, url)
    assert done.returncode == 0, done.stderr
    assert "1 failed" in done.stderr and "1 pending" in done.stderr
    assert producer.get_job(retrying).status == "pending"
    producer.enqueue("burst.boom", max_attempts=1)
    strict = burst(tmp_path, url, "--strict")
    assert strict.returncode == 1, strict.stderr
    assert "1 job(s) failed (--strict)" in strict.stderr
    producer.enqueue("burst.add", 1, 1)
    fine = burst(tmp_path, url, "--strict")
    assert fine.returncode == 0, "--strict counts only the jobs this burst ran"


def test_strict_without_burst_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "burst_app.py").write_text(APP)
    done = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "burst_app:app", "--url",
         f"sqlite:///{tmp_path / 'x.db'}", "--strict"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--strict only applies with --burst" in done.stderr


def test_burst_with_the_process_pool(tmp_path: Path) -> None:
    with isolated_url("sqlite", tmp_path) as url:
        (tmp_path / "burst_app.py").write_text(APP)
        producer = tether.App(url)
        try:
            ids = [producer.enqueue("burst.add", i, 1) for i in range(4)]
            done = burst(tmp_path, url, "--pool", "process", "-c", "2")
            assert done.returncode == 0, done.stderr
            assert [producer.get_job(i).result for i in ids] == [1, 2, 3, 4]
            assert "ran 4 job(s) (4 done)" in done.stderr
        finally:
            producer.close()


def test_url_overrides_a_store_the_app_opened_at_import(tmp_path: Path) -> None:
    """``--url`` names the store the worker works, even when importing the app module already
    opened the app's own store (an enqueue at import time): nothing of the other store runs,
    and the worker's heartbeats and claims go to one store."""
    own = tmp_path / "own.db"
    (tmp_path / "import_app.py").write_text(
        "import tether\n\n"
        f"app = tether.App({f'sqlite:///{own}'!r})\n\n\n"
        "@app.task(name='imp.hi')\n"
        "def hi() -> str:\n"
        "    return 'hi'\n\n\n"
        "hi.enqueue()\n")
    with isolated_url("sqlite", tmp_path) as url:
        target = tether.App(url)
        try:
            wanted = target.enqueue("imp.hi")
            done = subprocess.run(
                [sys.executable, "-m", "tether", "worker", "import_app:app", "--url", url,
                 "--burst"], cwd=tmp_path, capture_output=True, text=True, timeout=90,
                check=False)
            assert done.returncode == 0, done.stderr
            assert "ran 1 job(s) (1 done)" in done.stderr, done.stderr
            assert "SchemaError" not in done.stderr and "heartbeat failed" not in done.stderr
            assert target.get_job(wanted).status == "done"
        finally:
            target.close()
    other = tether.App(f"sqlite:///{own}")
    try:
        assert [j.status for j in other.store.list_jobs()] == ["pending"], \
            "the store --url replaced was left alone"
    finally:
        other.close()


def test_burst_on_the_memory_store_runs_what_its_process_enqueued(tmp_path: Path) -> None:
    """memory:// is one process: a burst runs the jobs the app module enqueued at import (a
    demo, a script), reports the failed one and exits 1 with --strict, 0 without."""
    (tmp_path / "mem_app.py").write_text(
        "import tether\n\n"
        "app = tether.App('memory://demo')\n\n\n"
        "@app.task(name='mem.hi')\n"
        "def hi() -> str:\n"
        "    return 'hi'\n\n\n"
        "@app.task(name='mem.bad', max_attempts=1)\n"
        "def bad() -> None:\n"
        "    raise ValueError('bad')\n\n\n"
        "hi.enqueue()\nhi.enqueue()\nbad.enqueue()\n")
    for extra, code in (((), 0), (("--strict",), 1)):
        done = subprocess.run(
            [sys.executable, "-m", "tether", "worker", "mem_app:app", "--burst", *extra],
            cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False)
        assert done.returncode == code, done.stderr
        assert "burst done: ran 3 job(s) (2 done, 1 failed)" in done.stderr
        assert "SchemaError" not in done.stderr and "heartbeat failed" not in done.stderr


PERIODIC_APP = '''
import time

import tether

app = tether.App()


@app.periodic(every=1)
@app.task(name="per.tick")
def tick() -> None:
    time.sleep(2.5)  # longer than the period: a tick is always running or due


@app.task(name="per.first")
def first() -> int:
    """Runs long enough for a scheduler in this worker to enqueue ticks (at most 5 s)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if any(j.task == "per.tick" for j in app.store.list_jobs(limit=100)):
            return 1
        time.sleep(0.05)
    return 0
'''


@pytest.mark.slow
def test_a_burst_enqueues_no_periodic_ticks_so_it_ends(tmp_path: Path) -> None:
    """A burst ends when nothing is due; a periodic task that runs as long as its period
    would keep it busy forever if the burst's own scheduler enqueued ticks. So a burst
    schedules nothing (long-running workers, or ``tether reaper``, do)."""
    (tmp_path / "periodic_app.py").write_text(PERIODIC_APP)
    with isolated_url("sqlite", tmp_path) as url:
        producer = tether.App(url)
        try:
            producer.enqueue("per.first")
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "tether", "worker", "periodic_app:app", "--url",
                     url, "--burst", "-c", "4"], cwd=tmp_path, capture_output=True,
                    text=True, timeout=60, check=False)
            except subprocess.TimeoutExpired as exc:
                raise AssertionError(f"the burst never ended: {exc.stderr!r}"[-3000:]) from None
            assert done.returncode == 0, done.stderr
            assert [(j.task, j.status, j.result) for j in producer.store.list_jobs()] == [
                ("per.first", "done", "0")], "no tick was enqueued"
            assert producer.store.schedules() == []
        finally:
            producer.close()
