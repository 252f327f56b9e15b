"""``tether dashboard``: the command; the app itself lives in :mod:`tether.dashboard` (an
optional extra, imported only when the command runs)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from tether._cli import common as c
from tether._errors import ConfigError
from tether._install import install_hint


def cmd_dashboard(args: argparse.Namespace) -> int:
    try:
        from tether.dashboard._server import run
    except ImportError as exc:
        raise ConfigError(f"the dashboard needs {install_hint('dashboard')} ({exc})") from None
    t = c.target(args)
    token = args.token or os.environ.get("TETHER_DASHBOARD_TOKEN") or None
    basic = args.basic_auth or os.environ.get("TETHER_DASHBOARD_BASIC_AUTH") or None
    if basic is not None and ":" not in basic:
        raise ConfigError("--basic-auth must be USER:PASSWORD")
    if args.host not in ("127.0.0.1", "localhost", "::1") and not (token or basic):
        raise ConfigError(f"--host {args.host} exposes the dashboard beyond this machine: "
                          "give --token or --basic-auth as well")
    from tether._flowview import declared

    limits = None if t.runtime is None else declared(t.runtime.registry)
    code: int = run(t.url, settings=t.settings, host=args.host, port=args.port,
                    read_only=args.read_only, token=token, basic=basic, limits=limits)
    return code


def add_dashboard(add: Callable[..., argparse.ArgumentParser]) -> Any:
    p = add("dashboard", cmd_dashboard, "serve the web dashboard (needs the dashboard extra)",
            "tether dashboard --app myproject.jobs:app --port 8080")
    p.add_argument("--url", default=None,
                   help="store URL (default: the app's, else $TETHER_URL)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind")
    p.add_argument("--port", type=c.port, default=8080, help="port to bind")
    p.add_argument("--read-only", action="store_true",
                   help="show everything, change nothing (no action buttons, POSTs refused)")
    p.add_argument("--token", default=None,
                   help="require this bearer token (or ?token=) (default: "
                   "$TETHER_DASHBOARD_TOKEN)")
    p.add_argument("--basic-auth", default=None, metavar="USER:PASSWORD",
                   help="require HTTP basic auth (default: $TETHER_DASHBOARD_BASIC_AUTH)")
    return p
