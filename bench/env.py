"""What the report header states: the machine, the software versions, the date."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sqlite3
from typing import Any

import tether
from bench.common import PG_DSN, REDIS_URL


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _pg_version() -> str:
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "unknown"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


def _redis_version() -> str:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_timeout=3)
        try:
            return str(client.info("server")["redis_version"])
        finally:
            client.close()
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


def describe() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": {
            "cpu_model": _cpu_model(),
            "cores": os.cpu_count(),
            "memory_gib": _mem_total_gib(),
            "kernel": platform.release(),
            "loadavg_at_start": [round(x, 2) for x in load],
        },
        "versions": {
            "python": platform.python_version(),
            "tether": tether.__version__,
            "sqlite": sqlite3.sqlite_version,
            "postgresql": _pg_version(),
            "redis": _redis_version(),
        },
    }
