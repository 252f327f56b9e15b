"""A throwaway redis-server a test owns: started on a free loopback port, reconfigured and
filled at will (``CONFIG SET maxmemory`` / ``maxmemory-policy``), stopped by its PID.

Why: memory-limit and eviction tests must fill or reconfigure a server, and the shared Redis on
6379 serves every other test; it is never reconfigured.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ThrowawayRedis:
    """One ``redis-server --save "" --appendonly no`` on 127.0.0.1:<port>, in ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.dir = workdir
        self.port = free_port()
        args = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--dir", str(workdir),
            "--loglevel", "warning",
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 10
        while True:
            client = self.client()
            try:
                if client.ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline or (self.proc and self.proc.poll() is not None):
                    raise
                time.sleep(0.02)
            finally:
                client.close()

    def config(self, name: str, value: str | int) -> None:
        with contextlib.closing(self.client()) as c:
            c.config_set(name, value)

    def used_memory(self) -> int:
        with contextlib.closing(self.client()) as c:
            return int(c.info("memory")["used_memory"])

    def fill(self, chunk: int = 64 * 1024, margin: int = 2 * 1024 * 1024) -> int:
        """Put the server at its limit under ``noeviction``: maxmemory a little above what it
        uses now, then filler keys (``filler:N``, outside any tether prefix) until it refuses
        writes. Returns the maxmemory set."""
        self.config("maxmemory-policy", "noeviction")
        limit = self.used_memory() + margin
        self.config("maxmemory", limit)
        with contextlib.closing(self.client()) as c:
            for n in range(100_000):
                try:
                    c.set(f"filler:{n}", "x" * chunk)
                except redis.exceptions.OutOfMemoryError:
                    break
            else:
                raise AssertionError("the server never refused a write")
        # Usage wobbles (client buffers, expiring keys): a limit a little under what is used
        # keeps the server refusing until the test frees memory.
        limit = self.used_memory() - margin // 2
        self.config("maxmemory", limit)
        return limit

    def unlimit(self) -> None:
        """Memory frees: no limit any more."""
        self.config("maxmemory", 0)

    def stop(self) -> None:
        """Stop this server only, by its PID."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        proc.wait(10)


@contextmanager
def throwaway_redis(workdir: Path) -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis(workdir)
    try:
        yield server
    finally:
        server.stop()
