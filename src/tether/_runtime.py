"""The runtime of an app: what the worker, results, logs, the process-pool child and the CLI
need of it, without the App.

Invariant: **one store per runtime, on its current URL.** The store is opened on first use
(its schema created if missing, checked otherwise: ``auto_migrate``,
:mod:`tether._schema_start`); a new URL closes the store opened on the old one, so the next use
opens the new one. Keeping it would leave the runtime reading and writing where
the URL no longer points (a worker given ``--url`` claimed from the module's store while
heartbeating on its own).

An unnamed ``memory://`` store is private to the runtime, not to each store object: the
runtime opens it (and its worker opens its side connections) on ``store_url``, a name of its
own, so ``App("memory://")`` with an in-process worker (``tether.testing.drain``) just works.

The layers: :class:`tether._app.App` (the user's API) holds a ``Runtime``; the worker and
everything below it take the runtime and never import the App, so the imports draw no circle
(tests/test_imports.py). The runtime holds the settings, the codec, the events, the store, the
task registry (tasks and schedules, :mod:`tether._registry`) and the enqueue seam every
producer call goes through.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from tether import _clock as clock
from tether._codec import DEFAULT_CODEC, Codec
from tether._config import Settings
from tether._environ import check_environ, default_store_used
from tether._errors import ConfigError, StoreUnavailable
from tether._events import Events
from tether._jobread import view
from tether._jobview import Job
from tether._registry import TaskRegistry
from tether._schema_start import prepare_schema, step_for
from tether.stores import DEFAULT_PATH, DEFAULT_URL, open_store
from tether.stores._contract import (
    AsyncProducer,
    NewJob,
    Producer,
    Store,
    transactional_enqueue,
)
from tether.stores._records import JobRecord
from tether.stores._replay import new_request_id


def _own_memory_name(url: str) -> str:
    """``memory://`` (no name) -> ``memory://private-<random>``; any other URL unchanged."""
    scheme, sep, rest = url.partition("://")
    name = rest.split("?", 1)[0].split("#", 1)[0].strip("/")
    if sep and scheme.lower() == "memory" and not name:
        return f"memory://private-{secrets.token_hex(8)}"
    return url


#: Pauses between the attempts of one enqueue while the store is unavailable (~1 s in all).
ENQUEUE_RETRY_PAUSES = (0.1, 0.3, 0.5)
#: An enqueue is tried again only while this many seconds have not passed since it began: a
#: refused or dropped connection fails fast and is worth another try (same request id), an
#: attempt that waited out the store's deadline is not. Retrying those too made a partitioned
#: enqueue take four deadlines (issue 18: 19-27 s). So an enqueue raises within the store's
#: deadline plus this.
ENQUEUE_RETRY_WINDOW = 1.0


def _retry(started: float, pause: float) -> bool:
    """Whether a failed attempt of an enqueue that began at ``started`` is tried again."""
    return clock.monotonic() - started + pause <= ENQUEUE_RETRY_WINDOW


