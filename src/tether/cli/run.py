"""Long-running commands: ``tether worker`` and ``tether reaper``."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import uuid

from tether.config import make_settings
from tether.events import Events
from tether.maintenance.maintainer import Maintainer
from tether.stores import open_store
from tether.worker.appspec import load_app
from tether.worker.shutdown import Shutdown

log = logging.getLogger("tether.cli")


def cmd_worker(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    if args.url:
        app.url = args.url
    queues = [q for part in args.queues for q in part.split(",") if q] if args.queues else None
    process = args.pool == "process"
    app.store.check_schema()
    return app.run_worker(concurrency=args.concurrency, queues=queues,
                          maintenance=not args.no_maintenance, pool=args.pool,
                          app_spec=args.app if process else None,
                          max_tasks_per_child=args.max_tasks_per_child,
                          max_memory_per_child=args.max_memory_per_child)


def cmd_reaper(args: argparse.Namespace) -> int:
    """A standalone maintainer: joins the same election as the workers' maintainers."""
    options = {"election": not args.no_election}
    if args.lease_ttl is not None:
        options["lease_ttl"] = args.lease_ttl
    settings = make_settings(**options)
    store = open_store(args.url)
    store.check_schema()
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
