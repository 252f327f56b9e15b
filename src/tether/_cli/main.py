"""``tether``: run workers and maintainers, inspect and steer jobs, and run the demo.

Exit codes: 0 success; 1 the command ran but failed (a demo invariant broke, a worker died,
a health check found no live worker); 2 bad usage or configuration; 3 the store is
unreachable or its schema is missing or wrong; 4 not found.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from tether import __version__
from tether._cli import common as c
from tether._environ import check_environ
from tether._errors import ConfigError, JobNotFound, StoreError, TetherError
from tether._logs import FORMATS, LEVELS, check_format, check_level, configure
from tether.stores._records import STATUSES

Handler = Callable[[argparse.Namespace], int]
log = logging.getLogger("tether.cli")
STATUS_CHOICES = list(STATUSES)


class Parser(argparse.ArgumentParser):
    """Bad usage is one line (``tether: error: ...``) and exit code 2, never a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"tether: error: {message} (see `{self.prog} --help`)\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: X)`` only where the help does not already say what the default is, and
    never for a default of None or False (``--json (default: False)`` says nothing): issue
    #24 found each default shown twice."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


def _globals(p: argparse.ArgumentParser, suppress: bool) -> None:
    """Options accepted before *and* after the command; after it, SUPPRESS keeps a value
    given before the command from being reset to the default."""
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    p.add_argument("--app", metavar="MODULE:APP", default=d(None),
                   help="use this app's store and settings (default: $TETHER_APP)")
    p.add_argument("--log-level", type=str.upper, choices=LEVELS, metavar="LEVEL",
                   default=d(None), help="DEBUG, INFO, WARNING or ERROR (default: "
                   "$TETHER_LOG_LEVEL, else INFO)")
    p.add_argument("--log-format", type=str.lower, choices=FORMATS, metavar="FORMAT",
                   default=d(None), help="text or json, one object per line (default: "
                   "$TETHER_LOG_FORMAT, else the app's log_format, else text)")


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None,
                   help="store URL (default: the app's, else $TETHER_URL, else "
                   "sqlite:///tether.db)")
    p.add_argument("--json", action="store_true", help="machine-readable output (ISO 8601 "
                   "times)")


class _Lazy:
    """A CLI module imported when one of its commands runs, not when the parser is built:
    ``tether worker`` starts faster without the demo's and the listings' imports."""

    def __init__(self, module: str) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Handler:
        def handler(args: argparse.Namespace) -> int:
            import importlib

            command: Handler = getattr(importlib.import_module(self.module), name)
            return command(args)

        return handler


