"""The gRPC service: every RPC authorized, decoded, run against the store, answered.

Invariants:

* Every call is authorized first (:class:`Authorizer`), by the method's contract name and the
  table of :mod:`tether._wire.roles`; a refused call reaches no store.
* The store's clock decides: a client's ``now`` is dropped unless the server was made with
  ``trust_client_clock`` (the contract suite's fixtures only).
* A request that does not parse is INVALID_ARGUMENT and the server keeps serving; every store
  error reaches the client as its own type (:mod:`tether._wire.errors`); nothing else of the
  server's (a traceback, a driver's detail, a token) crosses the wire.
* Nothing is kept per client: a call that goes away leaves nothing behind (leases decide).
* A job's lease token is the fence of its claim: whoever holds it may finish, cancel or
  extend that attempt. A worker token gets tokens only from its own claims: the jobs it
  reads (``get_job``, ``get_jobs``) come without theirs, so it cannot write for another
  worker's claim (:data:`LEASE_FREE`). Nor can it prune what is young: the age of its
  ``prune`` and ``delete_dead_workers`` is raised to a floor no pruner goes below
  (:data:`tether._server.handlers.WORKER_MIN_AGE`).
* Store calls block, so they run on a bounded thread pool; long polls wait on the event loop
  through the wake hub (:mod:`tether._server.wakes`), holding neither a thread nor a
  connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from tether._errors import AuthError, JobNotFound, SchemaError
from tether._server.auth import Authorizer, Role
from tether._server.handlers import HANDLERS, Handler, floor_worker_age
from tether._server.wakes import LINGER, WakeHub
from tether._version import __version__
from tether._wire import codec, roles
from tether._wire import tether_pb2 as pb
from tether._wire.errors import ERROR_KEY, JOB_ID_KEY, status_of
from tether.stores import Capabilities, Store

__all__ = ["LEASE_FREE", "MAX_FINISH_WAITERS", "MAX_WAIT", "PROTOCOL_VERSION", "SERVICE",
           "StoreService"]

log = logging.getLogger("tether.server")

SERVICE = "tether.v1.Store"
PROTOCOL_VERSION = 1
#: The longest a long poll is held before the server answers "not woken".
MAX_WAIT = 30.0
#: Most store waiters for distinct job-id sets at once (see _wait_for_finish).
MAX_FINISH_WAITERS = 32
#: How long a wait past that bound sleeps before its spurious wake-up.
FINISH_POLL = 0.25
#: What a remote store declares it cannot do, and why.
WHY_NOT = "through tether://, transactions stay on the server's side"

Special = Callable[[Any, Role], Awaitable[Message]]

#: Replies whose jobs go to a worker token without their lease token (read from the store
#: by anyone, they would let a worker token finish, cancel or extend others' claims).
LEASE_FREE = frozenset({"GetJob", "GetJobs"})


def _token(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token:
                return token.strip()
    return None


class StoreService:
    """The handlers of ``tether.v1.Store`` over one store."""

    def __init__(self, store: Store, authorizer: Authorizer, *, trust_client_clock: bool,
                 pool: ThreadPoolExecutor, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.authorizer = authorizer
        self.trust_client_clock = trust_client_clock
        self.pool = pool
        self.loop = loop
        self.hub = WakeHub(loop)
        self._special: dict[str, tuple[type[Message], Special]] = {
            "Hello": (pb.HelloRequest, self._hello),
            "Migrate": (pb.Empty, self._migrate),
            "WaitForJobs": (pb.WaitForJobsRequest, self._wait_for_jobs),
            "WaitForFinish": (pb.WaitForFinishRequest, self._wait_for_finish),
            "WaitForSignal": (pb.WaitForSignalRequest, self._wait_for_signal),
        }

    def generic_handler(self) -> grpc.GenericRpcHandler:
        """Every RPC of the service, taking and giving raw bytes (parsed here, so a request
        that does not parse is answered INVALID_ARGUMENT like any other bad input)."""
        methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for rpc, name in roles.METHODS.items():
            methods[rpc] = grpc.unary_unary_rpc_method_handler(self._method(rpc, name))
        return grpc.method_handlers_generic_handler(SERVICE, methods)

    def _method(self, rpc: str, name: str) -> Callable[..., Awaitable[bytes]]:
        special = self._special.get(rpc)
        plain = HANDLERS.get(rpc)
        if special is None and plain is None:  # pragma: no cover - tests/wire checks
            raise AssertionError(f"no handler for {rpc}")
        request_type = special[0] if special else plain[0]  # type: ignore[index]
        takes_now = "now" in request_type.DESCRIPTOR.fields_by_name

        async def call(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            try:
                role = self.authorizer.check(_token(context), name)
                try:
                    message = request_type.FromString(request)
                except DecodeError as exc:
                    raise ValueError(f"malformed {rpc} request: {exc}") from None
                if special is not None:
                    reply = await special[1](message, role)
                    return reply.SerializeToString()
                if role is not Role.ADMIN:
                    floor_worker_age(message)
                now: float | None = None
                if takes_now and self.trust_client_clock and message.HasField("now"):
                    now = getattr(message, "now")  # noqa: B009 - not every request has one
                run = _runner(plain[1], self.store, message, now,  # type: ignore[index]
                              strip=role is not Role.ADMIN and rpc in LEASE_FREE)
                data: bytes = await self.loop.run_in_executor(self.pool, run)
                return data
            except Exception as exc:
                failure = exc
            code, kind, text = status_of(failure)
            if code == grpc.StatusCode.INTERNAL:
                log.error("%s failed: %s", rpc, text, exc_info=failure)
            metadata: list[tuple[str, str]] = [(ERROR_KEY, kind)]
            if isinstance(failure, JobNotFound):
                metadata.append((JOB_ID_KEY, str(failure.job_id)))
            await context.abort(code, text, trailing_metadata=tuple(metadata))
            raise AssertionError("unreachable")  # pragma: no cover - abort raises

        return call

    async def _blocking(self, fn: Callable[[], Any]) -> Any:
        return await self.loop.run_in_executor(self.pool, fn)

    async def _hello(self, request: pb.HelloRequest, role: Role) -> Message:
        return pb.HelloReply(
            server_version=__version__, store_kind=self.store.kind,
            capabilities=codec.to_capabilities(Capabilities(why_not=WHY_NOT)),
            role=role.value, protocol_version=PROTOCOL_VERSION)

    async def _migrate(self, request: pb.Empty, role: Role) -> Message:
        store = self.store
        if role is Role.ADMIN:
            return pb.MigrateReply(version=await self._blocking(store.migrate))
        try:  # a worker token: only when nothing needs doing
            await self._blocking(store.check_schema)
        except SchemaError as exc:
            raise AuthError(f"the schema needs migrating: run `tether migrate` with an admin "
                            f"token ({exc})", code="permission_denied") from None
        info = await self._blocking(store.info)
        return pb.MigrateReply(version=info.schema_version)

    async def _wait_for_jobs(self, request: pb.WaitForJobsRequest, role: Role) -> Message:
        queues = sorted(set(request.queues))
        timeout = min(max(0.0, request.timeout), MAX_WAIT)
        woken, mark = await self.hub.wait(
            ("jobs", *queues), lambda t: self.store.wait_for_jobs(queues, t), timeout,
            since=request.since, linger=LINGER)
        return pb.WokenReply(woken=woken, mark=mark)

    async def _wait_for_signal(self, request: pb.WaitForSignalRequest, role: Role) -> Message:
        # One store waiter per connected worker (keyed by owner), lingering between its waits
        # like a queue set's, so a cancel that lands while the worker heartbeats is kept.
        owner = request.owner
        timeout = min(max(0.0, request.timeout), MAX_WAIT)
        woken, mark = await self.hub.wait(
            ("signal", owner), lambda t: self.store.wait_for_signal(owner, t), timeout,
            since=request.since, linger=LINGER)
        return pb.WokenReply(woken=woken, mark=mark)

    async def _wait_for_finish(self, request: pb.WaitForFinishRequest, role: Role) -> Message:
        ids = sorted(set(request.job_ids))
        timeout = min(max(0.0, request.timeout), MAX_WAIT)
        if self.hub.running("finish") >= MAX_FINISH_WAITERS:
            # Producers wait on ids of their own, so keys rarely repeat: past this many
            # store waiters a wait is a short sleep and a spurious wake-up (allowed: the
            # caller re-reads its jobs), never one more thread.
            await asyncio.sleep(min(timeout, FINISH_POLL))
            return pb.WokenReply(woken=timeout > FINISH_POLL)
        woken, _ = await self.hub.wait(("finish", *ids),
                                       lambda t: self.store.wait_for_finish(ids, t), timeout)
        return pb.WokenReply(woken=woken)


def _runner(handler: Handler, store: Store, message: Any, now: float | None, *,
            strip: bool = False) -> Callable[[], bytes]:
    def run() -> bytes:
        reply = handler(store, message, now)
        if strip:
            _strip_lease_tokens(reply)
        data: bytes = reply.SerializeToString()
        return data

    return run


def _strip_lease_tokens(reply: Message) -> None:
    """Clear the lease token of every job in a GetJob or GetJobs reply (see LEASE_FREE)."""
    if isinstance(reply, pb.GetJobReply):
        if reply.HasField("job"):
            reply.job.ClearField("lease_token")
    elif isinstance(reply, pb.JobsReply):
        for job in reply.jobs:
            job.ClearField("lease_token")
