"""The fault proxy itself, against the real Redis and PostgreSQL: each fault does what it says."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import psycopg
import pytest
import redis

from tests.faults import LOOPBACK, FaultProxy
from tests.servers import PG_DSN, REDIS_URL


def test_passes_traffic_and_drops_one_reply_after_the_write(
    fault_proxy: Callable[[str], FaultProxy],
) -> None:
    proxy = fault_proxy("redis")
    direct = redis.Redis.from_url(REDIS_URL)
    client = redis.Redis.from_url(proxy.url(REDIS_URL), retry_on_timeout=False, retry=None)
    key = f"faulttest:{time.time_ns()}"
    try:
        assert client.set(key + ":a", "1")
        proxy.drop_next_reply(match=key.encode() + b":b")
        with pytest.raises(redis.ConnectionError):
            client.set(key + ":b", "2")
        assert proxy.dropped == 1
        assert direct.get(key + ":b") == b"2"  # the write happened; only the reply was lost
        assert client.get(key + ":a") == b"1"  # a new connection works again
    finally:
        direct.delete(key + ":a", key + ":b")
        direct.close()
        client.close()


@pytest.mark.slow
def test_refuse_then_recover(fault_proxy: Callable[[str], FaultProxy]) -> None:
    proxy = fault_proxy("postgres")
    url = proxy.url(PG_DSN)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        proxy.refuse(1.0)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    deadline = time.monotonic() + 10
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                assert conn.execute("SELECT 2").fetchone() == (2,)
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, "the proxy never listened again"
            time.sleep(0.05)


def test_delay_adds_latency(fault_proxy: Callable[[str], FaultProxy]) -> None:
    proxy = fault_proxy("redis")
    client = redis.Redis.from_url(proxy.url(REDIS_URL))
    try:
        client.ping()
        proxy.delay(0.2)
        started = time.monotonic()
        client.ping()
        # One request and one reply each wait 0.2 s: the ping cannot come back sooner.
        assert time.monotonic() - started >= 0.4
    finally:
        client.close()


def test_cut_closes_live_connections(fault_proxy: Callable[[str], FaultProxy]) -> None:
    rproxy = fault_proxy("redis")
    client = redis.Redis.from_url(rproxy.url(REDIS_URL), retry=None, retry_on_timeout=False)
    try:
        client.ping()
        assert rproxy.accepted == 1
        rproxy.cut()
        # redis-py notices the closed idle socket and reconnects: a second connection.
        assert client.ping()
        assert rproxy.accepted == 2
    finally:
        client.close()
    pproxy = fault_proxy("postgres")
    with psycopg.connect(pproxy.url(PG_DSN), autocommit=True) as conn:
        conn.execute("SELECT 1")
        pproxy.cut()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")


def test_blackhole_holds_traffic_without_closing_anything(
    fault_proxy: Callable[[str], FaultProxy],
) -> None:
    """A silent partition: a live connection's request gets no reply (a read times out; no
    FIN, no RST), a new connection is accepted but never answered; on ``heal()`` what was
    held is delivered (the write reaches the server) and the old connection works again."""
    proxy = fault_proxy("redis")
    direct = redis.Redis.from_url(REDIS_URL)
    key = f"faulttest:{time.time_ns()}"
    live = socket.create_connection((LOOPBACK, proxy.port), timeout=5)
    try:
        live.sendall(b"PING\r\n")
        assert live.recv(64) == b"+PONG\r\n"
        proxy.blackhole()
        assert proxy.blackholing
        live.settimeout(0.5)
        live.sendall(f"SET {key} held\r\n".encode())
        with pytest.raises(TimeoutError):  # not b"" (FIN), not ConnectionResetError (RST)
            live.recv(64)
        fresh = socket.create_connection((LOOPBACK, proxy.port), timeout=5)  # accepted
        fresh.settimeout(0.5)
        fresh.sendall(b"PING\r\n")
        with pytest.raises(TimeoutError):
            fresh.recv(64)
        assert direct.get(key) is None  # nothing reached the server
        proxy.heal()
        assert not proxy.blackholing
        live.settimeout(5)
        assert live.recv(64) == b"+OK\r\n"  # held, then delivered: the write happened
        assert direct.get(key) == b"held"
        fresh.settimeout(5)
        assert fresh.recv(64) == b"+PONG\r\n"
        fresh.close()
    finally:
        live.close()
        direct.delete(key)
        direct.close()


@pytest.mark.slow  # waits out a 2 s connect timeout
def test_blackhole_for_seconds_times_out_a_postgres_connect(
    fault_proxy: Callable[[str], FaultProxy],
) -> None:
    proxy = fault_proxy("postgres")
    url = proxy.url(PG_DSN)
    proxy.blackhole(30.0)
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="timeout"):
        psycopg.connect(url, connect_timeout=2)
    assert time.monotonic() - started >= 2.0  # waited for the reply, was never refused
    proxy.heal()
    with psycopg.connect(url, connect_timeout=5) as conn:
        assert conn.execute("SELECT 3").fetchone() == (3,)
