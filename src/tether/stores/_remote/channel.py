"""Calls to a tether server: one channel per host, failover, deadlines, errors mapped.

Invariants:

* A call either returns the server's reply or raises one of the contract's errors: the
  server's own (named in the trailing metadata, re-raised as the same type) or, for any
  transport failure (refused, reset, deadline), :class:`StoreUnavailable`.
* A transport failure is retried with the *same request bytes* (so an enqueue's or a claim's
  request id goes with them) on the next host, every host at least twice and for at most
  :data:`RETRY_BUDGET` seconds, before it surfaces. With several hosts, a call's deadline
  passing without a reply (a hung server) is one too.
  Every method of the contract is safe to send twice (fenced, idempotent, or deduplicated by
  request id), which is what makes this retry, and failover, safe.
* A server's named error is never retried here: the caller decides (a worker rides out
  StoreUnavailable, stops claiming on StoreFull). An AuthError is never retried anywhere.
* Non-waiting calls carry a deadline (the store's ``deadline``, as every network store's:
  :mod:`tether.stores._deadline`, 5 s unless the URL says ``?deadline=``), so a silent
  network cannot hang a caller; long polls carry their own wait plus a short margin.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from tether._errors import StoreUnavailable
from tether._wire.errors import ERROR_KEY, JOB_ID_KEY, error_of
from tether.stores._remote.url import RemoteURL

__all__ = ["Channels", "channel_options"]

M = TypeVar("M", bound=Message)

SERVICE = "/tether.v1.Store/"
#: Pause between two rounds of tries after a transport failure (a reconnect needs a moment).
RETRY_PAUSE = 0.1
#: How long a call keeps trying after transport failures (every host at least twice): long
#: enough to ride out a lost reply or a server's restart behind the client's reconnect
#: backoff (at most 200 ms), short enough that an outage surfaces as StoreUnavailable at once.
RETRY_BUDGET = 0.6
#: Most margin added to a long poll's deadline beyond its wait (the server answers on its
#: own timer; the store's deadline when that is shorter).
WAIT_MARGIN = 2.0


def channel_options(max_message_bytes: int = 16 << 20) -> list[tuple[str, Any]]:
    """Fast reconnects (a restarted server is found within a second, not gRPC's default of
    up to two minutes), keepalive pings that notice a dead connection, the size limit."""
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 200),
        ("grpc.keepalive_time_ms", 10_000),
        ("grpc.keepalive_timeout_ms", 5_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.enable_retries", 0),
    ]


def _serialize(message: Message) -> bytes:
    data: bytes = message.SerializeToString()
    return data


def _credentials(url: RemoteURL) -> grpc.ChannelCredentials:
    root = None
    if url.ca_file:
        with open(url.ca_file, "rb") as handle:
            root = handle.read()
    return grpc.ssl_channel_credentials(root_certificates=root)


class Channels:
    """The channels to a server's hosts, and the one place calls are made."""

    def __init__(self, url: RemoteURL, deadline: float) -> None:
        self.url = url
        self.deadline = deadline
        self._lock = threading.Lock()
        self._channels: list[grpc.Channel | None] = [None] * len(url.hosts)
        self._calls: dict[tuple[int, str], Callable[..., Any]] = {}
        self._current = 0
        self._closed = False
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"bearer {url.token}"),) if url.token else ())

    def _callable(self, index: int, rpc: str, reply: type[Message]) -> Callable[..., Any]:
        key = (index, rpc)
        found = self._calls.get(key)
        if found is not None:
            return found
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the tether:// store is closed")
            channel = self._channels[index]
            if channel is None:
                host, port = self.url.hosts[index]
                target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
                channel = (grpc.secure_channel(target, _credentials(self.url),
                                               channel_options())
                           if self.url.tls else
                           grpc.insecure_channel(target, channel_options()))
                self._channels[index] = channel
            made = channel.unary_unary(SERVICE + rpc, request_serializer=_serialize,
                                       response_deserializer=reply.FromString)
            self._calls[key] = made
            return made

    def call(self, rpc: str, request: Message, reply: type[M], *,
             wait: float | None = None, timeout: float | None = None) -> M:
        """``rpc`` with ``request``; ``wait``: the long poll's own wait (seconds);
        ``timeout``: this call's deadline instead of the store's."""
        if timeout is None:
            timeout = (self.deadline if wait is None
                       else wait + min(WAIT_MARGIN, self.deadline))
        hosts = len(self.url.hosts)
        started = time.monotonic()
        attempt = 0
        while True:
            index = (self._current + attempt) % hosts
            fn = self._callable(index, rpc, reply)
            try:
                result: M = fn(request, timeout=timeout, metadata=self.metadata)
            except grpc.RpcError as err:
                failure = self._failure(err)
                if failure is not None:
                    raise failure from None
                attempt += 1
                if (attempt >= 2 * hosts
                        and time.monotonic() - started + RETRY_PAUSE > RETRY_BUDGET):
                    raise StoreUnavailable(self._describe(err)) from None
                if attempt % hosts == 0:  # every host failed once more: a pause
                    time.sleep(RETRY_PAUSE)
                continue
            if attempt:
                self._current = index  # stay on the host that answered
            return result

    def _failure(self, err: grpc.RpcError) -> Exception | None:
        """The error to raise at once, or None for a transport failure worth a retry."""
        code: grpc.StatusCode | None = err.code() if isinstance(err, grpc.Call) else None
        trailing: dict[str, Any] = (dict(err.trailing_metadata() or ())
                                    if isinstance(err, grpc.Call) else {})
        name = trailing.get(ERROR_KEY)
        details = (err.details() if isinstance(err, grpc.Call) else None) or str(err)
        if name is None and code in (grpc.StatusCode.UNAVAILABLE, None):
            return None
        if name is None and code == grpc.StatusCode.DEADLINE_EXCEEDED:
            # A hung server (stopped, or behind a network that drops packets) answers
            # nothing: the deadline is all that comes back. With other hosts, that is a
            # transport failure like a refused connection: try the next one (every call is
            # safe to send twice), or the worker's leases run out while another server is up.
            if len(self.url.hosts) > 1:
                return None
            return StoreUnavailable(self._describe(err))
        job_id = trailing.get(JOB_ID_KEY)
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            details = f"the tether server at {self._hosts()} {details}"
        return error_of(code, name if isinstance(name, str) else None, details,
                        job_id if isinstance(job_id, str) else None)

    def _hosts(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.url.hosts)

    def _describe(self, err: grpc.RpcError) -> str:
        details = err.details() if isinstance(err, grpc.Call) else str(err)
        return f"the tether server at {self._hosts()} is unreachable: {details}"

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, [None] * len(self.url.hosts)
            self._calls.clear()
        for channel in channels:
            if channel is not None:
                channel.close()
