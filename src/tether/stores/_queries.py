"""Named queries loaded from a store's ``.sql`` (or ``.lua``) files.

A ``.sql`` file holds blocks that each start with ``-- name: NAME``; the comment lines after it
say why the query is shaped so, and are kept in the text (the engines ignore them). Keeping SQL
out of Python means one place to read, review and ``EXPLAIN`` every statement.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split a .sql file into {name: statement}; text before the first name is ignored."""
    queries: dict[str, str] = {}
    marks = list(_NAME.finditer(text))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        name = mark.group(1)
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        body = text[mark.end() : end].strip()
        if not body:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = body
    return queries


def load(package: str, filename: str) -> dict[str, str]:
    """Load the named queries of ``filename`` shipped inside ``package``."""
    return parse(resources.files(package).joinpath(filename).read_text(encoding="utf-8"))


def read(package: str, filename: str) -> str:
    """The whole text of a resource file (a Lua script, a migration)."""
    return resources.files(package).joinpath(filename).read_text(encoding="utf-8")
