"""Correct use of the typed API: mypy --strict must accept it (tests/api/test_typing.py)."""

from __future__ import annotations

import asyncio
from typing import reveal_type

import tether

app = tether.App("sqlite:///never-opened.db")


@app.task
def add(a: int, b: int) -> int:
    return a + b


@app.task(queue="math", max_attempts=3)
async def scale(x: float, *, by: float = 2.0) -> list[float]:
    return [x * by]


job = add.enqueue(1, 2)
reveal_type(job)
reveal_type(app.wait(add.enqueue(1, 2)))
reveal_type(app.wait(scale.enqueue(1.5, by=3.0), timeout=5))
reveal_type(app.wait(7))
later: tether.JobId[int] = add.options(delay=30, priority=-1).enqueue(3, 4)
many: list[tether.JobId[int]] = add.enqueue_many([((1, 2), {}), ((3, 4), {})])
plain_id: int = later + 1  # a JobId is an int
view: tether.Job = app.get_job(later)
status: str = view.status


def describe(task: tether.Task) -> str:  # a bare Task is Task[..., Any]: no type arguments
    return f"{task.name} on {task.options.queue}"


describe(add)


async def produce() -> int:
    one = await add.aenqueue(5, 6)
    reveal_type(await app.await_result(one, timeout=1.0))
    await scale.options(queue="other").aenqueue(2.0)
    ids = await add.aenqueue_many([((1, 1), {})])
    await app.acancel(ids[0])
    found = await app.aget_job(one)
    return found.attempt + await app.await_result(one)


if __name__ == "__main__":  # only type-checked, never run by the suite
    asyncio.run(produce())
