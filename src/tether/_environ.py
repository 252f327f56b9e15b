"""The ``TETHER_*`` environment variables tether reads, in one place, and the warnings about
where a process's store came from.

Why: a mistyped variable (``TETHER_ULR=...``) or a process started without ``TETHER_URL``
used to fall back silently to ``./tether.db``: a worker served an empty SQLite file while the
real queue grew, and a producer enqueued where no worker looked. Both are now a WARNING: an
unknown ``TETHER_*`` name (with the closest known one), and the implicit default store
(naming the file and how to choose the store). ``tether demo`` always names its store;
:mod:`tether.testing`'s pytest plugin turns the default-store warning off (a test process
is where the default is expected).
"""

from __future__ import annotations

import difflib
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("tether.config")

#: Every variable tether reads, and what it is for (docs/deploying.md lists them too).
KNOWN: dict[str, str] = {
    "TETHER_URL": "the store URL",
    "TETHER_APP": "MODULE:APP for the tether command",
    "TETHER_TOKEN": "the token for a tether:// store URL that holds none",
    "TETHER_LOG_LEVEL": "the tether command's log level",
    "TETHER_LOG_FORMAT": "text or json",
    "TETHER_DASHBOARD_TOKEN": "the dashboard's bearer token",
    "TETHER_DASHBOARD_BASIC_AUTH": "the dashboard's user:password",
    "TETHER_DEMO_DIR": "tether demo's folder (set by tether demo)",
    "TETHER_DEMO_LEASE_TTL": "tether demo's lease_ttl (set by tether demo)",
    "TETHER_POOL_CHILD": "marks a process-pool child (set by the worker)",
}
#: Prefixes of variables that belong to tether's own test suite and benchmarks, not to tether.
OWN_PREFIXES = ("TETHER_TEST_", "TETHER_BENCH_")

_lock = threading.Lock()
_checked: set[str] = set()  # {"environ"} once the environment was checked
_defaults_said: set[str] = set()
#: False inside a test process (the pytest plugin sets it): the default store is expected there.
warn_default_store = True


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """(name, the closest known name or None) for each ``TETHER_*`` variable tether does not
    read."""
    found = []
    for name in sorted(environ):
        if not name.startswith("TETHER_") or name in KNOWN or name.startswith(OWN_PREFIXES):
            continue
        close = difflib.get_close_matches(name, list(KNOWN), n=1, cutoff=0.6)
        found.append((name, close[0] if close else None))
    return found


def check_environ(environ: Mapping[str, str] | None = None) -> None:
    """Warn once per process about each unknown ``TETHER_*`` variable."""
    with _lock:
        if "environ" in _checked and environ is None:
            return
        _checked.add("environ")
    for name, close in unknown_variables(os.environ if environ is None else environ):
        hint = f"; did you mean {close}?" if close else ""
        log.warning("unknown environment variable %s: tether does not read it%s (known: %s)",
                    name, hint, ", ".join(KNOWN))


def default_store_used(path: str) -> None:
    """Warn (once per process and file) that no store was named and ``path`` is used."""
    if not warn_default_store:
        return
    where = str(Path(path).resolve())
    with _lock:
        if where in _defaults_said:
            return
        _defaults_said.add(where)
    log.warning("no store URL given: using the default store, the SQLite file %s "
                "(TETHER_URL is not set). Set TETHER_URL (or App(url=...), or --url) to "
                "the store your workers and producers share", where)
