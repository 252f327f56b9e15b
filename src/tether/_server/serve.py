"""TetherServer: a store served over gRPC, on an event loop of its own thread.

Invariant: the server keeps no state a restart would lose. It holds the store (opened by its
caller), a thread pool for blocking store calls (``max_workers`` threads: what bounds the
store connections the server's calls use) and the wake hub; every lease, job and request id
lives in the store, so servers can be killed, restarted and run side by side in front of one
store. ``stop`` ends long polls at once, lets running calls finish within ``grace`` seconds,
and never closes the store (its opener does).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import grpc

from tether._errors import ConfigError
from tether._server.auth import Authorizer
from tether._server.service import StoreService
from tether.stores import Store

if TYPE_CHECKING:
    from tether._server.tls import ServerTLS

__all__ = ["TetherServer", "server_options"]

log = logging.getLogger("tether.server")


def server_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    """gRPC server options: the message size limit both ways, and keepalive pings from
    clients allowed (a client pings to find a dead connection before its deadline does)."""
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        # gRPC binds with SO_REUSEPORT by default: a second server started on a port in use
        # (say, in front of another store) bound it too and took half the calls, silently.
        ("grpc.so_reuseport", 0),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_ping_strikes", 0),
    ]


class TetherServer:
    def __init__(self, store: Store, *, listen: str = "127.0.0.1:0",
                 authorizer: Authorizer | None = None, tls: ServerTLS | None = None,
                 trust_client_clock: bool = False, max_message_bytes: int = 16 << 20,
                 max_workers: int = 64) -> None:
        self.store = store
        self.listen = listen
        self.authorizer = authorizer if authorizer is not None else Authorizer(None)
        self.tls = tls
        self.trust_client_clock = trust_client_clock
        self.max_message_bytes = max_message_bytes
        self.max_workers = max_workers
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpc.aio.Server | None = None
        self._service: StoreService | None = None
        self._started = threading.Event()
        self._stopped = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> int:
        """Bind and serve (on a thread of its own); returns the bound port."""
        if self._thread is not None:
            return self.port
        self._thread = threading.Thread(target=self._main, name="tether-server", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        return self.port

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving: long polls end now, other calls get ``grace`` seconds."""
        loop, server, service = self._loop, self._server, self._service
        if loop is None or server is None or self._stopped.is_set():
            return
        if service is not None:
            service.hub.close()
        future = asyncio.run_coroutine_threadsafe(server.stop(grace), loop)
        try:
            future.result(grace + 5)
        except Exception as exc:  # pragma: no cover - the loop died already
            log.debug("stopping the server: %s", exc)
        self.wait()

    def wait(self) -> None:
        """Block until the server has stopped."""
        if self._thread is not None:
            self._thread.join()

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # pragma: no cover - reported by start()
            self._error = exc
            self._started.set()
        finally:
            self._stopped.set()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="tether-server-store")
        service = StoreService(self.store, self.authorizer,
                               trust_client_clock=self.trust_client_clock, pool=pool,
                               loop=loop)
        server = grpc.aio.server(options=server_options(self.max_message_bytes))
        server.add_generic_rpc_handlers((service.generic_handler(),))
        try:
            if self.tls is not None:
                port = server.add_secure_port(self.listen, self.tls.credentials())
            else:
                port = server.add_insecure_port(self.listen)
        except RuntimeError as exc:
            raise ConfigError(f"cannot listen on {self.listen}: {exc}") from None
        if port == 0:
            raise ConfigError(f"cannot listen on {self.listen}")
        await server.start()
        self.port, self._loop, self._server, self._service = port, loop, server, service
        self._started.set()
        try:
            await server.wait_for_termination()
        finally:
            service.hub.close()
            pool.shutdown(wait=False, cancel_futures=True)
