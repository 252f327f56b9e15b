"""The example's tasks and its App (the worker runs ``tether worker tasks:app``)."""

import os

import tether

app = tether.App(os.environ.get("TETHER_URL", "sqlite:///calc.db"), lease_ttl=10)


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task(max_attempts=1)
def divide(x: float, y: float) -> float:
    return x / y  # y == 0: the job fails, and the waiting route says why
