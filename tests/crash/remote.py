"""Real ``tether server`` subprocesses for the remote crash tests (issue #21).

A :class:`Server` runs ``tether server --url STORE --listen 127.0.0.1:PORT --token-file FILE``
on a port chosen once, so a test can SIGKILL it and start it again *on the same port*: the
workers' ``tether://`` URL does not change, which is what a restarted server behind a fixed
address looks like to a fleet. Readiness is a condition (the port accepts connections and the
server answers through a ``tether://`` store), never a sleep.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.crash.harness import APP, REPO, wait_for
from tether.stores import Store, open_store


def free_port() -> int:
    """A loopback port nothing listens on now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Tokens:
    """A token file with one worker and one admin token (``TOKEN ROLE`` per line)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.worker = "w" + secrets.token_hex(16)
        self.admin = "a" + secrets.token_hex(16)
        self.path = folder / "tokens"
        self.path.write_text(f"# tokens of one test\n{self.worker} worker\n{self.admin} admin\n")
        self.path.chmod(0o600)


def remote_url(token: str, *ports: int) -> str:
    """``tether://TOKEN@127.0.0.1:P1[,127.0.0.1:P2...]``."""
    return f"tether://{token}@" + ",".join(f"127.0.0.1:{p}" for p in ports)


class Server:
    """One ``tether server`` subprocess in front of ``store_url``, restartable on its port."""

    def __init__(self, store_url: str, folder: Path, tokens: Tokens, name: str,
                 *extra: str, app: str | None = APP, lease_ttl: float = 2.0) -> None:
        self.store_url = store_url
        self.app = app
        self.lease_ttl = lease_ttl
        self.folder = folder
        self.tokens = tokens
        self.name = name
        self.extra = extra
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        """What a worker puts in TETHER_URL (the worker token)."""
        return remote_url(self.tokens.worker, self.port)

    @property
    def log(self) -> Path:
        return self.folder / f"server-{self.name}.log"

    def start(self) -> Server:
        assert self.proc is None or self.proc.poll() is not None, f"{self} is running"
        self.starts += 1
        # The server's maintenance runs with the workers' app and settings (``tether server
        # MODULE:APP``): with the defaults it would lead the reaper's election with a 30 s
        # lease's timing and reap the 2 s leases of the test's workers late (it logs that).
        env = {**os.environ, "TETHER_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1",
               "TETHER_TEST_DIR": str(self.folder / f"server-{self.name}"),
               "TETHER_TEST_LEASE_TTL": str(self.lease_ttl)}
        (self.folder / f"server-{self.name}").mkdir(parents=True, exist_ok=True)
        env.pop("TETHER_URL", None)
        env.pop("TETHER_TOKEN", None)
        with open(self.log, "ab") as out:
            out.write(f"--- start {self.starts} at {time.time():.3f}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tether._cli.main", "server",
                 *([self.app] if self.app else []), "--url", self.store_url,
                 "--listen", f"127.0.0.1:{self.port}", "--token-file", str(self.tokens.path),
                 *self.extra],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Until the server answers a call through ``tether://``; returns that wall time."""
        def ready() -> bool:
            assert self.alive(), f"{self} exited while starting:\n{self.log_text()}"
            if not _listening(self.port):
                return False
            probe = open_store(self.url)
            try:
                probe.now()
                return True
            except Exception:  # not serving yet (any error): keep waiting
                return False
            finally:
                probe.close()

        wait_for(ready, timeout, f"{self} to serve", interval=0.05)
        return time.time()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> float:
        """SIGKILL and reap; returns the wall time of the kill."""
        assert self.proc is not None
        at = time.time()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        return at

    def close(self) -> None:
        """SIGKILL if still running, by pid, and reap."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - should never happen
                pass

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"

    def __repr__(self) -> str:
        rc = None if self.proc is None else self.proc.poll()
        return f"<tether server {self.name} port={self.port} rc={rc}>"


def open_remote(server: Server, *others: Server, admin: bool = False) -> Store:
    """A ``tether://`` store on one or several servers (the worker token unless ``admin``)."""
    token = server.tokens.admin if admin else server.tokens.worker
    return open_store(remote_url(token, server.port, *(o.port for o in others)))
