"""Shared pieces of the harness: sizes, figures with targets, isolated store URLs.

Every scenario returns :class:`Figure` objects. A figure keeps its raw samples (one per run, or
one per trial where stated) and reports their median, min and max; a target, when the brief
sets one, is evaluated on the median unless the scenario says otherwise.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

PG_DSN = os.environ.get("TETHER_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TETHER_BENCH_REDIS", "redis://127.0.0.1:6379/0")
STORES = ("sqlite", "postgres", "redis")
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Config:
    """Sizes and settings of one harness run (recorded in the report header)."""

    preset: str = "full"
    runs: int = 3
    enqueue_jobs: int = 10_000
    enqueue_many_jobs: int = 100_000  # issue #23: enqueue_many of 100k beside the bare batch
    drain_jobs: int = 10_000
    drain_medium: int = 100_000  # 0 skips it
    drain_large: int = 1_000_000  # 0 skips the large drain
    large_runs: int = 3
    large_concurrency: int = 10
    concurrencies: tuple[int, ...] = (10, 50)
    startup_runs: int = 5  # at least: one start is too noisy a figure
    latency_jobs: int = 200
    latency_gap: float = 0.05
    latency_concurrency: int = 10
    recovery_trials: int = 20
    recovery_lease_ttl: float = 2.0
    hb_inflight: tuple[int, ...] = (10, 1000)
    hb_lease_ttl: float = 3.0
    hb_window: float = 6.0
    reap_history: int = 1_000_000
    reap_expired: int = 10_000
    claim_batch: int = 100
    memory_jobs: int = 10_000
    memory_concurrency: int = 50
    memory_settle: float = 1.0
    pool_jobs: int = 3_000
    pool_concurrencies: tuple[int, ...] = (2, 10)
    pool_trials: int = 10
    pool_lease_ttl: float = 3.0
    pool_cpu_jobs: int = 40
    pool_cpu_iters: int = 500_000
    workdir: str = ""

    @classmethod
    def preset_named(cls, name: str) -> Config:
        if name == "full":
            return cls()
        if name == "quick":
            return cls(preset="quick", enqueue_jobs=1_000, enqueue_many_jobs=10_000,
                       drain_jobs=2_000, drain_medium=0,
                       drain_large=0,
                       latency_jobs=40, recovery_trials=5, hb_inflight=(10, 200),
                       hb_window=3.0, reap_history=20_000, reap_expired=1_000,
                       memory_jobs=2_000, pool_jobs=1_000, pool_trials=5, pool_cpu_jobs=20)
        if name == "smoke":
            return cls(preset="smoke", runs=1, startup_runs=1, enqueue_jobs=50,
                       enqueue_many_jobs=200, drain_jobs=50,
                       drain_medium=0, drain_large=0,
                       large_runs=1, concurrencies=(10,), latency_jobs=10, latency_gap=0.02,
                       recovery_trials=2, recovery_lease_ttl=1.0, hb_inflight=(5,),
                       # A 2 s window holds 4 heartbeat intervals: 1 s (2 intervals) came
                       # out with fewer than 2 beats on a loaded machine and failed the run.
                       hb_lease_ttl=1.5, hb_window=2.0, reap_history=500, reap_expired=100,
                       memory_jobs=50, memory_settle=0.3, pool_jobs=50,
                       pool_concurrencies=(2,), pool_trials=1, pool_cpu_jobs=4,
                       pool_cpu_iters=50_000)
        raise ValueError(f"unknown preset {name!r}")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("workdir")
        return d


@dataclass
class Figure:
    """One measured quantity on one store; ``samples`` are the runs (or trials)."""

    store: str
    scenario: str
    name: str
    unit: str
    samples: list[float]
    target: str = ""
    met: bool | None = None
    note: str = ""
    sample_kind: str = "runs"

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def min(self) -> float:
        return min(self.samples) if self.samples else math.nan

    @property
    def max(self) -> float:
        return max(self.samples) if self.samples else math.nan

    def expect(self, op: str, threshold: float, text: str | None = None,
               value: float | None = None) -> Figure:
        """Attach a target (``>=``, ``>``, ``<=``, ``<``) checked on the median (or ``value``)."""
        v = self.median if value is None else value
        checks = {">=": v >= threshold, ">": v > threshold, "<=": v <= threshold,
                  "<": v < threshold}
        self.met = bool(checks[op]) and not math.isnan(v)
        self.target = text or f"{op} {fmt(threshold)} {self.unit}".strip()
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store, "scenario": self.scenario, "name": self.name,
            "unit": self.unit, "median": _j(self.median), "min": _j(self.min),
            "max": _j(self.max), "n": len(self.samples), "sample_kind": self.sample_kind,
            "samples": [_j(s) for s in self.samples], "target": self.target, "met": self.met,
            "note": self.note,
        }


def _j(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else round(x, 6)


def fmt(x: float) -> str:
    """Human number: 3 significant digits for small values, thousands separators for big."""
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return "inf"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); the max for p=100."""
    if not values:
        return math.nan
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


@dataclass
class Outcome:
    """What one scenario produced on one store (figures, or the error that stopped it)."""

    store: str
    scenario: str
    figures: list[Figure] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


# -- isolation ------------------------------------------------------------------------------
def new_tag() -> str:
    return "tbench_" + uuid.uuid4().hex[:10]


def pg_schema(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


def pg_dsn_schema(url: str) -> tuple[str, str]:
    """(the DSN without tether's query, the schema) of an isolated PostgreSQL URL."""
    return url.split("?", 1)[0], pg_schema(url)


def redis_url_prefix(url: str) -> tuple[str, str]:
    """(the Redis URL without tether's query, the key prefix) of an isolated Redis URL."""
    return url.split("?", 1)[0], redis_prefix(url)


def redis_prefix(url: str) -> str:
    return parse_qs(urlsplit(url).query)["prefix"][0]


def sqlite_path(url: str) -> str:
    return url[len("sqlite:///"):]


def drop_pg_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def delete_redis_prefix(prefix: str) -> int:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    deleted = 0
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{prefix}:*", count=5000):
            batch.append(key)
            if len(batch) >= 2000:
                deleted += client.unlink(*batch)
                batch = []
        if batch:
            deleted += client.unlink(*batch)
    finally:
        client.close()
    return deleted


@contextmanager
def isolated(kind: str, cfg: Config) -> Iterator[str]:
    """A store URL of this run alone: its own SQLite file, PostgreSQL schema or Redis prefix,
    removed afterwards (never FLUSHALL, never another schema)."""
    tag = new_tag()
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tbench-", dir=cfg.workdir or None) as d:
            yield f"sqlite:///{Path(d) / (tag + '.db')}"
    elif kind == "postgres":
        try:
            yield f"{PG_DSN}?schema={tag}"
        finally:
            drop_pg_schema(tag)
    elif kind == "redis":
        try:
            yield f"{REDIS_URL}?prefix={tag}"
        finally:
            delete_redis_prefix(tag)
    else:
        raise ValueError(f"unknown store {kind!r}")
