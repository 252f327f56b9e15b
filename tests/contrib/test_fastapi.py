"""tether.contrib.fastapi in-process (FastAPI's TestClient runs the lifespan): the App is
opened at start-up and closed at shutdown, an inner lifespan's state is kept, and a route
asking for the App without the lifespan gets a clear error."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request

import tether
from tests.crash.harness import wait_for
from tests.servers import PG_DSN, REDIS_URL, isolated_url
from tether.contrib.fastapi import TetherApp, lifespan

with warnings.catch_warnings():  # starlette's notice about httpx2, at import
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


def _app(tmp_path: Path) -> tuple[tether.App, Any]:
    app = tether.App(f"sqlite:///{tmp_path / 'q.db'}")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    return app, add


def test_lifespan_opens_and_closes_the_app_and_keeps_the_inner_state(tmp_path: Path) -> None:
    app, add = _app(tmp_path)
    order: list[str] = []

    @asynccontextmanager
    async def mine(api: FastAPI) -> AsyncIterator[dict[str, Any]]:
        order.append("inner start")
        # the App is already open here: start-up code may enqueue
        await add.aenqueue(0, 0)
        yield {"greeting": "hi"}
        order.append("inner stop")

    api = FastAPI(lifespan=lifespan(app, mine))

    @api.post("/add")
    async def route(x: int, y: int, request: Request, t: TetherApp) -> dict[str, Any]:
        assert t is app and request.state.tether is app
        return {"job": await add.aenqueue(x, y), "greeting": request.state.greeting}

    with TestClient(api) as client:
        assert app.runtime._store is not None  # opened by the lifespan, before any request
        body = client.post("/add", params={"x": 2, "y": 3}).json()
        assert body["greeting"] == "hi"
        job = app.get_job(body["job"])
        assert (job.task, job.args, job.status) == (add.name, [2, 3], "pending")
    assert order == ["inner start", "inner stop"]
    assert app.runtime._store is None  # closed at shutdown
    assert not hasattr(api.state, "tether")


def test_the_dependency_without_the_lifespan_says_what_to_do(tmp_path: Path) -> None:
    api = FastAPI()

    @api.get("/")
    async def route(t: TetherApp) -> None:
        return None

    with TestClient(api) as client, pytest.raises(RuntimeError, match="lifespan"):
        client.get("/")


def _connections(kind: str, name: str) -> int:
    """Connections the servers see under ``name`` (PostgreSQL application_name, Redis client
    name): what a process still holds open."""
    if kind == "postgres":
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                               (name,)).fetchone()
            return int(row[0]) if row else 0
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        return sum(1 for c in client.client_list() if c.get("name") == name)
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_the_lifespan_leaves_no_connection_open(kind: str, tmp_path: Path) -> None:
    """Everything the server opened (the store's pool, the async producer, the listener that
    woke a waiting route) is closed when it stops: the servers see none of it afterwards."""
    name = "leak" + uuid.uuid4().hex[:10]
    with isolated_url(kind, tmp_path) as url:
        # Redis takes the client name from the URL; PostgreSQL names each store's connections
        # itself (tether-PID-random), read below.
        app = tether.App(f"{url}&client_name={name}" if kind == "redis" else url)

        @app.task
        def add(x: int, y: int) -> int:
            return x + y

        api = FastAPI(lifespan=lifespan(app))

        @api.post("/add/wait")
        async def route(t: TetherApp) -> dict[str, Any]:
            job = await add.aenqueue(1, 2)
            try:
                await t.await_result(job, timeout=0.3)
            except TimeoutError:
                return {"job": job, "status": (await t.aget_job(job)).status}
            raise AssertionError("no worker runs: the wait must time out")

        with TestClient(api) as client:
            assert client.post("/add/wait").json()["status"] == "pending"
            if kind == "postgres":
                name = app.store._connector.application_name  # type: ignore[attr-defined]
            assert _connections(kind, name) > 0, "the name reaches the server"
        wait_for(lambda: _connections(kind, name) == 0, 20, "every connection closed",
                 interval=0.1)


def test_the_documented_testing_recipe_on_the_memory_store() -> None:
    """docs/fastapi.md#testing: TestClient runs the lifespan, drain runs the worker in the
    test, and the waiting route answers from the memory store, inside the client's block."""
    from tether.testing import drain

    app = tether.App(f"memory://fastapi-{uuid.uuid4().hex}")

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    api = FastAPI(lifespan=lifespan(app))

    @api.post("/add")
    async def enqueue_add(x: int, y: int) -> dict[str, int]:
        return {"job": await add.aenqueue(x, y)}

    @api.get("/jobs/{job_id}/result")
    async def result(job_id: int, t: TetherApp) -> dict[str, Any]:
        return {"result": await t.await_result(job_id, timeout=10)}

    with TestClient(api) as client:
        job = client.post("/add", params={"x": 2, "y": 3}).json()["job"]
        [ran] = drain(app)
        assert (ran.id, ran.status) == (job, "done")
        assert client.get(f"/jobs/{job}/result").json() == {"result": 5}
    assert app.runtime._store is None, "the lifespan closed the store (its memory data with it)"
