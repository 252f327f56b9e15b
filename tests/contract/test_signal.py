"""wait_for_signal (issue #22): a cancel of a running job, or a pause, wakes its holder's wait.

The signal only brings a heartbeat forward (the heartbeat still says ``cancel_requested``), so
spurious wake-ups are allowed; what each store must do is deliver the real ones, whether they
come before the wait starts or during it, and stay quiet when nothing happens.
"""

from __future__ import annotations

import threading
import time

from tests.contract.aioloop import run_unblocked
from tests.contract.helpers import fresh_queue, running_job
from tether.stores import Store

#: Far longer than any delivery: a wait that returns True before it was signalled by the
#: timeout, not the clock (True means signalled, False timed out).
LONG = 20.0


def test_an_owners_first_wait_says_watched(store: Store) -> None:
    assert store.wait_for_signal("w1", LONG) is True


def test_a_quiet_wait_times_out(store: Store, t0: float) -> None:
    running_job(store, t0, ttl=30)
    assert store.wait_for_signal("w1", LONG) is True
    assert store.wait_for_signal("w1", 0.3) is False


def test_a_cancel_before_the_wait_is_kept(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=30)
    assert store.wait_for_signal("w1", LONG) is True
    assert store.cancel(job.id, now=t0 + 1) == "requested"
    assert store.wait_for_signal("w1", LONG) is True
    assert store.wait_for_signal("w1", 0.3) is False  # consumed


def test_a_cancel_during_the_wait_ends_it(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=30)
    assert store.wait_for_signal("w1", LONG) is True
    got: list[tuple[bool, float]] = []
    entered = threading.Event()

    def wait() -> None:
        entered.set()
        start = time.monotonic()
        got.append((store.wait_for_signal("w1", LONG), time.monotonic() - start))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    entered.wait(5)
    assert store.cancel(job.id, now=t0 + 1) == "requested"
    waiter.join(LONG + 5)
    assert got and got[0][0] is True, got


def test_a_pause_signals_every_worker(store: Store, t0: float) -> None:
    running_job(store, t0, ttl=30, owner="w1")
    assert store.wait_for_signal("w1", LONG) is True
    assert store.wait_for_signal("w2", LONG) is True
    assert store.pause_queue(fresh_queue()) is True
    assert store.wait_for_signal("w1", LONG) is True
    assert store.wait_for_signal("w2", LONG) is True


def test_an_async_cancel_signals_the_holder(store: Store, t0: float) -> None:
    job = running_job(store, t0, ttl=30)
    assert store.wait_for_signal("w1", LONG) is True

    async def main() -> str:
        producer = store.async_producer()
        try:
            return await producer.cancel(job.id)
        finally:
            await producer.aclose()

    assert run_unblocked(main) == "requested"
    assert store.wait_for_signal("w1", LONG) is True
