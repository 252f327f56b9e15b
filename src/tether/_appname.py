"""How an App is named: the ``MODULE:APP`` form, and finding the name of a loaded App.

A process-pool child is a fresh interpreter: it inherits nothing from its worker and nothing is
pickled to it, so it imports the app by name. The worker must therefore know that name: ``tether
worker MODULE:APP`` has it; ``app.run_worker(pool="process")`` derives it from the module the App
object lives in, or takes ``app_spec=``. Loading an app by its name is
:func:`tether._appspec.load_app` (which imports ``tether._app``; this module must not, as
the worker imports it and ``tether._app`` imports the worker).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tether._errors import ConfigError

if TYPE_CHECKING:
    from tether._app import App


def check_spec(spec: object) -> str:
    """The spec itself when it has the form ``module.path:attribute``; ConfigError otherwise."""
    if not isinstance(spec, str):
        raise ConfigError(f"expected MODULE:APP (e.g. myproject.jobs:app), got {spec!r}")
    module_name, _, attr = spec.partition(":")
    parts = module_name.split(".")
    if not attr.isidentifier() or not all(p.isidentifier() for p in parts):
        raise ConfigError(f"expected MODULE:APP (e.g. myproject.jobs:app), got {spec!r}")
    return spec


def derive_spec(app: App) -> str:
    """``module:attribute`` of a loaded module that holds ``app`` at its top level.

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
            if value is not app or not attr.isidentifier():
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
