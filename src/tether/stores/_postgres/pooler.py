"""Tether's ``pooler`` and ``direct`` URL options: running behind PgBouncer (issue 18, A).

A transaction pooler (PgBouncer ``pool_mode = transaction``) hands each transaction to any
server connection, so nothing may outlive one transaction: server-side prepared statements
(psycopg's ``prepare_threshold``) collide across clients ("prepared statement "_pg3_0" already
exists"), and a LISTEN or a session advisory lock lands on a server connection that the next
client gets. ``?pooler=transaction`` therefore turns prepared statements off, and wake-ups go
either through ``direct=host[:port][/dbname]`` (a session connection straight to the
PostgreSQL server, which LISTENs and holds the gates' shared advisory locks exactly as in
session mode) or, without it, by polling (:mod:`poll`). Transaction-scoped advisory locks (the
enqueue/finish gates' ``pg_try_advisory_xact_lock``, migrate's ``pg_advisory_xact_lock``) and
``SET LOCAL`` end with their transaction, so they stay correct through the pooler.

``pooler=session`` (the default) is today's behaviour: a session pooler keeps one server
connection per client connection, so everything works through it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tether._errors import ConfigError
from tether.stores._urls import redact, take_param

log = logging.getLogger("tether.store.postgres")

MODES = ("session", "transaction")
#: Without a direct connection, how long an idle worker waits between claims (:mod:`poll`):
#: the pick-up bound behind a transaction pooler (measured: docs/deploying.md).
JOBS_POLL = 0.25
#: ... and how often ``wait_for_finish`` reads its jobs' status there.
FINISH_POLL = 0.1
#: (redacted URL, description) pairs already logged by this process: a worker opens one store
#: per thread, and the mode is said once.
_said: set[tuple[str, str]] = set()
_said_lock = threading.Lock()


@dataclass(frozen=True)
class Pooler:
    """How the store reaches PostgreSQL: ``mode`` is ``session`` or ``transaction``;
    ``direct`` the libpq conninfo of the direct session connection for LISTEN (or None);
    ``given``: the URL named a mode (only then is it logged at INFO)."""

    mode: str = "session"
    direct: str | None = field(default=None, repr=False)  # carries the password
    direct_shown: str | None = None
    given: bool = False

    @property
    def transaction(self) -> bool:
        return self.mode == "transaction"

    @property
    def polls(self) -> bool:
        """Wake-ups by polling: a transaction pooler and no direct connection to LISTEN on."""
        return self.transaction and self.direct is None

    def describe(self) -> str:
        if not self.transaction:
            return ("pooler=session: prepared statements on, LISTEN/NOTIFY wake-ups and "
                    "advisory-lock gates on the pooled connections")
        if self.direct is not None:
            return (f"pooler=transaction: no prepared statements, no session state through "
                    f"the pooler; LISTEN/NOTIFY wake-ups on a direct connection to "
                    f"{self.direct_shown}")
        return (f"pooler=transaction: no prepared statements, no session state; no direct= "
                f"connection for LISTEN, so idle workers poll every {JOBS_POLL:g}s "
                f"(pick-up within about that)")


def take_pooler(dsn: str, url: str) -> tuple[str, Pooler]:
    """(``dsn`` without tether's ``pooler`` and ``direct`` parameters, the :class:`Pooler`)."""
    dsn, mode = take_param(dsn, "pooler")
    dsn, direct = take_param(dsn, "direct")
    given = mode is not None
    mode = "session" if mode is None else mode.strip().lower()
    if mode not in MODES:
        raise ConfigError(f"unknown pooler {mode!r} in {redact(url)!r}: use pooler=session "
                          "(the default; also no pooler) or pooler=transaction (PgBouncer's "
                          "pool_mode = transaction)")
    if direct is None:
        return dsn, Pooler(mode, given=given)
    if mode != "transaction":
        raise ConfigError(f"direct= in {redact(url)!r} is for pooler=transaction only: in "
                          "session mode LISTEN works through the pooler")
    return dsn, Pooler(mode, _direct_conninfo(dsn, direct, url), direct, given=given)


def _direct_conninfo(dsn: str, direct: str, url: str) -> str:
    """The pooled DSN with host, port (and dbname, when given) replaced: user, password and
    TLS settings stay the same, only where to connect changes."""
    where, _, dbname = direct.partition("/")
    if where.startswith("["):  # [v6]:port
        host, _, rest = where[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = where.rpartition(":") if where.count(":") == 1 else (where, "", "")
    if not host or (port and not port.isdigit()):
        raise ConfigError(f"direct={direct!r} in {redact(url)!r}: give the PostgreSQL server "
                          "as host, host:port or host:port/dbname (it bypasses the pooler)")
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ConfigError(f"invalid PostgreSQL URL {redact(url)!r}: cannot derive the direct= "
                          "connection from it") from exc
    params.pop("hostaddr", None)
    params["host"] = host
    params["port"] = port or "5432"
    if dbname:
        params["dbname"] = dbname
    return make_conninfo("", **params)


def announce(pooler: Pooler, url: str) -> None:
    """Say once per process and URL which mode is in effect: INFO when the URL chose one
    (a wake-up path that polls must never be silent), DEBUG for the implicit default."""
    line = pooler.describe()
    key = (redact(url), line)
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    log.log(logging.INFO if pooler.given else logging.DEBUG, "PostgreSQL %s", line)


__all__ = ["FINISH_POLL", "JOBS_POLL", "MODES", "Pooler", "announce", "take_pooler"]
