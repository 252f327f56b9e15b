"""The Redis store. Importing this package imports redis-py, once, without OpenTelemetry's SDK.

Why: redis-py 8 (``redis/observability/providers.py``) runs ``from opentelemetry.sdk.metrics
import MeterProvider`` at import time whenever the SDK is installed, from every import path
(``redis/__init__`` imports the client, the client its observability attributes, those the
observability package and its providers). The name serves an annotation and a flag
(``OTEL_AVAILABLE``) that nothing reads; its import cost every Redis worker ~60 ms of CPU, an
eighth of its start to first job (issue #10). redis-py offers no setting to skip it.

So while redis-py is imported, that one SDK module is made unimportable (a ``None`` entry in
``sys.modules``, removed right after), redis-py takes its own ``ImportError`` branch, and the
flag is then set to what it would have been (the SDK is installed or not). Nothing else
changes: redis-py's metrics, when an application enables them, still import the OpenTelemetry
API lazily and use the application's meter provider. A program that imported the SDK already,
or imported redis-py first, is left as it is.
"""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.util import find_spec

_SDK = "opentelemetry.sdk.metrics"


def _import_redis() -> None:
    if "redis" in sys.modules or _SDK in sys.modules:
        import_module("redis")  # already imported, or the SDK is: nothing to save
        return
    sys.modules[_SDK] = None  # type: ignore[assignment]
    try:
        import_module("redis")
    finally:
        if sys.modules.get(_SDK, 0) is None:
            del sys.modules[_SDK]
    providers = sys.modules.get("redis.observability.providers")
    if providers is not None and hasattr(providers, "OTEL_AVAILABLE"):
        try:
            available = find_spec("opentelemetry.sdk") is not None
        except (ImportError, ValueError):
            available = False
        setattr(providers, "OTEL_AVAILABLE", available)  # noqa: B010 - not in its stubs


_import_redis()
