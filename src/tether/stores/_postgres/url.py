"""PostgreSQL URLs: what libpq gets, and tether's own parameters taken out of it.

Every URI form libpq (and psql) accepts is passed on as written: an empty host with the
socket directory in ``?host=`` (``postgresql:///db?host=/var/run/postgresql``), a
percent-encoded socket path as the host (``postgresql://%2Fvar%2Frun%2Fpostgresql/db``),
several hosts (``h1:5432,h2:5433``), IPv6 literals (``[::1]``), the ``postgres://`` scheme and
libpq's query parameters. Tether's own parameters (``schema`` here; each option's module
takes its own with :func:`tether.stores._urls.take_param`) are taken out byte for byte, so
nothing else in the URL changes on the way.
"""

from __future__ import annotations

import re

from tether._errors import ConfigError
from tether.stores._urls import hint, redact, take_param

DEFAULT_SCHEMA = "tether"
# A schema name must also leave room for the "_jobs" NOTIFY channel within NAMEDATALEN (63).
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,57}$")
# PostgreSQL's own schemas: tables created there are lost in the catalog or refused.
_SYSTEM = re.compile(r"^(pg_.*|information_schema)$", re.IGNORECASE)

__all__ = ["DEFAULT_SCHEMA", "split_url"]


def split_url(url: str) -> tuple[str, str]:
    """(DSN for psycopg without tether's own ``schema`` parameter, validated schema name)."""
    if url.partition(":")[0].lower() not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL: {redact(url)!r}{hint(url)}")
    dsn, given = take_param(url, "schema")
    schema = DEFAULT_SCHEMA if given is None else given
    if not _IDENT.match(schema):
        raise ConfigError(
            f"invalid schema name {schema!r} in {redact(url)!r}: use letters, digits and "
            "underscores (at most 58 characters, not starting with a digit)"
        )
    if _SYSTEM.match(schema):
        raise ConfigError(
            f"schema {schema!r} in {redact(url)!r} is PostgreSQL's own (pg_* and "
            "information_schema are reserved): choose a schema of your own, e.g. schema=tether"
        )
    return dsn, schema
