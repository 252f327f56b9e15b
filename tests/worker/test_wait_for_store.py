"""In process: constructing a Worker never waits for the store, ``run()`` waits for it, and
``Worker.stop()`` ends that wait; a configuration error still fails at once (issue 18 F)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

import tether
from tests.faults import FaultProxy
from tests.servers import PG_DSN, require_server
from tests.worker.helpers import wait_until


@pytest.fixture
def refused() -> Iterator[FaultProxy]:
    require_server("postgres")
    faults = FaultProxy("127.0.0.1", 5432)
    faults.refuse(3600)  # the store is "not up yet"
    yield faults
    faults.stop()


def test_stop_ends_the_wait_of_run(refused: FaultProxy,
                                   caplog: pytest.LogCaptureFixture) -> None:
    app = tether.App(refused.url(PG_DSN))
    worker = app.worker(concurrency=1)  # must not raise: nothing is opened yet
    assert not worker.opened
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run(install_signals=False)),
                              daemon=True)
    with caplog.at_level(logging.INFO, logger="tether"):
        thread.start()
        wait_until(lambda: any("store unavailable" in r.getMessage() for r in caplog.records),
                   30, "a retry line")
        asked = time.monotonic()
        worker.stop()
        thread.join(5.0)
    assert not thread.is_alive(), "stop() did not end the wait"
    assert time.monotonic() - asked < 2.0
    assert codes == [0]
    assert not worker.opened
    assert any("stopped before the store" in r.getMessage() for r in caplog.records)


def test_a_configuration_error_still_fails_at_once() -> None:
    require_server("postgres")
    app = tether.App(PG_DSN.rsplit("/", 1)[0] + "/no_such_db_x")
    worker = app.worker(concurrency=1)
    started = time.monotonic()
    with pytest.raises(tether.ConfigError, match="does not exist"):
        worker.run(install_signals=False)
    assert time.monotonic() - started < 10.0
