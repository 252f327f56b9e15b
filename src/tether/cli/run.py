"""Long-running commands: ``tether worker`` and ``tether reaper``."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import socket
import sys
import uuid
from typing import Any

from tether import limits
from tether.app import App
from tether.config import make_settings
from tether.errors import ConfigError
from tether.events import Events
from tether.logs import configure, worker_banner
from tether.maintenance.maintainer import Maintainer
from tether.worker.shutdown import Shutdown

log = logging.getLogger("tether.cli")


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


def cmd_worker(args: argparse.Namespace) -> int:
    spec = args.target_app or args.app or os.environ.get("TETHER_APP")
    if not spec:
        raise ConfigError("tether worker needs the app: tether worker MODULE:APP (or --app, "
                          "or $TETHER_APP)")
    app = load_app(spec)
    if args.url:
        app.url = args.url
    if not args.log_format_given and not os.environ.get("TETHER_LOG_FORMAT") and \
            app.settings.log_format:
        configure(args.log_level, app.settings.log_format)
    queues = [q.strip() for part in args.queues for q in part.split(",")] \
        if args.queues else None
    try:
        for q in queues or ():
            limits.check_text(q, "queue", limit=limits.MAX_NAME)
    except ValueError as exc:
        raise ConfigError(f"--queues: {exc}") from None
    app.store.check_schema()
    worker = app.worker(concurrency=args.concurrency, queues=queues,
                        maintenance=not args.no_maintenance)
    message, fields = worker_banner(app, worker.id, list(worker.queues), args.concurrency,
                                    getattr(args, "pool", None) or "threads")
    log.info("%s", message, extra=fields)
    stop_metrics = None
    if args.metrics_port is not None:
        try:
            from tether.metrics import serve
        except ImportError as exc:
            raise ConfigError(f"--metrics-port needs the metrics extra: pip install "
                              f"'tether[metrics]' ({exc})") from None

        stop_metrics = serve(app, args.metrics_port, args.metrics_host)
        log.info("metrics on http://%s:%d/metrics", args.metrics_host, args.metrics_port)
    try:
        code: int = worker.run()
    finally:
        if stop_metrics is not None:
            stop_metrics()
    return code


def cmd_reaper(args: argparse.Namespace) -> int:
    """A standalone maintainer: joins the same election as the workers' maintainers."""
    options: dict[str, Any] = {"election": not args.no_election}
    if args.lease_ttl is not None:
        options["lease_ttl"] = args.lease_ttl
    from tether.cli.common import connect, target

    t = target(args)
    if args.lease_ttl is None and t.app is not None:
        options["lease_ttl"] = t.settings.lease_ttl
    settings = make_settings(**options)
    store = connect(t.url)
    holder = f"reaper:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    maintainer = Maintainer(store, holder, settings, Events())
    shutdown = Shutdown(draining="stopping the reaper")
    restore = shutdown.install()
    maintainer.start()
    log.info("reaper %s started (election %s)", holder, "on" if settings.election else "off")
    try:
        while not shutdown.stopping and maintainer.alive:
            shutdown.changed.wait(0.5)
    finally:
        maintainer.stop()  # joins the loop, which releases leadership while the store is open
        restore()
        store.close()
    return 0
