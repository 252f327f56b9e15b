"""Tasks of the project, in a module the app module does not import."""

from __future__ import annotations

import os
from datetime import date, timedelta

from tests.api.proj.core import app


@app.task(name="proj.double", queue="proj")
def double(n: int) -> dict[str, int]:
    return {"double": 2 * n, "pid": os.getpid()}


@app.task(name="proj.next_day", queue="proj")
def next_day(day: date) -> date:
    return day + timedelta(days=1)
