"""A private redis-server that the test stops and restarts: errors are StoreUnavailable while
it is down, and afterwards the store reconnects, reloads its scripts (NOSCRIPT) and wakes
waiters again. The server is this test's own process, on a free loopback port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.helpers import WAKE_WAIT, wake_with
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Outcome
from tether.stores._redis.store import RedisStore

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        self.port = _free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.workdir), "--save", "", "--appendonly", "yes",
            "--appendfsync", "always", "--maxmemory-policy", "noeviction",
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("private redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # a crash, not a clean shutdown
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PrivateRedis]:
    srv = PrivateRedis(tmp_path)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def test_store_survives_a_server_restart(server: PrivateRedis) -> None:
    store = RedisStore(f"redis://127.0.0.1:{server.port}/0?prefix=r", socket_timeout=2.0)
    try:
        store.migrate()
        t0 = store.now()
        ids = store.enqueue([NewJob("t"), NewJob("u")], now=t0)
        (first,) = store.claim("w", ["default"], 1, 30, now=t0)
        store.wait_for_jobs(["-"], 0.05)  # may wake at once: the claim came before subscribing
        assert store.wait_for_jobs(["-"], 0.05) is False  # the listener is subscribed

        server.stop()
        with pytest.raises(StoreUnavailable):
            store.claim("w", ["default"], 1, 30, now=t0)
        with pytest.raises(StoreUnavailable):
            store.finish([Outcome(first.lease, "done")], now=t0)

        server.start()  # AOF (fsync always) brings the jobs back; the script cache is empty
        deadline = time.monotonic() + 10
        while True:
            try:
                (second,) = store.claim("w", ["default"], 1, 30, now=t0)
                break
            except StoreUnavailable:
                assert time.monotonic() < deadline, "the store never reconnected"
                time.sleep(0.05)
        assert {first.id, second.id} == set(ids)
        assert store.finish([Outcome(first.lease, "done", result="1")], now=t0 + 1) == []

        # wake-ups work again once the listener has resubscribed (spurious ones allowed)
        deadline = time.monotonic() + 10
        while store.wait_for_jobs(["q"], 0.05):
            assert time.monotonic() < deadline
        # Poked until it returns (one enqueue before it was waiting may be missed); woken,
        # it returns long before its WAKE_WAIT timeout, which it would sleep out otherwise.
        woken, elapsed = wake_with(store, lambda: store.enqueue([NewJob("t", queue="q")]),
                                   queues=["q"])
        assert woken is True
        assert elapsed < WAKE_WAIT / 2
    finally:
        store.close()
