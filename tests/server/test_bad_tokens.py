"""A client with a wrong or missing token, against a real ``tether server`` (issue #21): a
worker exits non-zero with one line naming the token by fingerprint and the server's
address, no traceback; a producer gets the error at once (nothing retries a refused token);
a worker token cannot call an admin method."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tether
from tests.server.serving import Served, run_cli, tether_server
from tether._server.auth import fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

WORKER_TOKEN = "w-good-0123456789abcdef"
ADMIN_TOKEN = "a-good-0123456789abcdef"
WRONG_TOKEN = "x-wrong-0123456789abcdef"
APP = '''
import tether

app = tether.App()


@app.task(name="remote.add")
def add(a: int, b: int) -> int:
    return a + b
'''


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{WORKER_TOKEN} worker\n{ADMIN_TOKEN} admin\n")
    tokens.chmod(0o600)
    (tmp_path / "remote_app.py").write_text(APP)
    # DEBUG: not even the most talkative log may hold a token.
    with tether_server(tmp_path, "--url", f"sqlite:///{tmp_path / 'served.db'}",
                       "--token-file", str(tokens), "--log-level", "DEBUG") as server:
        yield server
        assert server.stop() == 0
        text = server.text()
        for token in (WORKER_TOKEN, ADMIN_TOKEN, WRONG_TOKEN):
            assert token not in text, "the server logged a token"


def one_line(result_stderr: str) -> str:
    lines = result_stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result_stderr, result_stderr
    return lines[0]


def test_worker_with_a_wrong_token_exits_with_one_line(tmp_path: Path, served: Served) -> None:
    result = run_cli(["worker", "remote_app:app", "--url",
                      f"tether://{WRONG_TOKEN}@{served.address}"], tmp_path)
    assert result.returncode != 0, result.stderr
    line = one_line(result.stderr)
    assert f"the tether server at {served.address} refused token " \
           f"{fingerprint(WRONG_TOKEN)}: unknown token" in line, line
    assert WRONG_TOKEN not in result.stderr + result.stdout
    served.wait_line(f"refused token {fingerprint(WRONG_TOKEN)}: unknown token")


def test_worker_without_a_token_exits_with_one_line(tmp_path: Path, served: Served) -> None:
    result = run_cli(["worker", "remote_app:app", "--url", f"tether://{served.address}"],
                     tmp_path)
    assert result.returncode != 0, result.stderr
    line = one_line(result.stderr)
    assert served.address in line and "without a token" in line, line


def test_worker_with_the_token_from_the_environment(tmp_path: Path, served: Served) -> None:
    result = run_cli(["worker", "remote_app:app", "--url", f"tether://{served.address}"],
                     tmp_path, TETHER_TOKEN=WRONG_TOKEN)
    assert result.returncode != 0, result.stderr
    assert fingerprint(WRONG_TOKEN) in one_line(result.stderr)


def test_a_good_token_runs_jobs(tmp_path: Path, served: Served) -> None:
    """A worker token runs jobs; ``--burst`` needs an admin token through tether:// (its
    idle check lists jobs) and says so in one line instead of never ending."""
    app = tether.App(f"tether://{WORKER_TOKEN}@{served.address}")
    try:
        job = app.enqueue("remote.add", 2, 3)
        argv = ["worker", "remote_app:app", "--burst", "--url", f"tether://{served.address}"]
        result = run_cli(argv, tmp_path, TETHER_TOKEN=WORKER_TOKEN)
        assert result.returncode == 2, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith(f"tether: the tether server at {served.address} refused token "
                               f"{fingerprint(WORKER_TOKEN)} (worker) for list_jobs"), last
        assert "Traceback" not in result.stderr
        result = run_cli(argv, tmp_path, TETHER_TOKEN=ADMIN_TOKEN)
        assert result.returncode == 0, result.stderr
        assert app.wait(job, timeout=30) == 5
        for token in (WORKER_TOKEN, ADMIN_TOKEN):
            assert token not in result.stderr + result.stdout
    finally:
        app.close()


def test_producer_gets_the_error_at_once(served: Served) -> None:
    app = tether.App(f"tether://{WRONG_TOKEN}@{served.address}")
    try:
        with pytest.raises(tether.AuthError) as caught:
            app.enqueue("remote.add", 1, 2)
        assert caught.value.code == "unauthenticated"
        assert fingerprint(WRONG_TOKEN) in str(caught.value)
        assert WRONG_TOKEN not in str(caught.value)
    finally:
        app.close()


def test_a_worker_token_cannot_purge_but_an_admin_token_can(tmp_path: Path,
                                                            served: Served) -> None:
    url = f"tether://{served.address}"
    result = run_cli(["purge", "default", "--yes", "--url", url], tmp_path,
                     TETHER_TOKEN=WORKER_TOKEN)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert "purge" in line and "admin token" in line and fingerprint(WORKER_TOKEN) in line
    result = run_cli(["purge", "default", "--yes", "--url", url], tmp_path,
                     TETHER_TOKEN=ADMIN_TOKEN)
    assert result.returncode == 0, result.stderr


def test_a_token_revoked_under_a_running_worker_is_ridden_out(tmp_path: Path,
                                                              served: Served) -> None:
    """SIGHUP drops the worker's token: its claims are refused, logged as one line (no
    traceback), and it keeps going; the token back, it runs jobs again."""
    import signal
    import subprocess
    import sys

    from tests.crash.harness import wait_for
    from tests.server.serving import clean_env

    tokens = tmp_path / "tokens"
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tether", "worker", "remote_app:app", "--url",
             f"tether://{served.address}"], cwd=tmp_path, stdout=out,
            stderr=subprocess.STDOUT, env=clean_env(TETHER_TOKEN=WORKER_TOKEN))
    app = tether.App(f"tether://{ADMIN_TOKEN}@{served.address}")
    try:
        assert app.wait(app.enqueue("remote.add", 1, 1), timeout=60) == 2
        tokens.write_text(f"{ADMIN_TOKEN} admin\n")
        served.proc.send_signal(signal.SIGHUP)
        served.wait_line("reloaded (0 worker, 1 admin)")
        refused = f"refused token {fingerprint(WORKER_TOKEN)}: unknown token"
        wait_for(lambda: refused in log.read_text(), 60, "the worker's refused claim")
        assert worker.poll() is None, log.read_text()
        assert "Traceback" not in log.read_text(), log.read_text()
        tokens.write_text(f"{WORKER_TOKEN} worker\n{ADMIN_TOKEN} admin\n")
        served.proc.send_signal(signal.SIGHUP)
        served.wait_line("reloaded (1 worker, 1 admin)")
        assert app.wait(app.enqueue("remote.add", 2, 2), timeout=60) == 4
    finally:
        app.close()
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert WORKER_TOKEN not in log.read_text()
