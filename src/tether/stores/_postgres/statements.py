"""The store's named SQL statements, bound to one schema.

The ``.sql`` files hold templates in which ``{schema}`` stands for the store's schema. It is
formatted in once per store, with :mod:`psycopg.sql` (quoted as an identifier), so every
statement names tether's tables explicitly and none depends on the connection's
``search_path``: a connection shared with the user (``conn=``, ``transaction()``) keeps the
user's own path, and user tables resolve exactly as in the user's code.
"""

from __future__ import annotations

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


def for_schema(schema: str) -> dict[str, str]:
    """Every statement with ``{schema}`` replaced by the quoted schema name."""
    ident = sql.Identifier(schema)
    return {name: sql.SQL(text).format(schema=ident).as_string(None)
            for name, text in TEMPLATES.items()}


__all__ = ["TEMPLATES", "for_schema"]
