"""examples/fastapi_app run for real: uvicorn on a loopback port, a real ``tether worker``
process, an httpx client; on PostgreSQL, Redis and SQLite (the store each test's own).

Enqueue through a route, get the result through the waiting route (woken by the store), and
the other answers of that route: a failed job (409 with its error), an unknown job (404), a job
not finished within the timeout (202), and enqueue-and-wait in one request. SIGTERM then
stops the server (its lifespan closes the App, with no traceback) and the worker (exit 0).
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.crash.harness import wait_for
from tests.examples.conftest import EXAMPLES, PYTHON, example_env, stop
from tests.servers import isolated_url

CALC = EXAMPLES / "fastapi_app"
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(params=["postgres", "redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with isolated_url(request.param, tmp_path) as u:
        yield u


def test_enqueue_from_a_route_and_wait_for_the_result(
    url: str, processes: list[subprocess.Popen[str]]
) -> None:
    env = example_env(TETHER_URL=url)
    port = _free_port()
    server = subprocess.Popen(
        [PYTHON, "-m", "uvicorn", "main:api", "--host", "127.0.0.1", "--port", str(port)],
        cwd=CALC, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    processes.append(server)
    worker = subprocess.Popen([PYTHON, "-m", "tether", "worker", "tasks:app", "-c", "2"],
                              cwd=CALC, env=env, text=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    processes.append(worker)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        try:
            return httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(up, 30, "uvicorn answering", interval=0.1)
    with httpx.Client(base_url=base, timeout=40) as client:
        job = client.post("/add", params={"x": 2, "y": 3}).json()["job"]
        answer = client.get(f"/jobs/{job}/result", params={"timeout": 30})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"job": job, "status": "done", "result": 5}

        failing = client.post("/divide", params={"x": 1, "y": 0}).json()["job"]
        failed = client.get(f"/jobs/{failing}/result", params={"timeout": 30})
        assert failed.status_code == 409, failed.text
        assert failed.json()["detail"]["reason"] == "error"
        assert failed.json()["detail"]["error"][0].startswith("ZeroDivisionError")

        assert client.get("/jobs/987654/result", params={"timeout": 1}).status_code == 404

        later = client.post("/add", params={"x": 1, "y": 1, "delay": 60}).json()["job"]
        waiting = client.get(f"/jobs/{later}/result", params={"timeout": 0.3})
        assert waiting.status_code == 202
        assert waiting.json() == {"job": later, "status": "pending"}

        both = client.post("/add/wait", params={"x": 4, "y": 5, "timeout": 30})
        assert both.status_code == 200, both.text
        assert both.json()["result"] == 9

    # uvicorn finishes its shutdown, then re-raises the SIGTERM it caught (exit -15)
    assert stop(server) in (0, -signal.SIGTERM)
    errors = server.stderr.read() if server.stderr else ""
    assert "Application shutdown complete" in errors and "Traceback" not in errors, errors
    assert stop(worker) == 0
