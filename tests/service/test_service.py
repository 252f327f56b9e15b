"""The tether server's own promises (issue #21): roles, the clock, bad input, limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc
import pytest

from tests.service.conftest import ADMIN_TOKEN, WORKER_TOKEN
from tether._errors import AuthError
from tether._server.auth import fingerprint
from tether._server.serve import TetherServer
from tether._wire import tether_pb2 as pb
from tether._wire.errors import ERROR_KEY
from tether.stores import NewJob, Store


def _url(server: TetherServer, token: str | None = None) -> str:
    return f"tether://{token + '@' if token else ''}127.0.0.1:{server.port}"


def _raw(server: TetherServer, rpc: str, data: bytes) -> grpc.RpcError:
    """Send raw bytes as ``rpc``'s request; the error the server answers with."""
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        call = channel.unary_unary(f"/tether.v1.Store/{rpc}")
        with pytest.raises(grpc.RpcError) as info:
            call(data, timeout=10)
    return info.value


def test_malformed_requests_are_refused_and_the_server_keeps_serving(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve()
    for rpc in ("Claim", "Enqueue", "Finish", "GetJob"):
        error = _raw(server, rpc, b"\xff\xff\xff\xff garbage")
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, rpc  # type: ignore[attr-defined]
        assert dict(error.trailing_metadata())[ERROR_KEY] == "ValueError"  # type: ignore[attr-defined]
    store = remote(_url(server))
    assert store.enqueue([NewJob("t")]) == [1]


def test_oversized_requests_are_refused_and_the_server_keeps_serving(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve(max_message_bytes=64 << 10)
    store = remote(_url(server))
    with pytest.raises(ValueError):
        store.enqueue([NewJob("t", payload='[["' + "x" * (100 << 10) + '"], {}]')])
    assert store.enqueue([NewJob("t")]) == [1]
    assert backing.counts()[0].count == 1


def test_a_worker_token_cannot_administer(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve(tokens=True)
    worker = remote(_url(server, WORKER_TOKEN))
    [job_id] = worker.enqueue([NewJob("t")])
    assert worker.get_job(job_id) is not None
    assert worker.migrate() >= 1  # nothing to do: allowed
    for call in (lambda: worker.purge("default", ["pending"]), lambda: worker.cancel(job_id),
                 worker.list_jobs, lambda: worker.retry_failed(None),
                 lambda: worker.pause_queue("default")):
        with pytest.raises(AuthError) as info:
            call()
        assert info.value.code == "permission_denied"
        assert WORKER_TOKEN not in str(info.value)
    admin = remote(_url(server, ADMIN_TOKEN))
    assert admin.cancel(job_id) == "cancelled"


def test_unknown_and_missing_tokens_are_refused_by_fingerprint(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve(tokens=True)
    wrong = "not-a-known-token"
    for token in (wrong, None):
        store = remote(_url(server, token))
        started = time.monotonic()
        with pytest.raises(AuthError) as info:
            store.enqueue([NewJob("t")])
        assert time.monotonic() - started < 5  # no retry loop
        assert info.value.code == "unauthenticated"
        if token:
            assert fingerprint(token) in str(info.value)
            assert token not in str(info.value)
    assert backing.counts() == []


def test_a_worker_token_cannot_migrate_a_store_that_needs_it(
    serve: Callable[..., TetherServer], remote: Callable[[str], Store]
) -> None:
    server = serve(tokens=True)
    with pytest.raises(AuthError, match="tether migrate"):
        remote(_url(server, WORKER_TOKEN)).migrate()
    assert remote(_url(server, ADMIN_TOKEN)).migrate() >= 1


def test_the_server_ignores_the_clients_clock(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    store = remote(_url(serve()))
    far = backing.now() + 10 * 86400
    [job_id] = store.enqueue([NewJob("t")], now=far)
    job = backing.get_job(job_id)
    assert job is not None and job.run_at < far - 86400
    assert store.claim("w", ["default"], 1, 30, now=far - 5 * 86400)[0].lease_until < far


def test_the_clock_is_trusted_only_when_asked(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    """The check above can fail: with trust_client_clock the same call uses the client's."""
    backing.migrate()
    store = remote(_url(serve(trust_client_clock=True)))
    far = backing.now() + 10 * 86400
    [job_id] = store.enqueue([NewJob("t")], now=far)
    job = backing.get_job(job_id)
    assert job is not None and job.run_at == pytest.approx(far, abs=0.01)


def test_waiters_on_one_queue_set_share_one_store_waiter(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve()
    stores = [remote(_url(server)) for _ in range(8)]
    results: list[bool] = []
    threads = [threading.Thread(target=lambda s=s: results.append(
        s.wait_for_jobs(["a", "b"], 20))) for s in stores]
    for thread in threads:
        thread.start()
    hub = server._service.hub  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while sum(len(g.futures) for g in hub._groups.values()) < len(stores):
        assert time.monotonic() < deadline, "the waits never reached the server"
        time.sleep(0.01)
    assert hub.waiters == 1
    started = time.monotonic()
    while any(t.is_alive() for t in threads):
        backing.enqueue([NewJob("t", queue="b")])
        for thread in threads:
            thread.join(0.05)
        assert time.monotonic() - started < 15
    assert results == [True] * len(stores)


def test_failover_to_the_next_host(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve()
    dead = grpc_free_port()
    store = remote(f"tether://127.0.0.1:{dead},127.0.0.1:{server.port}")
    assert store.enqueue([NewJob("t")]) == [1]
    assert store.get_job(1) is not None


def test_stop_ends_long_polls_early(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve()
    store = remote(_url(server) + "?deadline=2")
    out: list[float] = []

    def wait() -> None:
        started = time.monotonic()
        store.wait_for_jobs(["q"], 25)
        out.append(time.monotonic() - started)

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.3)
    server.stop(grace=1.0)
    thread.join(30)
    assert out and out[0] < 20


def grpc_free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_hello_names_the_role(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    server = serve(tokens=True)
    for token, role in ((WORKER_TOKEN, "worker"), (ADMIN_TOKEN, "admin")):
        reply = remote(_url(server, token)).hello()  # type: ignore[attr-defined]
        assert isinstance(reply, pb.HelloReply)
        assert (reply.role, reply.store_kind) == (role, "sqlite")


def test_the_token_never_shows_in_info_or_repr(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    backing.migrate()
    server = serve(tokens=True)
    store = remote(_url(server, WORKER_TOKEN))
    assert WORKER_TOKEN not in store.info().url
    assert WORKER_TOKEN not in repr(store)
    assert store.info().url == f"tether://***@127.0.0.1:{server.port}"


def test_waits_for_results_hold_a_bounded_number_of_store_waiters(
    serve: Callable[..., TetherServer], backing: Store, remote: Callable[[str], Store]
) -> None:
    """Every producer waits on job ids of its own: past MAX_FINISH_WAITERS distinct sets the
    server holds no more threads (the waits poll instead), and a finish still wakes them."""
    from tether._server.service import MAX_FINISH_WAITERS

    backing.migrate()
    server = serve()
    store = remote(_url(server))
    ids = store.enqueue([NewJob("t") for _ in range(MAX_FINISH_WAITERS + 8)])
    woken: list[bool] = []
    threads = [threading.Thread(target=lambda i=i: woken.append(
        store.wait_for_finish([i], 20))) for i in ids]
    for thread in threads:
        thread.start()
    hub = server._service.hub  # type: ignore[union-attr]
    deadline = time.monotonic() + 10
    while hub.running("finish") < MAX_FINISH_WAITERS:
        assert time.monotonic() < deadline, "the waits never reached the server"
        time.sleep(0.01)
    for _ in range(20):
        assert hub.running("finish") <= MAX_FINISH_WAITERS
        time.sleep(0.02)
    for job_id in ids:
        backing.cancel(job_id)
    for thread in threads:
        thread.join(15)
    assert woken == [True] * len(ids)
