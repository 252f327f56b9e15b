"""What every ``tether`` command shares: option types that refuse bad input in one line, and
finding the store (``--app`` / ``$TETHER_APP`` first, then ``--url`` / ``$TETHER_URL``).

Why option types instead of checks inside commands: argparse reports a bad value before any
store is opened, as one ``tether: error: ...`` line with exit code 2, for every command alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether import _limits as limits
from tether._config import Settings
from tether._environ import default_store_used
from tether._errors import ConfigError, SchemaError, StoreError
from tether._runtime import Runtime
from tether._schema_start import prepare_schema
from tether.stores import DEFAULT_PATH, DEFAULT_URL, open_store
from tether.stores._contract import Basics, Liveness, Store, WorkerInfo

# -- option types ----------------------------------------------------------------------------


def _int(text: str, what: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _int(text, "value")
    if not 1 <= value <= limits.MAX_INT32:
        raise argparse.ArgumentTypeError(f"must be between 1 and {limits.MAX_INT32}, got {text}")
    return value


def int32(text: str) -> int:
    value = _int(text, "value")
    if not limits.MIN_INT32 <= value <= limits.MAX_INT32:
        raise argparse.ArgumentTypeError(
            f"must be between {limits.MIN_INT32} and {limits.MAX_INT32}, got {text}")
    return value


def job_id(text: str) -> int:
    value = _int(text, "a job id")
    if not 1 <= value <= limits.MAX_JOB_ID:
        raise argparse.ArgumentTypeError(
            f"a job id is between 1 and {limits.MAX_JOB_ID}, got {text}")
    return value


def page_limit(text: str) -> int:
    value = _int(text, "--limit")
    if not 1 <= value <= limits.MAX_PAGE:
        raise argparse.ArgumentTypeError(f"must be between 1 and {limits.MAX_PAGE}, got {text}")
    return value


def port(text: str) -> int:
    value = _int(text, "a port")
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 1 and 65535, got {text}")
    return value


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds (no NaN, no infinity)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 <= value <= limits.MAX_DELAY:
        raise argparse.ArgumentTypeError(
            f"must be a finite number of seconds from 0 to {limits.MAX_DELAY:.0f}, got {text}")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def name(text: str) -> str:
    """A queue or task name as every store accepts it."""
    try:
        return limits.check_text(text, "name", limit=limits.MAX_NAME)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("name ")) from None


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON (use null or a number)")


def json_value(text: str) -> Any:
    """Strict JSON: NaN and Infinity are refused (no store or consumer can rely on them)."""
    return json.loads(text, parse_constant=_refuse_constant)


def when_arg(text: str) -> float:
    """``--since``: seconds/minutes/hours/days ago (``90s``, ``15m``, ``2h``, ``7d``) or an ISO
    8601 time (``2024-05-01T12:00:00+00:00``; no zone means UTC). Returns epoch seconds."""
    from datetime import UTC, datetime

    from tether import _clock as clock

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    text = text.strip()
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        return clock.wall() - float(text[:-1]) * units[text[-1]]
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a duration like 15m, 2h, 7d or an ISO 8601 time, got {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


# -- finding the store -----------------------------------------------------------------------


@dataclass
class Target:
    """Where a command works: the app's runtime (when an app is given) and the store URL it
    resolves to."""

    runtime: Runtime | None
    url: str

    @property
    def settings(self) -> Settings:
        return self.runtime.settings if self.runtime is not None else Settings()

    def queues(self) -> list[str] | None:
        return self.runtime.registry.queues() if self.runtime is not None else None


def target(args: argparse.Namespace) -> Target:
    """``--app`` (or ``$TETHER_APP``) gives the app and its store; ``--url`` overrides the
    store; without either, ``$TETHER_URL``, else ``sqlite:///tether.db``."""
    spec = getattr(args, "app", None) or os.environ.get("TETHER_APP") or None
    runtime = None
    if spec:
        from tether._appspec import load_app

        runtime = load_app(spec).runtime
    given = getattr(args, "url", None) or (
        runtime.url if runtime is not None and not runtime.implicit_url else None)
    return Target(runtime, given or store_url())


def store_url() -> str:
    """``$TETHER_URL``, else the default store (said at WARNING: see :mod:`tether._environ`)."""
    url = os.environ.get("TETHER_URL")
    if url:
        return url
    default_store_used(DEFAULT_PATH)
    return DEFAULT_URL


def sqlite_file(url: str) -> Path | None:
    """The file an SQLite URL names (None for other stores)."""
    if not url.lower().startswith("sqlite:"):
        return None
    from tether.stores._sqlite.url import parse_url

    return Path(parse_url(url))


def connect(url: str, *, create: bool = False, upgrade: bool = False) -> Store:
    """Open the store. Read commands (``create=False``) never create anything: a missing
    SQLite file is reported, not made, and a missing schema is a SchemaError (exit 3).
    ``create`` makes a missing schema but refuses an older one ("run `tether migrate`");
    only ``upgrade`` (``tether migrate``) upgrades (:mod:`tether._schema_start`)."""
    path = sqlite_file(url)
    if path is not None and not (create or upgrade) and not path.exists():
        raise SchemaError(
            f"no SQLite store at {path.resolve()} (nothing to read; give --app MODULE:APP or "
            "--url, or run `tether migrate` to create it)")
    try:
        store = open_store(url)
    except (ValueError, TypeError) as exc:  # a driver refusing a URL parameter
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"bad store URL parameter: {exc}") from None
    try:
        prepare_schema(store, "upgrade" if upgrade else "create" if create else "check")
    except BaseException:
        store.close()
        raise
    return store


def alive(worker: WorkerInfo, now: float, lease_ttl: float) -> bool:
    """A worker is live while its last heartbeat is younger than its lease: after that the
    reaper may already have taken its jobs, whatever its row says."""
    return now - worker.last_seen <= lease_ttl


def live_workers(store: Basics, workers: Sequence[WorkerInfo], now: float,
                 lease_ttl: float) -> dict[str, bool]:
    """Worker id -> live. Dead as soon as its liveness token is released (issue #22: the
    process is gone, whatever its last heartbeat says), else by :func:`alive`. A store that
    cannot tell (or cannot be asked now) leaves it to the heartbeat."""
    dead: frozenset[str] = frozenset()
    if workers and isinstance(store, Liveness) and store.capabilities.detects_death:
        try:
            dead = store.dead_workers([w.id for w in workers])
        except StoreError:
            dead = frozenset()
    return {w.id: w.id not in dead and alive(w, now, lease_ttl) for w in workers}
