"""The project's one :class:`tether.App`, made from ``settings.TETHER`` on first use.

Why lazily: task modules say ``from tether.contrib.django import app`` at import time, which
can be before Django's app registry is ready (settings are readable by then; models are not).
Making the App opens nothing: its store is opened on the first enqueue or by the worker.
"""

from __future__ import annotations

import os
import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tether._app import App
from tether._errors import ConfigError
from tether.contrib.django.conf import Config, SettingsError, read


class _Made:
    """What this process made from the settings (one of each, made once)."""

    lock = threading.Lock()
    config: Config | None = None
    app: App | None = None


def get_config() -> Config:
    """``settings.TETHER`` checked (ImproperlyConfigured names what is wrong)."""
    if _Made.config is None:
        try:
            _Made.config = read(getattr(settings, "TETHER", None),
                                getattr(settings, "TETHER_URL", None), settings.DATABASES,
                                os.environ)
        except SettingsError as exc:
            raise ImproperlyConfigured(f"settings.TETHER: {exc}") from None
    return _Made.config


def get_app() -> App:
    """The project's App (made once per process, thread-safe)."""
    if _Made.app is None:
        with _Made.lock:
            if _Made.app is None:
                config = get_config()
                try:
                    _Made.app = App(config.url, include=config.include, **config.options)
                except ConfigError as exc:
                    raise ImproperlyConfigured(f"settings.TETHER: {exc}") from None
    return _Made.app


__all__ = ["get_app", "get_config"]
