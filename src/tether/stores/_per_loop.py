"""Per-event-loop bookkeeping of the native async producers (PostgreSQL's, Redis's).

A psycopg ``AsyncConnection`` and a ``redis.asyncio`` client belong to the loop they were made
on, so each producer keeps one pool or client per loop (:class:`PerLoop`), keyed weakly: a
loop that is gone takes its entry with it. A store hands out one producer and a new one once
that one is closed (:class:`ProducerCache`), so closing a producer is never fatal. A waiter
is woken from the listener's thread through :func:`threadsafe_wake`, so no wait ever blocks
the loop. One home for these keeps the two producers' closing and waking rules the same.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from tether._errors import StoreUnavailable
from tether.stores._contract import AsyncProducer

T = TypeVar("T")


class PerLoop(Generic[T]):
    """One ``T`` per event loop, made on first use from that loop. Thread-safe. Once
    :meth:`close`\\ d, :meth:`get` raises StoreUnavailable: the producer is closed."""

    def __init__(self) -> None:
        self._items: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()
        self.closed = False

    def get(self, make: Callable[[], T]) -> T:
        """The running loop's ``T``, made by ``make`` (under the lock) the first time."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.closed:
                raise StoreUnavailable("the store's async producer is closed")
            item = self._items.get(loop)
            if item is None:
                item = self._items[loop] = make()
            return item

    def __getitem__(self, loop: asyncio.AbstractEventLoop) -> T:
        with self._lock:
            return self._items[loop]

    def close(self) -> dict[asyncio.AbstractEventLoop, T]:
        """Mark closed and hand back every loop's ``T``: closing them is the caller's (each
        kind of connection closes its own way, on its loop or without one)."""
        with self._lock:
            self.closed = True
            items = dict(self._items)
            self._items.clear()
        return items


class ClosableProducer(AsyncProducer, Protocol):
    """An :class:`AsyncProducer` a store can close without a loop and replace once closed."""

    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...


#: Guards every store's producer slot: taken once per async call, held only to look the
#: producer up (or make one), so one lock for all stores costs nothing and allocates nothing.
_CACHE_LOCK = threading.Lock()


class ProducerCache:
    """Mixin of a store: its one async producer (``_new_producer``'s), made on first use and
    again once closed; ``_close_aio`` (from ``Store.close()``) closes it. Kept in the
    instance's ``__dict__`` so the store's own ``__init__`` needs no part in it."""

    def _new_producer(self) -> ClosableProducer:
        raise NotImplementedError

    def async_producer(self) -> AsyncProducer:
        with _CACHE_LOCK:
            producer: ClosableProducer | None = self.__dict__.get("_aio_producer")
            if producer is None or producer.closed:
                producer = self._new_producer()
                self.__dict__["_aio_producer"] = producer
            return producer

    def _close_aio(self) -> None:
        producer: ClosableProducer | None = self.__dict__.pop("_aio_producer", None)
        if producer is not None:
            producer.close()


def threadsafe_wake() -> tuple[asyncio.Future[None], Callable[[], None]]:
    """A future of the running loop, and a callback any thread (the listener's) may call to
    settle it, any number of times; once the loop is closed the call does nothing, since
    nobody is waiting any more."""
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        try:
            loop.call_soon_threadsafe(_settle, woken)
        except RuntimeError:  # the loop is closed
            pass

    return woken, wake


def _settle(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)


__all__ = ["ClosableProducer", "PerLoop", "ProducerCache", "threadsafe_wake"]
