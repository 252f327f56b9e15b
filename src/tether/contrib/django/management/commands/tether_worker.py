"""``manage.py tether_worker``: ``tether worker`` for the project's App, same options.

The options are taken from ``tether worker``'s own parser, so the two never drift apart (an
option added there appears here). Logging: Django's ``LOGGING`` is kept when the project sets
it and neither ``--log-level`` nor ``--log-format`` is given; otherwise tether's own set-up.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tether._cli.main import build_parser, run_parsed
from tether._cli.run import cmd_worker

SPEC = "tether.contrib.django.boot:app"
#: ``tether worker`` arguments that make no sense here: the app is the project's.
_LEFT_OUT = frozenset({"help", "target_app", "app"})


def worker_actions() -> list[argparse.Action]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            worker: argparse.ArgumentParser = action.choices["worker"]
            return [a for a in worker._actions if a.dest not in _LEFT_OUT]
    raise AssertionError("tether's parser has no worker command")  # pragma: no cover


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type hints
    help = "Run a tether worker for this project's tasks (the options of `tether worker`)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        for action in worker_actions():
            parser._add_action(action)

    def handle(self, *args: Any, **options: Any) -> None:
        values = {a.dest: options.get(a.dest, a.default) for a in worker_actions()}
        for dest in ("log_level", "log_format"):
            if values.get(dest) is argparse.SUPPRESS:
                values[dest] = None
        namespace = argparse.Namespace(
            **values, target_app=SPEC, app=None, handler=cmd_worker,
            keep_logging=bool(getattr(settings, "LOGGING", None))
            and not (values["log_level"] or values["log_format"]))
        code = run_parsed(namespace)
        if code:
            raise CommandError(f"the tether worker exited with code {code}", returncode=code)
