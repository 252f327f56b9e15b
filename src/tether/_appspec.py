"""``MODULE:APP`` specs: how a process finds the App it serves (see
:mod:`tether._appname` for the form and for naming a loaded App)."""

from __future__ import annotations

import importlib
import os
import sys

from tether._app import App
from tether._appname import check_spec, derive_spec
from tether._errors import ConfigError
from tether._runtime import Runtime

__all__ = ["check_spec", "derive_spec", "load_app", "load_runtime"]


def _load(spec: str) -> object:
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
    return getattr(module, attr, None)


def load_app(spec: str) -> App:
    """The App that ``module:attribute`` names."""
    app = _load(spec)
    if not isinstance(app, App):
        raise ConfigError(f"{spec!r} is not a tether.App (got {type(app).__name__})")
    return app


def load_runtime(spec: str) -> Runtime:
    """The runtime of the App that ``module:attribute`` names (what a process-pool child
    runs jobs with: it takes ``obj.runtime``, whatever holds it)."""
    app = _load(spec)
    runtime = getattr(app, "runtime", None)
    if not isinstance(runtime, Runtime):
        raise ConfigError(f"{spec!r} is not a tether.App (got {type(app).__name__})")
    return runtime
