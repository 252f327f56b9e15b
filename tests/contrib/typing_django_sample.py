"""Checked by mypy in tests/contrib/test_django_typing.py (never imported by pytest)."""

from __future__ import annotations

from typing import reveal_type

import tether
from tether.contrib.django import enqueue, enqueue_many, enqueue_with

app = tether.App("sqlite:///never-opened.db")


@app.task
def add(a: int, b: int) -> int:
    return a + b


reveal_type(enqueue(add, 1, 2))
reveal_type(enqueue_with(add, (1, 2), delay=5))
reveal_type(enqueue_many(add, [((1, 2), {})]))
enqueue(add, "not", "ints")
enqueue_with(add, (1, 2), delay="soon")
