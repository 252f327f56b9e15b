"""The Django app: ``INSTALLED_APPS = [..., "tether.contrib.django"]``.

``ready`` checks ``settings.TETHER`` and imports the task modules it lists, so that web
processes and ``manage.py tether_worker`` register the same tasks, and a wrong setting fails
at start-up rather than at the first enqueue (a ``transaction = "connection"`` that cannot
work included).
"""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules

from tether.contrib.django.holder import get_app, get_config


class TetherConfig(AppConfig):  # type: ignore[misc]  # Django ships no type hints
    name = "tether.contrib.django"
    label = "tether"
    verbose_name = "Tether"
    default = True

    def ready(self) -> None:
        config = get_config()
        app = get_app()
        if config.transaction == "connection":
            from tether.contrib.django.producing import mode

            mode(app)  # where it cannot work, refuse now (ImproperlyConfigured), connecting nothing
        app.import_includes()
        if config.autodiscover:
            autodiscover_modules("tasks")
