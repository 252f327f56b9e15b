"""Tether's errors <-> gRPC status codes: one table both sides read.

Invariant: an error a store raises reaches the remote caller as the same type it would have
raised in-process (the contract's errors are the client's errors), and anything that is not
one of them reaches it as a plain :class:`StoreError` with the message only (no server
traceback, no driver detail crosses the wire). The server names the error in the trailing
metadata ``tether-error``; the status code alone still classifies it, for clients in other
languages. A transport failure (server down, connection reset, deadline) is
:class:`StoreUnavailable`: what a worker already rides out.
"""

from __future__ import annotations

import grpc

from tether._errors import (
    AuthError,
    ConfigError,
    JobNotFound,
    SchemaError,
    StoreError,
    StoreFull,
    StoreUnavailable,
)

__all__ = ["ERROR_KEY", "JOB_ID_KEY", "error_of", "status_of"]

#: Trailing metadata key naming the error type.
ERROR_KEY = "tether-error"
#: Trailing metadata key with the job id of a JobNotFound.
JOB_ID_KEY = "tether-job-id"

_BY_TYPE: tuple[tuple[type[BaseException], grpc.StatusCode, str], ...] = (
    (StoreFull, grpc.StatusCode.RESOURCE_EXHAUSTED, "StoreFull"),
    (StoreUnavailable, grpc.StatusCode.UNAVAILABLE, "StoreUnavailable"),
    (JobNotFound, grpc.StatusCode.NOT_FOUND, "JobNotFound"),
    (SchemaError, grpc.StatusCode.FAILED_PRECONDITION, "SchemaError"),
    (AuthError, grpc.StatusCode.UNAUTHENTICATED, "AuthError"),
    (ConfigError, grpc.StatusCode.INVALID_ARGUMENT, "ConfigError"),
    (TypeError, grpc.StatusCode.INVALID_ARGUMENT, "TypeError"),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT, "ValueError"),
)


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str, str]:
    """(status code, error name, message) for an exception a store call raised."""
    if isinstance(exc, AuthError) and exc.code == "permission_denied":
        return grpc.StatusCode.PERMISSION_DENIED, "AuthError", str(exc)
    for kind, code, name in _BY_TYPE:
        if isinstance(exc, kind):
            return code, name, str(exc)
    return grpc.StatusCode.INTERNAL, "StoreError", str(exc) or type(exc).__name__


def error_of(code: grpc.StatusCode | None, name: str | None, message: str,
             job_id: str | None = None) -> Exception:
    """The exception a client raises for a failed call (``name`` from the trailing metadata,
    None when the failure came from the transport or a server that did not name it)."""
    if name == "JobNotFound" and job_id is not None and job_id.lstrip("-").isdigit():
        return JobNotFound(int(job_id))
    named: dict[str, type[Exception]] = {
        "StoreFull": StoreFull, "StoreUnavailable": StoreUnavailable,
        "SchemaError": SchemaError, "ConfigError": ConfigError, "TypeError": TypeError,
        "ValueError": ValueError, "StoreError": StoreError,
    }
    if name in named:
        return named[name](message)
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        kind = "unauthenticated" if code == grpc.StatusCode.UNAUTHENTICATED else \
            "permission_denied"
        return AuthError(message, code=kind)
    by_code: dict[grpc.StatusCode, type[Exception]] = {
        # Unnamed: gRPC's own "message larger than max", a request that can never pass.
        grpc.StatusCode.RESOURCE_EXHAUSTED: ValueError,
        grpc.StatusCode.FAILED_PRECONDITION: SchemaError,
        grpc.StatusCode.INVALID_ARGUMENT: ValueError,
        grpc.StatusCode.INTERNAL: StoreError,
    }
    if code in by_code:
        return by_code[code](message)
    if code == grpc.StatusCode.NOT_FOUND and job_id is not None:
        return JobNotFound(int(job_id))
    # UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN, a reset: the transport's trouble.
    return StoreUnavailable(message)
