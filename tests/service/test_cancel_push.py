"""Issue #22 through issue #21: a cancel or a pause is pushed to a remote worker too.

The worker suite's cancel-push tests run here against ``tether://`` stores (a tether server
in front of each store): the signal travels store -> server (one store waiter per worker,
tether._server.wakes) -> the worker's WaitForSignal long poll. The heartbeat interval is
30 s, so a handler that sees its cancel within a few seconds was told by the push.
"""

from __future__ import annotations

import pytest

from tests.remote import REMOTE_KINDS
from tests.worker.test_cancel_push import (  # noqa: F401 - the fixture they use
    slow_beats,
    test_a_cancel_reaches_a_running_handler_before_the_next_heartbeat,
    test_a_pause_reaches_the_worker_before_its_next_read,
)

__all__ = [
    "test_a_cancel_reaches_a_running_handler_before_the_next_heartbeat",
    "test_a_pause_reaches_the_worker_before_its_next_read",
]


@pytest.fixture(params=REMOTE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind
