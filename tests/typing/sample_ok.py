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

# workflows (issue #20): after= on every enqueue, signatures and the canvas
parent = add.enqueue_with((1, 2), after=[job], allow_failure=True)
child: tether.JobId[int] = add.options(after=[job, parent]).enqueue(3, 4)
reveal_type(add.s(1, 2).enqueue(after=job))
run: tether.WorkflowIds = tether.chain(
    add.s(1, 2), add.s(3), tether.group(add.s(4), add.si(1, 1))).enqueue()
final: tether.JobId[object] = run.last
fan_in = tether.chord([add.s(i, i) for i in range(3)],
                      add.s(0).set(queue="q", allow_failure=True)).enqueue(after=[job])


async def produce() -> int:
    one = await add.aenqueue(5, 6)
    reveal_type(await app.await_result(one, timeout=1.0))
    await scale.options(queue="other").aenqueue(2.0)
    ids = await add.aenqueue_many([((1, 1), {})])
    await app.acancel(ids[0])
    found = await app.aget_job(one)
    await tether.chain(add.s(1, 1), add.s(2)).aenqueue(after=[one])
    return found.attempt + await app.await_result(one)


if __name__ == "__main__":  # only type-checked, never run by the suite
    asyncio.run(produce())
