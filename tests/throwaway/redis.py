"""A throwaway redis-server a test owns: started on a free loopback port, reconfigured, filled,
stopped, restarted or turned into a replica at will, killed by its PID afterwards.

Why: memory-limit, eviction, restart and data-loss tests must fill, reconfigure, crash or
restart a server, and the shared Redis on 6379 serves every other test; it is never
reconfigured, flushed or stopped. This is the suite's only helper that starts a redis-server.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from tests.ports import free_port


class ThrowawayRedis:
    """One ``redis-server --save ""`` on 127.0.0.1:<port>, in ``workdir``; without an
    append-only file unless ``appendonly`` (then fsynced as ``appendfsync`` says, the server's
    default everysec when None). :meth:`restart` keeps the port and the directory."""

    def __init__(self, workdir: Path, *, appendonly: bool = False,
                 appendfsync: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.binary = binary
        self.dir = workdir
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "yes" if self.appendonly else "no", "--daemonize", "no",
            "--dir", str(self.dir), "--loglevel", "warning",
        ]  # fmt: skip
        if self.appendfsync is not None:
            args += ["--appendfsync", self.appendfsync]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Stop this server only, by its PID. SIGKILL is a crash (nothing more is written);
        SIGTERM a clean shutdown (the append-only file is flushed)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        proc.wait(10)

    def restart(self, sig: int = signal.SIGKILL) -> None:
        """Stop (see :meth:`stop`) and start again on the same port and directory."""
        self.stop(sig)
        self.start()


@contextmanager
def throwaway_redis(workdir: Path, *, appendonly: bool = False,
                    appendfsync: str | None = None) -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis(workdir, appendonly=appendonly, appendfsync=appendfsync)
    try:
        yield server
    finally:
        server.stop()
