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


def _serve(env: dict[str, str], tmp_path: Path,
           processes: list[subprocess.Popen[str]]) -> tuple[subprocess.Popen[str], str]:
    """uvicorn serving the example on a loopback socket this process bound (``--fd``: no
    window in which another process can take a port picked free), once it answers; its
    stderr goes to a file (a pipe nobody reads until the end could fill and block it)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port: int = listener.getsockname()[1]
        with (tmp_path / "uvicorn.err").open("w") as errors:
            server = subprocess.Popen(
                [PYTHON, "-m", "uvicorn", "main:api", "--fd", str(listener.fileno())],
                cwd=CALC, env=env, text=True, stdout=subprocess.DEVNULL, stderr=errors,
                pass_fds=[listener.fileno()])
    processes.append(server)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.poll() is None, server_errors(tmp_path)
        try:
            return httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(up, 60, "uvicorn answering", interval=0.1)
    return server, base


def server_errors(tmp_path: Path) -> str:
    return (tmp_path / "uvicorn.err").read_text()


@pytest.fixture(params=["postgres", "redis", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with isolated_url(request.param, tmp_path) as u:
        yield u


def test_enqueue_from_a_route_and_wait_for_the_result(
    url: str, processes: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    env = example_env(TETHER_URL=url)
    server, base = _serve(env, tmp_path, processes)
    worker = subprocess.Popen([PYTHON, "-m", "tether", "worker", "tasks:app", "-c", "2"],
                              cwd=CALC, env=env, text=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    processes.append(worker)
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
    errors = server_errors(tmp_path)
    assert "Application shutdown complete" in errors and "Traceback" not in errors, errors
    assert stop(worker) == 0


def test_a_waiting_route_leaves_the_server_free_for_other_requests(
    url: str, processes: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    """One request waits for a result no worker can give yet (``/add/wait``); meanwhile other
    requests enqueue and answer at once, on the same single-process server: the wait holds
    no thread of the event loop. Then a worker starts and the waiting request gets its sum."""
    import threading

    from tether.stores import open_store

    env = example_env(TETHER_URL=url)
    _, base = _serve(env, tmp_path, processes)
    store = open_store(url)
    answers: list[httpx.Response] = []
    waiting = threading.Thread(target=lambda: answers.append(httpx.post(
        f"{base}/add/wait", params={"x": 40, "y": 2, "timeout": 60}, timeout=90)))
    try:
        waiting.start()
        wait_for(lambda: len(store.list_jobs(limit=10)) == 1, 30, "the waiting route's job")
        with httpx.Client(base_url=base, timeout=30) as client:
            for i in range(3):
                assert client.post("/add", params={"x": i, "y": i}).status_code == 200
        assert waiting.is_alive() and answers == [], "the other requests did not wait for it"
        worker = subprocess.Popen([PYTHON, "-m", "tether", "worker", "tasks:app", "-c", "2"],
                                  cwd=CALC, env=env, text=True, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        processes.append(worker)
        waiting.join(60)
        assert [a.status_code for a in answers] == [200], [a.text for a in answers]
        assert answers[0].json()["result"] == 42
        assert stop(worker) == 0
    finally:
        waiting.join(60)
        store.close()
