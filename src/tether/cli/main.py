"""``tether``: run workers and maintainers, inspect and steer jobs, and run the demo.

Exit codes: 0 success; 1 the command ran but failed (a demo invariant broke, a worker died);
2 bad usage or configuration; 3 the store is unreachable or its schema is wrong; 4 not found.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from tether import __version__
from tether.errors import ConfigError, JobNotFound, StoreError, TetherError
from tether.stores import DEFAULT_URL

Handler = Callable[[argparse.Namespace], int]


def _url_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=os.environ.get("TETHER_URL", DEFAULT_URL),
                   help="store URL (default: $TETHER_URL, else %(default)s)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    from tether.cli import inspect, run
    from tether.cli.demo import cmd_demo

    parser = argparse.ArgumentParser(prog="tether", description=__doc__.splitlines()[0] if
                                     __doc__ else None)
    parser.add_argument("--version", action="version", version=f"tether {__version__}")
    parser.add_argument("--log-level", default=os.environ.get("TETHER_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    p = add("worker", run.cmd_worker, "run a worker for MODULE:APP until SIGTERM/SIGINT")
    p.add_argument("app", metavar="MODULE:APP")
    p.add_argument("-c", "--concurrency", type=int, default=10)
    p.add_argument("-q", "--queues", action="append",
                   help="queues to serve (repeat or comma-separate; default: the app's tasks')")
    p.add_argument("--url", default=None, help="override the app's store URL")
    p.add_argument("--no-maintenance", action="store_true",
                   help="do not run the reaper/pruner in this worker")
    p.add_argument("--pool", choices=["thread", "process"], default="thread",
                   help="run handlers on threads (default) or in -c child processes, which "
                        "are killed when their job must stop and whose crash costs one attempt")
    p.add_argument("--max-tasks-per-child", type=int, default=None, metavar="N",
                   help="with --pool process: replace a child after N jobs")
    p.add_argument("--max-memory-per-child", type=float, default=None, metavar="MIB",
                   help="with --pool process: replace a child whose RSS passes MIB after a job; "
                        "kill it (the attempt stalls) if it passes MIB during one")

    p = add("reaper", run.cmd_reaper, "run the reaper and pruner standalone (joins the election)")
    _url_option(p)
    p.add_argument("--no-election", action="store_true", help="sweep even when not the leader")
    p.add_argument("--lease-ttl", type=float, default=None,
                   help="the workers' lease_ttl (caps the reaper's tick)")

    p = add("enqueue", inspect.cmd_enqueue, "enqueue a job by task name")
    _url_option(p)
    p.add_argument("task")
    p.add_argument("--args", default="[]", help="JSON list (positional) or object (keyword)")
    p.add_argument("--queue", default="default")
    p.add_argument("--priority", type=int, default=0, help="smaller runs first")
    p.add_argument("--delay", type=float, default=None, help="seconds before it is due")
    p.add_argument("--unique-key", default=None)
    p.add_argument("--max-attempts", type=int, default=5)

    p = add("jobs", inspect.cmd_jobs, "list jobs (ascending id, paginated)")
    _url_option(p)
    p.add_argument("--status", choices=["pending", "running", "done", "failed", "cancelled"])
    p.add_argument("--queue")
    p.add_argument("--after", type=int, default=None, help="show ids after this one")
    p.add_argument("--limit", type=int, default=50)

    p = add("job", inspect.cmd_job, "show one job, with its error history")
    _url_option(p)
    p.add_argument("id", type=int)

    p = add("dlq", inspect.cmd_dlq, "list or retry dead-lettered (failed) jobs")
    _url_option(p)
    p.add_argument("action", choices=["list", "retry"])
    p.add_argument("ids", nargs="*", type=int)
    p.add_argument("--all", action="store_true", help="with retry: every failed job")
    p.add_argument("--after", type=int, default=None)
    p.add_argument("--limit", type=int, default=50)

    p = add("stats", inspect.cmd_stats, "jobs per queue and state, and live workers")
    _url_option(p)

    p = add("migrate", inspect.cmd_migrate, "create or upgrade the store's schema")
    _url_option(p)

    p = add("demo", cmd_demo, "crash three workers on purpose and show that no job is lost")
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--lease-ttl", type=float, default=3.0)
    p.add_argument("--keep", action="store_true", help="keep the temporary database")
    p.add_argument("--url", default=None, help="run on this store instead of a temp SQLite file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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


if __name__ == "__main__":
    sys.exit(main())
