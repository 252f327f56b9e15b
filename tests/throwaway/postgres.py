"""Throwaway PostgreSQL clusters: a primary and its streaming standby, on free loopback ports.

For tests that kill, promote or fail over a server (issue 18, B): the shared server on 5432 is
never touched. ``initdb`` refuses to run as root, so every PostgreSQL binary runs as the
``postgres`` user, on data directories under the test's tmp dir chowned to it. Only the
processes started here are stopped, by the postmaster's PID.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.ports import free_port
from tests.processes import children

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "postgres"



def _as_postgres() -> dict[str, Any]:
    """Popen arguments that run a PostgreSQL binary as the postgres user when we are root
    (with :func:`as_postgres_cmd`'s command)."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(USER)
    return {"env": {**os.environ, "HOME": entry.pw_dir, "USER": USER}}


def as_postgres_cmd(args: list[str]) -> list[str]:
    """``args`` run as the postgres user when we are root, through ``setpriv``.

    Not ``preexec_fn`` (nor Popen's ``user=``): both make CPython fork() instead of vfork(),
    and a fork() of a test process that has loaded gRPC runs gRPC's fork handlers in the
    child, with the parent's other threads gone; CI saw the child die before its exec
    (pgbouncer "did not start", its only output a gRPC epoll error). ``setpriv`` drops the
    ids after a plain exec, so no Python or library code runs between fork and exec."""
    if os.geteuid() != 0:
        return args
    entry = pwd.getpwnam(USER)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
            *args]


def _run(*args: str) -> None:
    done = subprocess.run(as_postgres_cmd(list(args)), capture_output=True, text=True,
                          timeout=120, check=False, **_as_postgres())
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr or done.stdout}")


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


class Cluster:
    """One postmaster on 127.0.0.1:<port> over ``datadir``."""

    def __init__(self, datadir: Path, port: int) -> None:
        self.datadir = datadir
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname=postgres"

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        log = (self.datadir.parent / f"{self.datadir.name}.log").open("ab")
        self.proc = subprocess.Popen(
            as_postgres_cmd([str(BIN / "postgres"), "-D", str(self.datadir), "-p",
                             str(self.port), "-k", str(self.datadir), "-h", "127.0.0.1"]),
            stdout=log, stderr=log, **_as_postgres(),
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"postgres on {self.port} did not start: see "
                                       f"{log.name}") from exc
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash: no shutdown checkpoint, nothing flushed to the
        standby), then its children: a killed postmaster leaves its backends running."""
        if self.proc is None or self.proc.poll() is not None:
            return
        backends = children(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        for pid in backends:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(statement.encode())
            return cur.fetchall() if cur.description else []


class Replicated:
    """A primary and one asynchronous streaming standby (pg_basebackup -R)."""

    def __init__(self, *, synchronous: bool = False) -> None:
        if not (BIN / "initdb").exists():
            pytest.skip("PostgreSQL 15 binaries are not installed")
        # Not under pytest's tmp dir: its parents are private to root, and the postgres user
        # must reach the data directories.
        root = Path(tempfile.mkdtemp(prefix="tether-pg-"))
        root.chmod(0o755)
        _own(root)
        self.root = root
        self.primary = Cluster(root / "primary", free_port())
        _run(str(BIN / "initdb"), "-D", str(self.primary.datadir), "-U", USER, "-A", "trust",
             "--no-sync")
        with (self.primary.datadir / "postgresql.conf").open("a") as conf:
            conf.write("wal_level = replica\nmax_wal_senders = 5\nfsync = off\n"
                       "listen_addresses = '127.0.0.1'\nsynchronous_commit = on\n")
        with (self.primary.datadir / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self.primary.start()
        self.standby = Cluster(root / "standby", free_port())
        _run(str(BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port),
             "-U", USER, "-D", str(self.standby.datadir), "-R", "-X", "stream", "--no-sync")
        self.standby.start()
        if synchronous:  # a commit returns once the standby has it (synchronous_commit = on)
            self.primary.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
            self.primary.sql("SELECT pg_reload_conf()")

    def url(self, db: str = "postgres") -> str:
        """A multi-host URL that follows the writable server (libpq's failover)."""
        return (f"postgresql://{USER}@127.0.0.1:{self.primary.port},127.0.0.1:"
                f"{self.standby.port}/{db}?target_session_attrs=read-write&connect_timeout=2")

    def caught_up(self) -> bool:
        """The standby replayed everything the primary wrote so far."""
        (lsn,) = self.primary.sql("SELECT pg_current_wal_lsn()::text")[0]
        rows = self.standby.sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")
        return bool(rows[0][0])

    def wait_caught_up(self, timeout: float = 60.0) -> None:
        """Wait (on the condition, generously bounded) until the standby replayed everything."""
        deadline = time.monotonic() + timeout
        while not self.caught_up():
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby did not catch up within {timeout} s")
            time.sleep(0.01)

    def promote(self) -> None:
        """Promote the standby and wait until it accepts writes."""
        self.standby.sql("SELECT pg_promote(wait => true)")

    def stop(self) -> None:
        for cluster in (self.standby, self.primary):
            cluster.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def replicated(*, synchronous: bool = False) -> Iterator[Replicated]:
    pair = Replicated(synchronous=synchronous)
    try:
        yield pair
    finally:
        pair.stop()


class Single:
    """One throwaway server (no standby), for tests that restart or crash it (issue #22: a
    restart must not look like every worker's death)."""

    def __init__(self) -> None:
        if not (BIN / "initdb").exists():
            pytest.skip("PostgreSQL 15 binaries are not installed")
        root = Path(tempfile.mkdtemp(prefix="tether-pg-"))
        root.chmod(0o755)
        _own(root)
        self.root = root
        self.cluster = Cluster(root / "data", free_port())
        _run(str(BIN / "initdb"), "-D", str(self.cluster.datadir), "-U", USER, "-A", "trust",
             "--no-sync")
        with (self.cluster.datadir / "postgresql.conf").open("a") as conf:
            conf.write("fsync = off\nlisten_addresses = '127.0.0.1'\nmax_connections = 200\n")
        self.cluster.start()

    def url(self) -> str:
        return self.cluster.url()

    def restart(self) -> None:
        """A fast shutdown (every session is ended) and a start on the same port."""
        proc = self.cluster.proc
        assert proc is not None
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        self.cluster.start()

    def crash_reset(self) -> None:
        """One backend dies by SIGKILL (as the OOM killer does it): the postmaster ends every
        session and reinitialises, without restarting (its start time does not change).
        Returns once it accepts connections again."""
        sentinel = psycopg.connect(self.cluster.dsn, autocommit=True)
        with psycopg.connect(self.cluster.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            os.kill(int(row[0]), signal.SIGKILL)  # a backend of our own server
        deadline = time.monotonic() + 60
        while True:  # the reset ends every other session: the sentinel's too
            try:
                sentinel.execute("SELECT 1")
            except psycopg.Error:
                sentinel.close()
                break
            if time.monotonic() > deadline:
                raise AssertionError("the server did not reset its sessions")
            time.sleep(0.02)
        while True:
            try:
                with psycopg.connect(self.cluster.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        self.cluster.kill()
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def single() -> Iterator[Single]:
    server = Single()
    try:
        yield server
    finally:
        server.stop()
