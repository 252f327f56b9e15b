"""PostgreSQL array literals built as text, for the batch statements' parallel arrays.

psycopg dumps a Python list element by element through its Python-level dumpers: measured
0.66 us per element and column, 6.5 us a job for enqueue_many's ten columns, more than the
server spends inserting it (issue 23). Joining a literal is a few C-level string calls, and
the server parses it as fast as the binary form. Every value here was checked by
:mod:`tether._limits` first (ints are ints, floats finite, text free of NUL), so the only
thing to get right is the literal's own quoting: each text element in double quotes, with
backslash and double quote escaped by a backslash, NULL bare.
"""

from __future__ import annotations

from collections.abc import Iterable


def text_array(values: Iterable[str | None]) -> str:
    """``{"a","b\\"c",NULL}``: the statement casts it ``::text::text[]``."""
    return "{" + ",".join(["NULL" if v is None else _quoted(v) for v in values]) + "}"


def int_array(values: Iterable[int]) -> str:
    """``{1,-2}``; ``int()`` keeps an int subclass from spelling itself otherwise."""
    return "{" + ",".join([str(int(v)) for v in values]) + "}"


def float_array(values: Iterable[float | None]) -> str:
    """``{1.5,NULL}``: ``repr`` of a float is exact (it reads back as the same double)."""
    return "{" + ",".join(["NULL" if v is None else repr(float(v)) for v in values]) + "}"


def _quoted(value: str) -> str:
    if "\\" in value or '"' in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + value + '"'


__all__ = ["float_array", "int_array", "text_array"]
