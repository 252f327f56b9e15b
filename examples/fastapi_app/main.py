"""The example API: ``uvicorn main:api``. Enqueue from a route, then wait for the result.

The lifespan opens the App's store (and its async producer) when the server starts and closes
it when the server stops; routes get the App through the ``TetherApp`` dependency.
"""

from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Response
from tasks import add, app, divide

import tether
from tether.contrib.fastapi import TetherApp, lifespan

api = FastAPI(title="tether example", lifespan=lifespan(app))
Seconds = Annotated[float, Query(ge=0, le=60)]


@api.post("/add")
async def enqueue_add(x: int, y: int, delay: Seconds = 0) -> dict[str, int]:
    """Queue ``x + y`` for a worker; answers at once with the job's id. (``options`` is the
    typed way to pass enqueue options: ``add.aenqueue(x, y, delay=...)`` works at run time,
    but mypy knows only the task's own parameters there.)"""
    return {"job": await add.options(delay=delay).aenqueue(x, y)}


@api.post("/divide")
async def enqueue_divide(x: float, y: float) -> dict[str, int]:
    return {"job": await divide.aenqueue(x, y)}


@api.get("/jobs/{job_id}/result")
async def result(job_id: int, tether_app: TetherApp, response: Response,
                 timeout: Seconds = 10) -> dict[str, Any]:
    """Wait up to ``timeout`` seconds for the job's result (woken by the store, no polling
    loop here): 200 with the result, 202 if it is not finished yet, 409 if it failed."""
    try:
        value = await tether_app.await_result(job_id, timeout=timeout)
    except tether.JobNotFound:
        raise HTTPException(404, f"no job {job_id}") from None
    except TimeoutError:
        job = await tether_app.aget_job(job_id)
        response.status_code = 202
        return {"job": job_id, "status": job.status}
    except tether.JobFailed as exc:  # dead-lettered, or cancelled (JobWasCancelled)
        raise HTTPException(409, {"job": job_id, "reason": exc.reason,
                                  "error": (exc.last_error or "").splitlines()[:1]}) from None
    return {"job": job_id, "status": "done", "result": value}


@api.post("/add/wait")
async def add_and_wait(x: int, y: int, timeout: Seconds = 10) -> dict[str, int]:
    """Enqueue and wait in one request (the typed way: ``await_result`` knows it is an int)."""
    job_id = await add.aenqueue(x, y)
    total: int = await app.await_result(job_id, timeout=timeout)
    return {"job": job_id, "result": total}
