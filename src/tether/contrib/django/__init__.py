"""Django integration: settings, ``manage.py tether_worker``, enqueue in Django's transaction.

``INSTALLED_APPS += ["tether.contrib.django"]``, ``settings.TETHER = {"url": ...,
"include": ["shop.tasks"], ...}``, then in ``shop/tasks.py``::

    from tether.contrib.django import app

    @app.task
    def send_receipt(order_id: int) -> None: ...

and in a view ``tether.contrib.django.enqueue(send_receipt, order.id)``. See docs/django.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.contrib.django.completing import atomic_job
from tether.contrib.django.holder import get_app, get_config
from tether.contrib.django.producing import enqueue, enqueue_many, enqueue_with, mode

if TYPE_CHECKING:
    from tether._app import App

    app: App


def __getattr__(name: str) -> object:
    """``app``: the project's App, made from the settings on first use (see holder)."""
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "atomic_job", "enqueue", "enqueue_many", "enqueue_with", "get_app", "get_config",
           "mode"]
