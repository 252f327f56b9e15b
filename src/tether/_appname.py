"""How an App is named: the ``MODULE:APP`` form, and finding the name of a loaded App.

A process-pool child is a fresh interpreter: it inherits nothing from its worker and nothing is
pickled to it, so it imports the app by name. The worker must therefore know that name: ``tether
worker MODULE:APP`` has it; ``app.run_worker(pool="process")`` derives it from the module the App
object lives in, or takes ``app_spec=``. Loading an app by its name is
:func:`tether._appspec.load_app` (which imports ``tether._app``; this module must not, as
the worker imports it and ``tether._app`` imports the worker). The worker holds the app's
runtime, not the app: the app is found as the object whose ``runtime`` is that runtime.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING

from tether._errors import ConfigError
from tether._task import Task

if TYPE_CHECKING:
    from tether._runtime import Runtime


def check_spec(spec: object) -> str:
    """The spec itself when it has the form ``module.path:attribute``; ConfigError otherwise."""
    if not isinstance(spec, str):
        raise ConfigError(f"expected MODULE:APP (e.g. myproject.jobs:app), got {spec!r}")
    module_name, _, attr = spec.partition(":")
    parts = module_name.split(".")
    if not attr.isidentifier() or not all(p.isidentifier() for p in parts):
        raise ConfigError(f"expected MODULE:APP (e.g. myproject.jobs:app), got {spec!r}")
    return spec


def derive_spec(runtime: Runtime) -> str:
    """``module:attribute`` of a loaded module that holds, at its top level, the App whose
    ``runtime`` this is (a task holds it too, and is not what a child loads).

    A script's ``__main__`` only counts when it was started with ``python -m package.module``
    (the child can import that name; the module's ``if __name__ == "__main__"`` block does not
    run there). An App made inside a function, or in a plain script, has no importable name.
    """
    named: list[str] = []
    for name, module in list(sys.modules.items()):
        if module is None or name == "__mp_main__":
            continue
        try:
            namespace = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in namespace:
            if not attr.isidentifier() or not _holds(value, runtime):
                continue
            importable = name
            if name == "__main__":
                importable = getattr(getattr(module, "__spec__", None), "name", None) or name
                if importable == "__main__":
                    continue
            named.append(f"{importable}:{attr}")
    if not named:
        raise ConfigError(
            "pool='process' needs to import this App by name in each child process, and it is "
            "not held by any importable module (it was made inside a function, or in a script "
            "run as a file). Assign it to a module-level name in an importable module, or pass "
            "app_spec='package.module:app'")
    return sorted(set(named), key=lambda s: (s.count("."), s))[0]


def _holds(value: object, runtime: Runtime) -> bool:
    """Whether ``value`` is the App of ``runtime``: an object (not a module, not a task)
    whose own ``runtime`` attribute it is, read from its ``__dict__`` so that the search
    wakes up no module-level proxy or lazy object."""
    try:
        own = getattr(value, "__dict__", None)
    except Exception:  # a proxy that cannot even say what it holds is not the app
        return False
    # isinstance only now: on a lazy object it would ask ``__class__``, which wakes it up
    return isinstance(own, dict) and own.get("runtime") is runtime \
        and not isinstance(value, ModuleType | Task)
