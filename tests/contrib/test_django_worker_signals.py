"""``manage.py tether_worker`` handles SIGTERM as ``tether worker`` does: the first drains (the
running job finishes and is stored done, exit 0), the second hands the lease back at once (the
job is pending again for another worker). A real Django project in ``tmp_path``, the worker a
real process, on SQLite (tether's signal handling is the same code on every store).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tests.crash.harness import wait_for
from tests.examples.conftest import example_env

pytestmark = pytest.mark.slow

TASKS = '''
import time
from pathlib import Path

from tether.contrib.django import app


@app.task(name="slow.hold", max_attempts=5)
def hold(flags: str) -> str:
    """Says it started, then runs until the test releases it (a file appears)."""
    Path(flags, "started").touch()
    deadline = time.monotonic() + 60
    while not Path(flags, "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "held"
'''


def _project(tmp_path: Path) -> tuple[dict[str, str], str]:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    (tmp_path / "slow_tasks.py").write_text(TASKS)
    (tmp_path / "sig_settings.py").write_text(
        "SECRET_KEY = 'x'\n"
        "INSTALLED_APPS = ['tether.contrib.django']\n"
        f"DATABASES = {{'default': {{'ENGINE': 'django.db.backends.sqlite3', "
        f"'NAME': {str(tmp_path / 'dj.sqlite3')!r}}}}}\n"
        f"TETHER = {{'url': {url!r}, 'include': ['slow_tasks']}}\n")
    env = example_env(DJANGO_SETTINGS_MODULE="sig_settings", PYTHONPATH=str(tmp_path))
    return env, url


@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_drains_and_a_second_hands_the_lease_back(
    tmp_path: Path, signals: int
) -> None:
    env, url = _project(tmp_path)
    flags = tmp_path / "flags"
    flags.mkdir()
    producer = tether.App(url)
    worker: subprocess.Popen[str] | None = None
    try:
        job_id = producer.enqueue("slow.hold", str(flags))
        worker = subprocess.Popen([sys.executable, "-m", "django", "tether_worker", "-c", "1"],
                                  cwd=tmp_path, env=env, text=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(lambda: (flags / "started").exists() or worker.poll() is not None, 60,
                 "the job started")
        assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
        worker.send_signal(signal.SIGTERM)
        assert worker.stderr is not None
        line = ""
        while "draining in-flight jobs" not in line:  # the first SIGTERM is being handled
            line = worker.stderr.readline()
            assert line, "the worker exited without saying it drains"
        if signals == 2:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(60)
            job = producer.get_job(job_id)
            assert job.status == "pending" and job.interruptions == 1, job
        else:
            (flags / "release").touch()
            code = worker.wait(60)
            job = producer.get_job(job_id)
            assert (job.status, job.result) == ("done", "held"), job
        assert code == 0, worker.stderr.read() if worker.stderr else ""
    finally:
        (flags / "release").touch()
        if worker is not None and worker.poll() is None:  # only the worker this test started
            worker.kill()
            worker.wait(10)
        producer.close()