class Runtime:
    """Settings, codec, events, the store (opened lazily on ``url``) and the task registry.

    ``url`` defaults to ``$TETHER_URL``, else an SQLite file ``./tether.db``. A ``codec``
    without ``encode`` and ``decode`` methods, or an ``include`` that is not module names,
    raises ConfigError at once.
    """

    def __init__(self, url: str | None, settings: Settings, *, auto_migrate: bool | None = None,
                 codec: Codec | None = None, include: Iterable[str] = ()) -> None:
        check_environ()  # a mistyped TETHER_URL must not pass unseen
        #: No URL given and none in $TETHER_URL: opening the store says so (_environ.py).
        self.implicit_url = not url and not os.environ.get("TETHER_URL")
        self._url = url or os.environ.get("TETHER_URL") or DEFAULT_URL
        self._store_url = _own_memory_name(self._url)
        self.settings = settings
        self.auto_migrate = auto_migrate
        if codec is not None and not (callable(getattr(codec, "encode", None))
                                      and callable(getattr(codec, "decode", None))):
            raise ConfigError("codec must have encode(value) and decode(value, type) methods "
                              "(see tether._codec.Codec)")
        self.codec: Codec = codec if codec is not None else DEFAULT_CODEC
        self.registry = TaskRegistry(include)
        self.events = Events()
        self._store: Store | None = None
        self._producing = False  # an async producer was handed out (aclose closes it)
        self._lock = threading.RLock()

    # -- the store ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return self._url

    @url.setter
    def url(self, url: str) -> None:
        """A new URL closes the store opened on the old one (see the module docstring)."""
        with self._lock:
            if url != self._url:
                self.close()
                self._store_url = _own_memory_name(url)
            self._url = url
            self.implicit_url = False

    @property
    def store_url(self) -> str:
        """The URL every store of this runtime is opened on: ``url``, except that an unnamed
        ``memory://`` gets a name of this runtime's own, so the worker's side connections
        share the app's data (``memory://`` alone would be private to each store object)."""
        return self._store_url

    @property
    def store(self) -> Store:
        """The store, opened on first use; its schema created if missing and checked otherwise
        (``auto_migrate=True`` also upgrades it, ``False`` only checks: _schema_start.py)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    if self.implicit_url:
                        default_store_used(DEFAULT_PATH)
                    store = open_store(self.store_url)
                    try:
                        prepare_schema(store, step_for(self.auto_migrate))
                    except BaseException:
                        store.close()
                        raise
                    self._store = store
        return self._store

    async def async_producer(self) -> AsyncProducer:
        """The store's async producer; the store is opened (a blocking connect and
        migration) on a thread, so the caller's event loop never waits on it."""
        store = self._store
        if store is None:
            store = await asyncio.to_thread(lambda: self.store)
        self._producing = True
        return store.async_producer()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    async def aclose(self) -> None:
        """``close`` for event loops (e.g. a FastAPI lifespan's end): the async producer is
        closed on the loop (its connections belong to it), then the store on a thread."""
        store = self._store
        if store is not None and self._producing:
            self._producing = False
            await store.async_producer().aclose()
        await asyncio.to_thread(self.close)

    # -- producing ---------------------------------------------------------------------------
    def enqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """Insert jobs in one round trip; ``conn`` puts them in the caller's transaction.

        A transient failure (:class:`~tether._errors.StoreUnavailable`) is retried a few
        times within about a second, always with the same request id: when the store did the
        insert but the reply was lost, it answers the retry from its record of that request
        instead of inserting the jobs twice. Then the error is raised: within the store's
        deadline plus :data:`ENQUEUE_RETRY_WINDOW` (an attempt that waited out the deadline
        is not retried). Inside a caller's transaction nothing is retried: the transaction is
        the caller's to retry.
        """
        if not jobs:
            return []
        store: Producer = self.store
        if conn is not None:
            inside = transactional_enqueue(store)
            if inside is None:
                raise ConfigError(
                    f"the {store.kind} store cannot enqueue inside a caller's transaction")
            return self._enqueued(jobs, inside.enqueue(jobs, conn=conn))
        request_id = new_request_id()
        started = clock.monotonic()
        for pause in (*ENQUEUE_RETRY_PAUSES, None):
            try:
                return self._enqueued(jobs, store.enqueue(jobs, request_id=request_id))
            except StoreUnavailable:
                if pause is None or not _retry(started, pause):
                    raise
                clock.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aenqueue_jobs(self, jobs: Sequence[NewJob], *, conn: Any = None) -> list[int]:
        """:meth:`enqueue_jobs` for event loops, through the store's async producer: the
        same replay-safe retry (one request id for every attempt), with ``asyncio.sleep``
        between attempts. ``conn`` is the caller's async connection (nothing is retried)."""
        if not jobs:
            return []
        producer = await self.async_producer()
        if conn is not None:
            store: Producer = self.store  # opened by async_producer
            if not store.capabilities.enqueue_in_transaction:
                raise ConfigError(
                    f"conn= is not supported by the {store.kind} store's async producer (only "
                    "PostgreSQL enqueues inside a caller's transaction)")
            return self._enqueued(jobs, await producer.enqueue(jobs, conn=conn))
        request_id = new_request_id()
        started = clock.monotonic()
        for pause in (*ENQUEUE_RETRY_PAUSES, None):
            try:
                return self._enqueued(jobs, await producer.enqueue(jobs, request_id=request_id))
            except StoreUnavailable:
                if pause is None or not _retry(started, pause):
                    raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # pragma: no cover

    def _enqueued(self, jobs: Sequence[NewJob], ids: list[int]) -> list[int]:
        """Announce an accepted enqueue (the ``enqueued`` event: metrics count it) and pass
        its ids on. Inside a caller's transaction the event says the insert was made, not that
        it committed."""
        if self.events.wants("enqueued"):
            counts: dict[tuple[str, str], int] = {}
            for job in jobs:
                key = (job.task, job.queue)
                counts[key] = counts.get(key, 0) + 1
            self.events.emit("enqueued", detail={"counts": counts})
        return ids

    # -- reading -----------------------------------------------------------------------------
    def view(self, record: JobRecord, *, imports: bool = True) -> Job:
        """The public view of a store record, decoded by this runtime's codec (and the task's
        annotations when the registry knows the task). ``imports=False``: never import the
        ``include`` modules here (an event loop's caller did, or tried, on a thread)."""
        return view(record, self.codec, self.registry.reading_task(record.task, imports=imports))
