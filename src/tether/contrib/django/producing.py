"""Enqueueing inside Django's transaction: the job commits or rolls back with the request.

Two ways, chosen per database alias (``settings.TETHER["transaction"]``, default ``auto``):

* **connection**: the job is written on Django's own psycopg 3 connection, inside the open
  transaction. It becomes visible when Django commits and vanishes if Django rolls back, with
  no window in between. Needs the PostgreSQL store on the same database as Django's.
* **on_commit**: the job is written by ``transaction.on_commit`` after Django commits (every
  other store). A rollback enqueues nothing, but a crash, or a store outage longer than the
  enqueue's retries (about a second), between Django's commit and the enqueue **loses the
  job**: the rows are committed and no job will ever run for them. The failure is logged at
  ERROR and raised out of the commit.

Outside a transaction (autocommit), both enqueue at once, with tether's usual retries.
Arguments are checked and encoded when ``enqueue`` is called in both ways, so a bad argument
raises in the view, never at commit time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction

from tether._app import App
from tether._jobid import JobId
from tether._task import OPTIONS, Host, Task
from tether.contrib.django.conf import is_postgres, same_database
from tether.contrib.django.holder import get_config
from tether.stores._contract import NewJob

log = logging.getLogger("tether.django")
P = ParamSpec("P")
R = TypeVar("R")


def enqueue(task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> JobId[R] | None:
    """Queue one job of ``task`` as part of the current transaction of Django's database.

    Keywords are split as :meth:`tether.Task.enqueue` splits them (``delay``, ``run_at``,
    ``priority``, ``unique_key``, ``queue`` are options at run time; ``conn`` is refused: this
    helper picks the connection). Returns the job id, or None when the job waits for the
    commit (``on_commit`` mode inside a transaction).
    """
    given: dict[str, Any] = dict(kwargs)
    options: dict[str, Any] = {k: given.pop(k) for k in OPTIONS & given.keys()}
    if "conn" in options:
        raise TypeError("tether.contrib.django.enqueue picks the connection itself; use "
                        "task.enqueue(..., conn=...) to choose one")
    clash = sorted(task.shadowed & options.keys())
    if clash:
        raise TypeError(f"{task.name} has a parameter named {', '.join(clash)}, which is "
                        "also an enqueue option: use tether.contrib.django.enqueue_with")
    return enqueue_with(task, args, given, **options)


def enqueue_with(
    task: Task[Any, R],
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    using: str | None = None,
    delay: float | None = None,
    run_at: float | datetime | None = None,
    priority: int | None = None,
    unique_key: str | None = None,
    queue: str | None = None,
) -> JobId[R] | None:
    """:func:`enqueue` with the task's arguments apart from the options (any argument name
    works); ``using`` is the Django database alias (default ``TETHER["database"]``)."""
    job = task.new_job(tuple(args), dict(kwargs or {}), delay=delay, run_at=run_at,
                       priority=priority, unique_key=unique_key, queue=queue)
    ids = submit(task.runtime, [job], using)
    return None if ids is None else JobId(ids[0])


def enqueue_many(
    task: Task[Any, R],
    calls: Iterable[tuple[Sequence[Any], dict[str, Any]]],
    *,
    using: str | None = None,
    delay: float | None = None,
    run_at: float | datetime | None = None,
    priority: int | None = None,
    queue: str | None = None,
) -> list[JobId[R]] | None:
    """Many jobs of ``task`` (``[(args, kwargs), ...]``) in one store round trip, joined to
    the transaction like :func:`enqueue`."""
    jobs = []
    for call in calls:
        if not (isinstance(call, tuple | list) and len(call) == 2):
            raise TypeError("enqueue_many takes (args, kwargs) pairs")
        args, kwargs = call
        jobs.append(task.new_job(tuple(args), dict(kwargs), delay=delay, run_at=run_at,
                                 priority=priority, queue=queue))
    ids = submit(task.runtime, jobs, using)
    return None if ids is None else [JobId(i) for i in ids]


def submit(runtime: Host, jobs: list[NewJob], using: str | None = None) -> list[int] | None:
    """Write checked jobs, through the runtime of their task, the way the alias's mode says
    (see the module docstring)."""
    alias = using or get_config().database
    conn = connections[alias]
    in_transaction = conn.in_atomic_block or (
        conn.connection is not None and not conn.get_autocommit())
    if not in_transaction:
        return runtime.enqueue_jobs(jobs)
    if _mode(runtime.url, alias) == "connection":
        conn.ensure_connection()
        return runtime.enqueue_jobs(jobs, conn=conn.connection)
    transaction.on_commit(functools.partial(_after_commit, runtime, jobs), using=alias)
    return None


def _after_commit(runtime: Host, jobs: list[NewJob]) -> None:
    try:
        runtime.enqueue_jobs(jobs)
    except Exception:
        log.error("the transaction committed but %d job(s) of %s could not be enqueued: "
                  "they are lost (see docs/django.md, on_commit mode)", len(jobs),
                  ", ".join(sorted({j.task for j in jobs})), exc_info=True)
        raise


def mode(app: App, alias: str | None = None) -> str:
    """``"connection"`` or ``"on_commit"``: how jobs join a transaction on ``alias``."""
    return _mode(app.runtime.url, alias or get_config().database)


@functools.cache
def _mode(url: str, alias: str) -> str:
    config = get_config()
    db = connections[alias].settings_dict
    postgres_store = urlsplit(url).scheme.lower() in ("postgresql", "postgres")
    possible = postgres_store and is_postgres(db) and _psycopg3()
    shared = (config.derived and alias == config.database) or same_database(url, db)
    if config.transaction == "on_commit":
        return "on_commit"
    if config.transaction == "connection":
        if not possible:
            raise ImproperlyConfigured(
                "settings.TETHER['transaction'] = 'connection' needs the PostgreSQL store and "
                f"DATABASES[{alias!r}] on PostgreSQL through psycopg 3")
        if not shared:
            # Django's connection would write the job into its own database, where no worker
            # of this store looks: the job would never run.
            raise ImproperlyConfigured(
                "settings.TETHER['transaction'] = 'connection' needs tether's store on "
                f"DATABASES[{alias!r}]'s database (same host, port and name); leave "
                "TETHER['url'] out to build it from DATABASES, or use 'on_commit'")
        return "connection"
    if possible and shared:
        return "connection"
    if postgres_store and shared:  # the same database, but Django's driver is not psycopg 3
        log.warning("DATABASES[%r] does not use psycopg 3, whose connection tether's store "
                    "writes on: jobs are enqueued after commit (on_commit), not in Django's "
                    "transaction (install psycopg 3 to have them commit together)", alias)
    elif postgres_store:
        log.warning("tether's PostgreSQL store is not DATABASES[%r]'s database: jobs are "
                    "enqueued after commit (on_commit), not in Django's transaction", alias)
    return "on_commit"


def _psycopg3() -> bool:
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


__all__ = ["enqueue", "enqueue_many", "enqueue_with", "mode", "submit"]
