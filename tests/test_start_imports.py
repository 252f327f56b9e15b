"""What a worker imports before its first job (issue #10: worker start to first job < 0.5 s).

Import time is most of a worker's start (``python -X importtime``): these tests pin that the
modules a worker needs do not drag in what it does not: pydantic (~60 ms; the codec looks it
up only once the program imported it) and OpenTelemetry's metrics SDK, which redis-py 8 imports
for an annotation (~60 ms; see tether.stores._redis). Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


def _loaded(code: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=60, check=True)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("store", ["sqlite", "postgres", "redis"])
def test_a_worker_with_its_store_imports_neither_pydantic_nor_the_otel_sdk(store: str) -> None:
    loaded = _loaded(f"""
        import json, sys
        import tether._cli.main, tether._cli.run, tether.stores._{store}.store
        print(json.dumps({{"pydantic": "pydantic" in sys.modules,
                          "sdk": "opentelemetry.sdk.metrics" in sys.modules}}))
    """)
    assert loaded == {"pydantic": False, "sdk": False}


def test_pydantic_models_still_travel_once_the_program_imported_pydantic() -> None:
    pytest.importorskip("pydantic")
    loaded = _loaded("""
        import json
        from tether._codec import JSONCodec
        codec = JSONCodec()  # made before pydantic is imported, as the default codec is
        from pydantic import BaseModel

        class Point(BaseModel):
            x: int

        back = codec.decode(codec.encode(Point(x=3)), Point)
        print(json.dumps({"encoded": codec.encode(Point(x=3)), "back": type(back).__name__,
                          "x": back.x}))
    """)
    assert loaded == {"encoded": {"x": 3}, "back": "Point", "x": 3}


def test_redis_py_is_whole_after_the_import_without_the_sdk() -> None:
    """The SDK stays importable afterwards, and redis-py's flag says whether it is installed."""
    loaded = _loaded("""
        import json, sys
        from importlib.util import find_spec
        import tether.stores._redis.store
        import redis
        from redis.observability import providers
        installed = find_spec("opentelemetry.sdk") is not None
        if installed:
            import opentelemetry.sdk.metrics  # must not be left blocked
        print(json.dumps({"flag_right": providers.OTEL_AVAILABLE == installed,
                          "client": hasattr(redis, "Redis"),
                          "sdk_importable": not installed or
                              sys.modules.get("opentelemetry.sdk.metrics") is not None}))
    """)
    assert loaded == {"flag_right": True, "client": True, "sdk_importable": True}
