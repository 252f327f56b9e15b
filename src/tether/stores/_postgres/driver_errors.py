"""Every psycopg failure, turned into tether's error tree in one place.

Invariant: no store method lets a driver exception out. What the caller may retry (the server
or the network may be back, the next connection may reach a writable node) is
:class:`StoreUnavailable`; everything else is :class:`StoreError`, so a producer that retries
on StoreUnavailable never loops forever on a value that can never be stored. The SQLSTATE
decides, not psycopg's exception class: psycopg files "index row size exceeds maximum"
(54000) and "integer out of range" (22003) under classes a caller would read as transient.

Transient SQLSTATEs: class 08 (connection), 25006 (read-only transaction: a standby after a
failover), class 40 (serialization failure, deadlock), class 53 (insufficient resources),
57P* (admin/crash shutdown, cannot connect now), class 58 (system/IO error), plus 57014
(statement timeout / cancel) and 55P03 (lock timeout): the same statement may well succeed
when tried again. Without a SQLSTATE (the client side: a dropped socket, a pool with no free
connection) OperationalError and InterfaceError are transient, anything else is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tether._errors import SchemaError, StoreError, StoreUnavailable

_TRANSIENT_CLASSES = ("08", "40", "53", "58")
_TRANSIENT_STATES = frozenset({"25006", "57014", "55P03"})
# Our tables, columns or schema are not there (yet): the schema is missing or older than the
# code (42P01 undefined table, 3F000 no such schema, 42703 undefined column, 42883 undefined
# function: a migration adds each of them).
_SCHEMA_STATES = frozenset({"42P01", "3F000", "42703", "42883"})
# psycopg's own prepared statement (``_pg3_N``) already exists / does not exist: another
# client's, on a server connection a transaction pooler lent us (issue 18, A).
_PREPARED_STATES = frozenset({"42P05", "26000"})
_POOLER_HINT = (" (behind a transaction pooler such as PgBouncer in pool_mode = transaction? "
                "add pooler=transaction to the store URL: see docs/deploying.md#pgbouncer)")


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def is_transient(exc: BaseException) -> bool:
    state = getattr(exc, "sqlstate", None)
    if state:
        return (state[:2] in _TRANSIENT_CLASSES or state in _TRANSIENT_STATES
                or state.startswith("57P"))
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def translate(exc: BaseException) -> StoreError:
    """The tether error for a driver failure (its ``__cause__`` is set by the raiser)."""
    state = getattr(exc, "sqlstate", None)
    if state in _SCHEMA_STATES:
        return SchemaError(
            f"tether tables are missing or out of date ({one_line(exc)}): run `tether migrate`"
        )
    tag = f" [SQLSTATE {state}]" if state else ""
    if state in _PREPARED_STATES and '"_pg3_' in str(exc):
        tag += _POOLER_HINT
    if is_transient(exc):
        return StoreUnavailable(f"PostgreSQL unavailable: {one_line(exc)}{tag}")
    return StoreError(f"PostgreSQL error: {one_line(exc)}{tag}")


@contextmanager
def mapped() -> Iterator[None]:
    """Translate driver exceptions raised inside the block; tether's own pass through."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from exc
    except UnicodeError as exc:  # a lone surrogate psycopg cannot encode (say, in a queue name)
        raise StoreError(f"PostgreSQL error: text that cannot be sent ({one_line(exc)})") from exc


__all__ = ["is_transient", "mapped", "one_line", "translate"]
