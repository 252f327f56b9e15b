"""A private redis-server for tests that restart, break or lose the data of a server.

The shared Redis on 6379 is used by every other test: it must never be flushed, restarted or
turned into a replica. Tests that need to do that start their own server on a free loopback
port, in a temporary directory, and stop it (by its PID, nothing else) afterwards.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class OwnRedis:
    """One redis-server process on 127.0.0.1:<port>; ``restart`` keeps the port."""

    def __init__(self, workdir: Path, *, appendonly: bool = False) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        self.binary = binary
        self.dir = workdir
        self.appendonly = appendonly
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True)

    def start(self) -> None:
        args = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "yes" if self.appendonly else "no", "--dir", str(self.dir),
            "--daemonize", "no", "--loglevel", "warning",
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            client = self.client()
            try:
                if client.ping():
                    return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
            finally:
                client.close()

    def stop(self, sig: int = signal.SIGKILL) -> None:
        """Stop this server only (by PID). SIGKILL is a crash; SIGTERM a clean shutdown."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        proc.wait(10)

    def restart(self, sig: int = signal.SIGKILL) -> None:
        self.stop(sig)
        self.start()
