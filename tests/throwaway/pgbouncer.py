"""A throwaway PgBouncer on a free loopback port, in front of the shared test server (issue 18, A).

Debian's ``pgbouncer`` refuses to run as root, so it runs as the ``postgres`` user, its ini,
userlist, log and pid file in a tmp dir chowned to it. ``auth_type = trust`` (loopback only,
the shared server trusts it too); ``default_pool_size`` is small so that clients really share
server connections, which is what breaks session state in ``pool_mode = transaction``. Only the
process started here is stopped, by its PID.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.ports import free_port
from tests.throwaway.postgres import _as_postgres, _own, as_postgres_cmd

BINARY = "/usr/sbin/pgbouncer"

_INI = """\
[databases]
{db} = host={host} port={port} dbname={db}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/userlist.txt
pool_mode = {mode}
default_pool_size = {pool_size}
max_client_conn = 200
server_reset_query = DISCARD ALL
server_reset_query_always = 0
logfile = {folder}/pgbouncer.log
pidfile = {folder}/pgbouncer.pid
"""


class Bouncer:
    """One pgbouncer process; :meth:`url` turns a test server URL into one through it."""

    def __init__(self, mode: str, *, pool_size: int = 4,
                 server: str = "postgresql://postgres@127.0.0.1:5432/test") -> None:
        # Not under pytest's tmp dir: its parents are private to root, and the postgres user
        # must reach its ini, log and pid file.
        self.folder = Path(tempfile.mkdtemp(prefix="tether-pgbouncer-"))
        self.folder.chmod(0o755)
        self.mode = mode
        self.pool_size = pool_size
        self.server = urlsplit(server)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.folder / "pgbouncer.log"

    def url(self, server_url: str) -> str:
        """``server_url`` (a URL of the shared server, query kept) through this bouncer."""
        parts = urlsplit(server_url)
        user = parts.username or "postgres"
        return urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{self.port}"))

    def start(self) -> None:
        _own(self.folder)
        db = self.server.path.lstrip("/")
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(_INI.format(
            db=db, host=self.server.hostname, port=self.server.port or 5432,
            listen=self.port, folder=self.folder, mode=self.mode, pool_size=self.pool_size))
        (self.folder / "userlist.txt").write_text(f'"{self.server.username}" ""\n')
        for path in (ini, self.folder / "userlist.txt"):
            _own(path)
        self.proc = subprocess.Popen(as_postgres_cmd([BINARY, "-q", str(ini)]),
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, **_as_postgres())
        dsn = f"host=127.0.0.1 port={self.port} user={self.server.username} dbname={db}"
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(dsn, connect_timeout=2, prepare_threshold=None):
                    return
            except psycopg.OperationalError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    self.stop()
                    raise RuntimeError(f"pgbouncer on {self.port} did not start: {err}"
                                       f"{self.log_text()}") from exc
                time.sleep(0.05)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGINT (PgBouncer's safe shutdown), then SIGKILL if it lingers; ours only."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(mode: str = "transaction", *, pool_size: int = 4) -> Iterator[Bouncer]:
    """A started :class:`Bouncer` in ``pool_mode = mode``, stopped (and its folder removed)
    on exit."""
    bouncer = Bouncer(mode, pool_size=pool_size)
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.stop()


__all__ = ["Bouncer", "pgbouncer"]
