"""``atomic_job()``: a task's database writes and its job's completion in one Django commit.

Invariant (``connection`` mode, see :mod:`producing`): the fenced completion of the running
attempt is written on Django's connection inside the block's transaction, so the writes and
the job's ``done`` commit together or not at all. A lease lost meanwhile (the job reaped and
perhaps running elsewhere) makes the fence refuse the completion: LeaseLost is raised inside
the block and the writes roll back, so they happen exactly once across all attempts.

In ``on_commit`` mode (no shared database) the block is a plain ``transaction.atomic()`` and
the job completes as usual after the handler returns: at least once, like any task.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction

from tether._context import current_job
from tether._errors import ConfigError, LeaseLost
from tether.contrib.django.holder import get_app, get_config
from tether.contrib.django.producing import mode
from tether.stores._contract import Outcome, transactional_finish


@contextmanager
def atomic_job(using: str | None = None) -> Iterator[bool]:
    """``with atomic_job():`` inside a task: Django's ``transaction.atomic(durable=True)`` that
    also completes the running job (yields True when it does, False in ``on_commit`` mode).
    Durable because only an outermost block really commits. The handler's return value is not
    stored when the block completed the job."""
    ctx = current_job()
    app = get_app()
    alias = using or get_config().database
    joined = mode(app, alias) == "connection"
    with transaction.atomic(using=alias, durable=True):
        yield joined
        if joined:
            store = transactional_finish(app.store)
            if store is None:  # "connection" mode is only chosen for the PostgreSQL store
                raise ConfigError(f"the {app.store.kind} store has no transactional completion")
            rejected = store.finish(
                [Outcome(ctx.lease, "done")], conn=connections[alias].connection)
            if rejected:
                raise LeaseLost(ctx.id, ctx.attempt, "completion in Django's transaction")
    if joined:
        ctx.completed_in_transaction = True


__all__ = ["atomic_job"]
