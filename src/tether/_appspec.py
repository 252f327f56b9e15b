"""``MODULE:APP`` specs: how a process finds the App it serves (see
:mod:`tether._appname` for the form and for naming a loaded App)."""

from __future__ import annotations

import importlib
import os
import sys

from tether._app import App
from tether._appname import check_spec, derive_spec
from tether._errors import ConfigError

__all__ = ["check_spec", "derive_spec", "load_app"]


def load_app(spec: str) -> App:
    """Import ``module:attribute`` (the current directory is importable, like ``python -m``)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"expected MODULE:APP (e.g. myproject.jobs:app), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name!r}: {exc}") from exc
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise ConfigError(f"{spec!r} is not a tether.App (got {type(app).__name__})")
    return app