def build_parser() -> argparse.ArgumentParser:
    from tether._cli import ops, run

    inspect = _Lazy("tether._cli.inspect")  # only the command that runs needs its module
    cmd_demo = _Lazy("tether._cli.demo").cmd_demo
    cmd_schedules = _Lazy("tether._cli.schedules").cmd_schedules

    parser = Parser(prog="tether", description=(__doc__ or "").split("\n\n")[0],
                    epilog=(__doc__ or "").split("\n\n")[1],
                    formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"tether {__version__}")
    _globals(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)

    def add(name: str, handler: Handler, help_: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, epilog=f"example: {example}",
                           formatter_class=HelpFormatter)
        _globals(p, suppress=True)
        p.set_defaults(handler=handler)
        return p

    p = add("worker", run.cmd_worker, "run a worker for MODULE:APP until SIGTERM/SIGINT",
            "tether worker myproject.jobs:app -c 20 -q images,mail")
    p.add_argument("target_app", metavar="MODULE:APP", nargs="?", default=None,
                   help="the app whose tasks to run (default: --app, else $TETHER_APP)")
    p.add_argument("-c", "--concurrency", type=c.positive_int, default=None,
                   help="jobs run at once (default: the sum of the -q counts when every "
                   "queue has one, else 10)")
    p.add_argument("-q", "--queues", action="append",
                   help="queues to serve (repeat or comma-separate; default: the app's "
                   "tasks'); NAME=N gives a queue at most N slots: -q images=2 -q default=8")
    p.add_argument("--url", default=None, help="override the app's store URL")
    p.add_argument("--no-maintenance", action="store_true",
                   help="do not run the reaper/pruner in this worker")
    p.add_argument("--pool", choices=["thread", "process"], default="thread",
                   help="run handlers on threads (default) or in -c child processes, which "
                        "are killed when their job must stop and whose crash costs one attempt")
    p.add_argument("--max-tasks-per-child", type=c.positive_int, default=None, metavar="N",
                   help="with --pool process: replace a child after N jobs")
    p.add_argument("--max-memory-per-child", type=float, default=None, metavar="MIB",
                   help="with --pool process: replace a child whose RSS passes MIB after a job; "
                        "kill it (the attempt stalls) if it passes MIB during one")
    p.add_argument("--metrics-port", type=c.port, default=None,
                   help="serve Prometheus metrics on 127.0.0.1:PORT/metrics (needs "
                   "the metrics extra)")
    p.add_argument("--metrics-host", default="127.0.0.1",
                   help="address for --metrics-port (0.0.0.0 to let Prometheus scrape it)")
    p.add_argument("--burst", action="store_true",
                   help="run until no job is due, then exit (0 also when jobs failed, like "
                        "rq --burst; see --strict); enqueues no periodic ticks")
    p.add_argument("--strict", action="store_true",
                   help="with --burst: exit 1 when a job it ran ended failed (dead-lettered)")

    p = add("reaper", run.cmd_reaper, "run the reaper and pruner standalone with the app's "
            "settings (joins the elections)", "tether reaper myproject.jobs:app")
    p.add_argument("target_app", metavar="MODULE:APP", nargs="?", default=None,
                   help="the app whose settings (retention, stall_grace, leader timing) to "
                   "use (default: --app, else $TETHER_APP)")
    _store_options(p)
    p.add_argument("--no-election", action="store_true", help="sweep even when not the leader")
    p.add_argument("--lease-ttl", type=c.positive_seconds, default=None,
                   help="without an app: the workers' lease_ttl (caps the reaper's tick)")

    p = add("schedules", cmd_schedules, "list the app's periodic schedules with their next and "
            "last run", "tether schedules myproject.jobs:app")
    p.add_argument("target_app", metavar="MODULE:APP", nargs="?", default=None,
                   help="the app that declares the schedules (default: --app, else "
                   "$TETHER_APP)")
    _store_options(p)
    p = add("enqueue", inspect.cmd_enqueue, "enqueue a job by task name",
            "tether enqueue --app myproject.jobs:app myproject.jobs.resize --args "
            "'[\"a.png\", 100]'")
    _store_options(p)
    p.add_argument("task", type=c.name, help="the task's registered name")
    p.add_argument("--args", default="[]", help="JSON list (positional) or object (keyword)")
    p.add_argument("--queue", type=c.name, default=None,
                   help="queue (default: the task's with --app, else default)")
    p.add_argument("--priority", type=c.int32, default=None,
                   help="smaller runs first (default: the task's, else 0)")
    p.add_argument("--delay", type=c.seconds, default=None, help="seconds before it is due")
    p.add_argument("--unique-key", default=None,
                   help="while a live job has this key, return its id instead")
    p.add_argument("--max-attempts", type=c.positive_int, default=None,
                   help="attempts before dead-lettering (default: the task's, else 5)")
    p.add_argument("--limit-key", default=None,
                   help="the key its flow limits count it under (default: with --app, read "
                   "from the task's limit_key argument; else none)")
    p.add_argument("--after", type=c.job_id, action="append", default=None, metavar="ID",
                   help="wait for this job to be done first (repeat for several)")
    p.add_argument("--allow-failure", action="store_true",
                   help="with --after: run even if a job it waits for fails or is cancelled")

    p = add("jobs", inspect.cmd_jobs, "list jobs, newest first, with filters",
            "tether jobs --status failed --queue mail --since 2h")
    _store_options(p)
    p.add_argument("--status", choices=STATUS_CHOICES, help="only jobs in this state")
    p.add_argument("--queue", type=c.name, help="only this queue")
    p.add_argument("--task", type=c.name, help="only this task")
    p.add_argument("--since", type=c.when_arg, default=None,
                   help="created since: 15m, 2h, 7d or an ISO 8601 time")
    p.add_argument("--before", type=c.job_id, default=None,
                   help="next page: ids below this one")
    p.add_argument("--after", type=c.job_id, default=None,
                   help="oldest first, ids above this one")
    p.add_argument("--oldest-first", action="store_true", help="ascending id order")
    p.add_argument("--limit", type=c.page_limit, default=50, help="rows per page")

    p = add("job", inspect.cmd_job, "show one job, its result, progress, errors, parents "
            "and children",
            "tether job 42 --follow")
    _store_options(p)
    p.add_argument("id", type=c.job_id, help="the job's id")
    p.add_argument("--follow", "-f", action="store_true",
                   help="print each change until the job ends (exit 0 done, 1 failed or "
                   "cancelled)")
    p.add_argument("--interval", type=c.positive_seconds, default=0.5,
                   help="seconds between polls with --follow")

    p = add("dlq", inspect.cmd_dlq, "list or retry dead-lettered (failed) jobs",
            "tether dlq retry 17 18   |   tether dlq retry --all")
    _store_options(p)
    p.add_argument("action", choices=["list", "retry"], help="list or retry")
    p.add_argument("ids", nargs="*", type=c.job_id, help="with retry: these jobs")
    p.add_argument("--all", action="store_true", help="with retry: every failed job")
    p.add_argument("--queue", type=c.name, help="with list: only this queue")
    p.add_argument("--task", type=c.name, help="with list: only this task")
    p.add_argument("--since", type=c.when_arg, default=None, help="with list: created since")
    p.add_argument("--before", type=c.job_id, default=None, help="next page: ids below this")
    p.add_argument("--limit", type=c.page_limit, default=50, help="rows per page")

    p = add("stats", inspect.cmd_stats, "jobs per queue and state, and workers (live/dead)",
            "tether stats --watch")
    _store_options(p)
    p.add_argument("--watch", "-w", action="store_true", help="refresh until Ctrl-C")
    p.add_argument("--interval", type=c.positive_seconds, default=2.0,
                   help="seconds between refreshes with --watch")
    p.add_argument("--count", type=c.positive_int, default=None,
                   help="with --watch: stop after this many refreshes (default: until Ctrl-C)")
    p.add_argument("--lease-ttl", type=c.positive_seconds, default=None,
                   help="workers silent longer than this are dead (default: the app's "
                   "lease_ttl, else 30)")

    p = add("cancel", ops.cmd_cancel, "cancel a job (pending: now; running: at its next "
            "heartbeat)", "tether cancel 42")
    _store_options(p)
    p.add_argument("id", type=c.job_id, help="the job's id")

    p = add("purge", ops.cmd_purge, "delete a queue's jobs in the given states (never running "
            "ones)", "tether purge mail --status pending --status failed --yes")
    _store_options(p)
    p.add_argument("queue", type=c.name, help="the queue to empty")
    p.add_argument("--status", action="append", choices=list(ops.PURGEABLE),
                   help="states to delete (repeat; default: pending)")
    p.add_argument("--yes", "-y", action="store_true",
                   help="delete without showing them and asking first")
    p.add_argument("--dry-run", action="store_true",
                   help="only show how many jobs would be deleted")

    for name, paused, text in (("pause", True, "stop workers claiming from a queue"),
                               ("resume", False, "let workers claim from a paused queue")):
        p = add(name, ops.cmd_pause, text, f"tether {name} mail")
        _store_options(p)
        p.add_argument("queue", type=c.name, help="the queue's name")
        p.set_defaults(paused=paused)

    p = add("health", ops.cmd_health, "exit 0 when the store answers (and, with --worker, a "
            "live worker serves each queue): for probes", "tether health --app "
            "myproject.jobs:app --worker --local")
    _store_options(p)
    p.add_argument("--worker", action="store_true", help="also require a live worker")
    p.add_argument("--queue", action="append", type=c.name,
                   help="queues that must be served (repeat; default: the app's)")
    p.add_argument("--local", action="store_true", help="count only workers on this host")
    p.add_argument("--lease-ttl", type=c.positive_seconds, default=None,
                   help="workers silent longer than this are dead (default: the app's, "
                   "else 30)")

    p = add("migrate", inspect.cmd_migrate, "create or upgrade the store's schema",
            "tether migrate --url postgresql://app@db/app")
    _store_options(p)

    from tether._cli.server import add_server
    from tether._cli.web import add_dashboard

    add_dashboard(add)
    add_server(add)

    p = add("demo", cmd_demo, "crash three workers on purpose and show that no job is lost",
            "tether demo --jobs 300")
    p.add_argument("--jobs", type=c.positive_int, default=300, help="jobs to run (>= 20)")
    p.add_argument("--lease-ttl", type=c.positive_seconds, default=3.0,
                   help="the demo workers' lease_ttl")
    p.add_argument("--keep", action="store_true", help="keep the temporary files")
    p.add_argument("--url", default=None,
                   help="run on this store (its own queue; your jobs are never touched)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `tether jobs | head`: the reader left; that is not an error
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 0


def _main(argv: Sequence[str] | None) -> int:
    return run_parsed(build_parser().parse_args(argv))


def run_parsed(args: argparse.Namespace) -> int:
    """Run a parsed command: logging, then its handler, with errors mapped to exit codes
    (``manage.py tether_worker`` parses with Django's parser and comes in here)."""
    try:
        level = check_level(args.log_level or os.environ.get("TETHER_LOG_LEVEL") or "INFO")
        fmt = check_format(args.log_format or os.environ.get("TETHER_LOG_FORMAT") or "text")
    except ConfigError as exc:
        print(f"tether: error: {exc}", file=sys.stderr)
        return 2
    args.log_level, args.log_format_given = level, args.log_format
    if not getattr(args, "keep_logging", False):  # manage.py with Django's LOGGING set
        configure(level, fmt)
    check_environ()  # a mistyped TETHER_URL must not pass unseen
    handler: Handler = args.handler
    try:
        return handler(args)
    except ConfigError as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 2
    except JobNotFound as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 4
    except StoreError as exc:
        print(f"tether: store error: {exc}", file=sys.stderr)
        return 3
    except TetherError as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:  # a bug of ours: still one line; the traceback at DEBUG
        log.debug("unexpected error", exc_info=True)
        print(f"tether: unexpected error: {type(exc).__name__}: {exc} (rerun with "
              "--log-level DEBUG for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
