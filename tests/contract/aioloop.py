"""Running a coroutine under an event loop that reports blocking calls.

asyncio's debug mode logs a warning ("Executing <Handle ...> took 0.123 seconds") on the
``asyncio`` logger for every callback or task step that holds the loop longer than
``loop.slow_callback_duration``. :func:`run_unblocked` runs a coroutine so, captures those
warnings, and fails when there is one: a store call that blocked the caller's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: Longest a loop step may take: above what debug mode's bookkeeping plus a loaded 2-core
#: machine's scheduling stalls cost a step (0.27 s seen, at load 7.7, for 20 concurrent
#: connection set-ups), below a round trip through the delaying fault proxy (0.8 s, see
#: tests/test_async_blocking.py), which is where a blocking network call shows.
SLOW = 0.5


class _Catch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.slow: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "took" in message and "seconds" in message:
            self.slow.append(message)


def run_unblocked(main: Callable[[], Awaitable[T]], slow: float = SLOW) -> T:
    """``asyncio.run(main())`` in debug mode; AssertionError when a step blocked the loop."""
    catch = _Catch()
    logger = logging.getLogger("asyncio")
    logger.addHandler(catch)
    loop = asyncio.new_event_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = slow
    try:
        result = loop.run_until_complete(main())
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
        logger.removeHandler(catch)
    assert not catch.slow, f"a blocking call held the event loop: {catch.slow}"
    return result
