"""Every named PostgreSQL query is well-formed for psycopg: its only ``%`` are placeholders.

A bare ``%`` (say, in a comment) makes psycopg refuse the statement at run time, inside a
worker's hot path; this catches it before anything runs.
"""

from __future__ import annotations

import re

import pytest

from tether.stores._postgres.store import QUERIES

_BARE = re.compile(r"%(?!\(\w+\)s|%)")


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_no_bare_percent(name: str) -> None:
    bad = [line for line in QUERIES[name].splitlines() if _BARE.search(line)]
    assert not bad, f"{name}: bare % in {bad}"


def test_queries_have_a_why_comment() -> None:
    missing = [name for name, text in QUERIES.items() if not text.lstrip().startswith("--")]
    assert not missing, f"queries without a comment saying why they are shaped so: {missing}"
