"""``tether.contrib.django.boot:app``: the MODULE:APP of a Django project's worker.

Importing this module sets Django up (``$DJANGO_SETTINGS_MODULE``) before anything else, so a
process that starts from nothing (a ``--pool process`` child, or ``tether worker
tether.contrib.django.boot:app``) can import task modules that use models.

Every sync task runs between two ``close_old_connections()`` calls, as Django does around a
request: a worker thread otherwise keeps its database connection forever, past
``CONN_MAX_AGE`` and past a database restart that broke it. Only the worker does this; a task
called inline in a view must not close the view's connection.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import django
from django.apps import apps
from django.db import close_old_connections

if not apps.ready:
    django.setup()

from tether._task import Task
from tether.contrib.django.holder import get_app

app = get_app()


def with_fresh_connections(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    run.__tether_fresh_connections__ = True  # type: ignore[attr-defined]
    return run


def wrap_tasks(tasks: dict[str, Task[Any, Any]]) -> None:
    for task in tasks.values():
        if not task.is_async and not getattr(task.func, "__tether_fresh_connections__", False):
            task.func = with_fresh_connections(task.func)


wrap_tasks(app.runtime.registry.tasks)
