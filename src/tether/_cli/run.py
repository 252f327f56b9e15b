"""Long-running commands: ``tether worker`` and ``tether reaper``."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from tether import _limits as limits
from tether._appspec import load_app
from tether._config import make_settings
from tether._errors import AuthError, ConfigError
from tether._events import Events
from tether._install import install_hint
from tether._logs import configure, worker_banner
from tether._maintenance.deathwatch import take_token
from tether._maintenance.maintainer import Maintainer
from tether._worker.shutdown import Shutdown
from tether._worker.startup import open_when_up
from tether.stores._urls import redact

if TYPE_CHECKING:
    from tether._config import Settings
    from tether._runtime import Runtime
    from tether._worker.worker import Worker
    from tether.stores._contract import Store

log = logging.getLogger("tether.cli")


def cmd_worker(args: argparse.Namespace) -> int:
    spec = args.target_app or args.app or os.environ.get("TETHER_APP")
    if not spec:
        raise ConfigError("tether worker needs the app: tether worker MODULE:APP (or --app, "
                          "or $TETHER_APP)")
    if args.strict and not args.burst:  # refused before anything is opened or started
        raise ConfigError("--strict only applies with --burst")
    app = load_app(spec)
    runtime = app.runtime
    if args.url:
        # Importing the app may have opened its own store (an enqueue at import time): close
        # it, or the worker would claim from that store while heartbeating on --url's.
        runtime.close()
        runtime.url = args.url
    if not args.log_format_given and not os.environ.get("TETHER_LOG_FORMAT") and \
            runtime.settings.log_format:
        configure(args.log_level, runtime.settings.log_format)
    queues = [q.strip() for part in args.queues for q in part.split(",")] \
        if args.queues else None
    try:
        for q in queues or ():
            limits.check_text(q.partition("=")[0], "queue", limit=limits.MAX_NAME)
    except ValueError as exc:
        raise ConfigError(f"--queues: {exc}") from None
    process = args.pool == "process"

    worker = app.worker(concurrency=args.concurrency, queues=queues,
                        maintenance=not args.no_maintenance, pool=args.pool,
                        app_spec=spec if process else None,
                        max_tasks_per_child=args.max_tasks_per_child,
                        max_memory_per_child=args.max_memory_per_child,
                        schedules=not args.burst)
    # A store that is not up yet is waited for (startup.py) before the banner; a signal ends
    # the wait: exit 0.
    if not worker.wait_for_store():
        return 0
    message, fields = worker_banner(runtime.settings, runtime.url, runtime.registry.tasks,
                                    worker.id, list(worker.queues), worker.concurrency,
                                    "processes" if process else "threads")
    log.info("%s", message, extra=fields)
    stop_metrics = None
    if args.metrics_port is not None:
        try:
            from tether.metrics import serve
        except ImportError as exc:
            raise ConfigError(f"--metrics-port needs {install_hint('metrics')} "
                              f"({exc})") from None

        stop_metrics = serve(app, args.metrics_port, args.metrics_host)
        log.info("metrics on http://%s:%d/metrics", args.metrics_host, args.metrics_port)
    try:
        code: int = run_burst_cli(worker, args.strict) if args.burst else worker.run()
    finally:
        if stop_metrics is not None:
            stop_metrics()
    return code


def run_burst_cli(worker: Worker, strict: bool) -> int:
    """``--burst``: work until nothing is due, say what ran, and exit 0 (1 with ``--strict``
    when a job ended failed; 1 also when the worker itself failed)."""
    from tether._worker.burst import run_burst, tally

    result = run_burst(worker)
    if isinstance(worker.shutdown.fatal, AuthError):  # through tether://, a worker token
        raise worker.shutdown.fatal
    counts = tally(worker.store, result.ran, worker.queues)
    later = counts.pop("left", 0)
    parts = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    log.info("burst done: ran %d job(s)%s; %d pending job(s) left in its queues (due later, "
             "or in a paused queue)",
             len(result.ran), f" ({parts})" if parts else "", later)
    if result.exit_code != 0:
        return result.exit_code
    if strict and counts.get("failed"):
        log.error("burst: %d job(s) failed (--strict); see tether dlq list", counts["failed"])
        return 1
    return 0


def maintenance_setup(args: argparse.Namespace) -> tuple[Runtime | None, Settings, str]:
    """(the app's runtime or None, the maintenance settings, the store URL) for a command
    that runs the reaper/pruner (``tether reaper``, ``tether server``): the app's settings
    and URL when it is given (``--url`` still wins), else the defaults and ``$TETHER_URL``."""
    from tether._cli.common import store_url

    spec = args.target_app or getattr(args, "app", None) or os.environ.get("TETHER_APP")
    lease_ttl = getattr(args, "lease_ttl", None)
    if spec:
        if lease_ttl is not None:
            raise ConfigError("--lease-ttl is for running without an app; the app's settings "
                              "give lease_ttl")
        runtime = load_app(spec).runtime
        url = args.url or (store_url() if runtime.implicit_url else runtime.url)
        return runtime, runtime.settings, url
    settings = make_settings(**({} if lease_ttl is None else {"lease_ttl": lease_ttl}))
    return None, settings, args.url or store_url()


def new_maintainer(store: Store, settings: Settings, runtime: Runtime | None,
                   kind: str) -> tuple[Maintainer, bool]:
    """A maintainer joining the workers' elections, named ``KIND:host:pid:id``; with the app,
    its events and periodic schedules too. Also takes the process's liveness token (issue
    #22) under that name, so that when this process dies its leadership passes at once: the
    caller releases it (``store.release_liveness(maintainer.holder)``) when the second item
    is True, after stopping the maintainer."""
    holder = f"{kind}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    token = take_token(store, holder, check_every=settings.death_check_interval,
                       lease_ttl=settings.lease_ttl)
    maintainer = Maintainer(store, holder, settings, runtime.events if runtime else Events(),
                            schedules=runtime.registry.schedules() if runtime else ())
    return maintainer, token


def cmd_reaper(args: argparse.Namespace) -> int:
    """A standalone maintainer with the app's settings; joins the same elections as the
    workers' maintainers, and always reaps (even when the app disables reaping in workers
    with ``reaper_interval=0``: that is what this process is for)."""
    from tether._cli.common import connect

    runtime, settings, url = maintenance_setup(args)
    if runtime is None:
        log.warning("no MODULE:APP given: running with the default settings (retention, "
                    "stall_grace, leader timing); give the app so they match the workers'")
    if args.no_election:
        settings = replace(settings, election=False)
    shutdown = Shutdown(draining="stopping the reaper")
    restore = shutdown.install()
    try:
        # A store that is not up yet is waited for, as by a worker; a signal ends the wait.
        store = open_when_up(lambda: connect(url), redact(url), stop=shutdown)
    except BaseException:
        restore()
        raise
    if store is None:
        restore()
        return 0
    maintainer, token = new_maintainer(store, settings, runtime, "reaper")
    maintainer.start()
    log.info("reaper %s started (election %s)", maintainer.holder,
             "on" if settings.election else "off")
    try:
        while not shutdown.stopping and maintainer.alive:
            shutdown.changed.wait(0.5)
    finally:
        maintainer.stop()  # joins the loop, which releases leadership while the store is open
        restore()
        if token:
            store.release_liveness(maintainer.holder)
        store.close()
    return 0 if shutdown.stopping else 1
