"""The store's named SQL statements, bound to one schema.

The ``.sql`` files hold templates in which ``{schema}`` stands for the store's schema. It is
formatted in once per store, with :mod:`psycopg.sql` (quoted as an identifier), so every
statement names tether's tables explicitly and none depends on the connection's
``search_path``: a connection shared with the user (``conn=``, ``transaction()``) keeps the
user's own path, and user tables resolve exactly as in the user's code.

The bound statements are also stripped of their comments and runs of whitespace (quoted text
kept as it is): psycopg rewrites every ``%(name)s`` statement into its ``$n`` form at each
execute, with a regular expression over the whole text, and caches the rewrite only for
statements up to 4096 bytes. ``finish`` (8 KB with its comments) was rewritten on every call,
about 150-400 us of the completer's CPU per batch (issue #23); stripped it is cached.
"""

from __future__ import annotations

import functools
import re

from psycopg import sql

from tether.stores import _queries as named

PACKAGE = "tether.stores._postgres"
FILES = ("queries.sql", "flow.sql", "producers.sql", "admin.sql", "ops.sql", "aio.sql",
         "schedules.sql", "identity.sql", "workflows.sql", "liveness.sql")


def _load() -> dict[str, str]:
    merged: dict[str, str] = {}
    for filename in FILES:
        for name, text in named.load(PACKAGE, filename).items():
            if name in merged:
                raise ValueError(f"query {name!r} is defined in two files")
            merged[name] = text
    return merged


#: The templates, with ``{schema}`` unformatted (for linting and EXPLAIN tests).
TEMPLATES: dict[str, str] = _load()


#: One token of a statement: a quoted literal or identifier (kept as is, '' and "" escapes
#: included), a line comment, a run of whitespace, or any other character. The .sql files use
#: no E'' strings, dollar quotes or block comments (test_statements checks).
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|\s+|[^'\"\s-]+|.", re.DOTALL)


def minified(text: str) -> str:
    """``text`` without its comments, each run of whitespace one space: what the server
    parses is unchanged, and psycopg's rewrite of it is cached (see above)."""
    out: list[str] = []
    for token in _TOKEN.findall(text):
        if token.startswith("--") or token.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(token)
    return "".join(out).strip()


@functools.cache
def _minified_templates() -> dict[str, str]:
    """The templates minified, once per process (every store opened formats these)."""
    return {name: minified(text) for name, text in TEMPLATES.items()}


def for_schema(schema: str) -> dict[str, str]:
    """Every statement, minified, with ``{schema}`` replaced by the quoted schema name."""
    ident = sql.Identifier(schema)
    return {name: sql.SQL(text).format(schema=ident).as_string(None)
            for name, text in _minified_templates().items()}


__all__ = ["TEMPLATES", "for_schema", "minified"]
