"""Outages between a store and its server, through the fault proxy (issue #8, B): waits never
raise and wake again once the server is back, and the store is usable at once on its return.

``faulty`` (tests/contract/conftest.py) reaches the test's store through the proxy, which
refuses every connection for a while; ``store`` reaches it directly and enqueues meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.contract.helpers import Faulty, lacks, wake_with
from tether._errors import StoreUnavailable
from tether.stores import NewJob, Store

#: The PostgreSQL pool's wait for a free connection in the pool test: refused connections must
#: fail long before it (at once), which is what that test tells apart.
POOL_WAIT = 10.0
POOL_OPTIONS: dict[str, dict[str, Any]] = {
    "postgres": {"min_size": 2, "max_size": 4, "timeout": POOL_WAIT},
    "redis": {},
}


def _wait_until(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.mark.slow
def test_wait_for_jobs_never_raises_during_an_outage(store: Store, faulty: Faulty) -> None:
    proxy, lossy = faulty.proxy, faulty.store
    lossy.wait_for_jobs(["q"], 0.05)  # listening (a thread's first wait may end at once)
    assert lossy.wait_for_jobs(["q"], 0.05) is False
    proxy.refuse(3.0)
    while proxy.refusing:
        assert lossy.wait_for_jobs(["q"], 0.2) in (True, False)
    # Back: a job enqueued now wakes the waiter again.
    _wait_until(lambda: lossy.wait_for_jobs(["q"], 0.2) is False, 5.0)
    # A waiter on its own thread (settled: its first wait may end at once), enqueued to until
    # it returns: one enqueue before it was waiting may be missed.
    woken, _ = wake_with(lossy, lambda: store.enqueue([NewJob("t", queue="q")]),
                         queues=["q"], wait=5)
    assert woken is True


@pytest.mark.serial  # bounds a latency promise in wall-clock seconds
@pytest.mark.slow
def test_a_waiter_wakes_within_a_second_of_the_servers_return(
    faulty: Faulty, store_kind: str, request: pytest.FixtureRequest
) -> None:
    """Notifications sent while the listener was down are lost, so its reconnection is itself
    a wake-up: an idle worker claims again within ~1 s of the server's return, whatever the
    length of the outage."""
    lacks(request, store_kind, redis="a wait begun during the outage first waits for the "
          "subscription, and registers only after the resubscription's wake-up went out: it "
          "sleeps to its timeout (the worker's fetcher claims again after its own backoff)",
          # Through a server the outage is the client's link, not the server's to Redis.
          **{"remote-redis": ""})
    proxy, lossy = faulty.proxy, faulty.store
    lossy.wait_for_jobs(["q"], 0.05)
    proxy.refuse(4.0)
    back_at: list[float] = []
    woke_at: list[float] = []

    def wait() -> None:
        while not back_at or not woke_at:
            if lossy.wait_for_jobs(["q"], 30.0) and back_at:
                woke_at.append(time.monotonic())

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert proxy.wait_back(), "the proxy never listened again"
    back_at.append(time.monotonic())
    waiter.join(15)
    assert woke_at, "the waiter never woke"
    assert woke_at[0] - back_at[0] < 1.0


@pytest.mark.slow
def test_the_pool_is_usable_at_once_when_the_server_returns(
    faulty: Faulty, store_kind: str
) -> None:
    """No reconnect backoff between the server's return and the next call: the first call
    after the outage succeeds (the pool's own backoff used to leave it waiting seconds)."""
    proxy = faulty.proxy
    lossy = faulty.open(**POOL_OPTIONS.get(store_kind, {}))
    assert lossy.now() > 0
    proxy.refuse(5.0)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        lossy.now()
    # refused connections fail at once, not after the pool's wait
    assert time.monotonic() - started < POOL_WAIT / 2
    # Only calls made well before the refusal ends must fail: a client that retries once (the
    # Redis store does, after 0.05-0.5 s) may reach the server as it returns.
    while proxy.refusal_left > 1.0:
        with pytest.raises(StoreUnavailable):
            lossy.enqueue([NewJob("t")])
        time.sleep(0.2)
    assert proxy.wait_back(), "the proxy never listened again"
    assert lossy.now() > 0
    assert len(lossy.enqueue([NewJob("t")])) == 1
    assert lossy.claim("w", ["default"], 1, 30) != []
