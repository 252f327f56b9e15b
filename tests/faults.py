"""A loopback TCP proxy for fault injection against the real PostgreSQL and Redis servers.

Tests point a store at the proxy instead of the server and then break the network on purpose:

* ``refuse(seconds)``: cut every live connection and refuse new ones (the listening socket is
  closed, so the kernel answers RST) for ``seconds``, then listen again on the same port;
* ``cut()``: close every live connection now (both directions);
* ``drop_next_reply(match)``: the next request whose bytes contain ``match`` (any request when
  None) is forwarded to the server, and the server's reply to it is swallowed and the client's
  connection closed: the write happened, the client never hears of it (a lost reply);
* ``delay(seconds)``: add latency to every forwarded chunk, both ways;
* ``blackhole(seconds=None)``: a silent partition, until ``heal()`` (or for ``seconds``):
  live connections stay open and new ones are accepted, but nothing is forwarded either way,
  and no FIN or RST is ever sent. What a side sent meanwhile is held, not lost, and delivered
  once the partition heals (as TCP retransmits it then), unless that connection was closed.
  (A real partition leaves the sender's data unacknowledged, so its kernel's keepalive and
  TCP_USER_TIMEOUT notice; on loopback the proxy's kernel acknowledges everything, so only
  the client's own timeouts can: which is what a test of them needs.)

It never mocks the server: every byte the client sends reaches the real one (unless refused),
so a test sees what the real server did. Only loopback addresses are used.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit

LOOPBACK = "127.0.0.1"


class _Pair:
    """One client connection and its upstream connection."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.drop_reply = False
        self.closed = False

    def close(self) -> None:
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        if target_host not in (LOOPBACK, "localhost", "::1"):
            raise ValueError("the fault proxy only talks to loopback servers")
        self.target = (target_host, target_port)
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._latency = 0.0
        self._drop_match: bytes | None = None
        self._drop_armed = False
        self._refuse_until = 0.0
        self._hole_until = 0.0  # black hole while monotonic() < this (inf: until heal())
        self._stopped = threading.Event()
        self._listener = self._listen(0)
        self.port: int = self._listener.getsockname()[1]
        self.dropped = 0  # replies swallowed so far
        self.accepted = 0  # client connections accepted so far
        self._acceptor = threading.Thread(target=self._accept_loop, name="fault-proxy",
                                          daemon=True)
        self._acceptor.start()

    # -- the faults -------------------------------------------------------------------------
    def refuse(self, seconds: float) -> None:
        """Cut live connections and refuse new ones for ``seconds`` (non-blocking)."""
        with self._lock:
            self._refuse_until = time.monotonic() + seconds
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()
        self.cut()

    def restore(self) -> None:
        """End a ``refuse`` early."""
        with self._lock:
            self._refuse_until = 0.0

    @property
    def refusing(self) -> bool:
        return time.monotonic() < self._refuse_until

    def wait_back(self, timeout: float = 10.0) -> bool:
        """Block until a ``refuse`` is over AND the proxy listens again (the acceptor re-opens
        its port within ~20 ms of the refusal's end): from then on a connection succeeds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._listener is not None and time.monotonic() >= self._refuse_until:
                    return True
            time.sleep(0.005)
        return False

    @property
    def refusal_left(self) -> float:
        """Seconds until a ``refuse`` ends (0 when not refusing)."""
        return max(0.0, self._refuse_until - time.monotonic())

    def blackhole(self, seconds: float | None = None) -> None:
        """Stop forwarding anything, both ways, on live and new connections, without closing
        any, until :meth:`heal` (or for ``seconds``). Non-blocking."""
        with self._lock:
            self._hole_until = (math.inf if seconds is None
                                else time.monotonic() + max(0.0, seconds))

    def heal(self) -> None:
        """End a black hole: what was held is forwarded, and traffic flows again."""
        with self._lock:
            self._hole_until = 0.0

    @property
    def blackholing(self) -> bool:
        return time.monotonic() < self._hole_until

    def cut(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()

    def drop_next_reply(self, match: bytes | None = None) -> None:
        with self._lock:
            self._drop_match = match
            self._drop_armed = True

    @property
    def drop_pending(self) -> bool:
        """True while an armed drop has not met its request yet."""
        return self._drop_armed

    def delay(self, seconds: float) -> None:
        self._latency = max(0.0, seconds)

    def url(self, original: str) -> str:
        """``original`` with its host:port replaced by the proxy's."""
        parts = urlsplit(original)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo + '@' if userinfo else ''}{LOOPBACK}:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()
        self.cut()
        self._acceptor.join(5)

    # -- plumbing ---------------------------------------------------------------------------
    def _listen(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, port))
        sock.listen(64)
        sock.settimeout(0.05)
        return sock

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                listener = self._listener
                refusing = time.monotonic() < self._refuse_until
            if listener is None:
                if refusing:
                    time.sleep(0.02)
                    continue
                try:
                    fresh = self._listen(self.port)
                except OSError:
                    time.sleep(0.05)
                    continue
                with self._lock:
                    self._listener = fresh
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
                self.accepted += 1
            threading.Thread(target=self._pump, args=(pair, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, False), daemon=True).start()

    def _pump(self, pair: _Pair, upstream_bound: bool) -> None:
        src, dst = (pair.client, pair.upstream) if upstream_bound else (pair.upstream,
                                                                         pair.client)
        try:
            while True:
                data = src.recv(65536)
                # A partition holds what was sent, a hang-up (FIN) included, until it heals:
                # TCP delivers both then. A cut pair or a stopped proxy ends the wait.
                while (self.blackholing and not pair.closed
                       and not self._stopped.is_set()):
                    time.sleep(0.01)
                if not data or pair.closed:
                    break
                if self._latency:
                    time.sleep(self._latency)
                if upstream_bound:
                    with self._lock:
                        if self._drop_armed and (self._drop_match is None
                                                 or self._drop_match in data):
                            self._drop_armed = False
                            pair.drop_reply = True
                    dst.sendall(data)
                elif pair.drop_reply:
                    # The server answered the request we were told to lose: swallow the reply
                    # and hang up, as a network that died at exactly this moment would.
                    self.dropped += 1
                    break
                else:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            pair.close()
            with self._lock:
                if pair in self._pairs:
                    self._pairs.remove(pair)
