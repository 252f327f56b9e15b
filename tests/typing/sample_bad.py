"""Wrong calls mypy must reject (tests/api/test_typing.py checks each error's text)."""

from __future__ import annotations

import tether

app = tether.App("sqlite:///never-opened.db")


@app.task
def add(a: int, b: int) -> int:
    return a + b


add.enqueue("not", "ints")
add.enqueue(1)
name: str = app.wait(add.enqueue(1, 2))
add.options(delay=5).enqueue(1, b="x")


async def produce() -> None:
    await add.aenqueue("x", 2)
    # (``text: str = await app.await_result(job)`` is NOT rejected: mypy infers the overload's
    # type variable from the annotation through ``await`` and falls back to the int overload)
    await add.options(queue="q").aenqueue(b="y", a=1)
