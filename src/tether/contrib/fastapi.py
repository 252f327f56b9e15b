"""FastAPI integration: the app's store opened and closed with the server, and the App as a
dependency of routes.

Why a lifespan: opening a store connects (and migrates) with blocking calls. Done on a thread
when the server starts, the first request does not pay for it and the event loop never waits
on it; closed when the server stops, no connection outlives it. Routes then use the async API
(``await task.aenqueue(...)``, ``await app.await_result(id, timeout=...)``), which never blocks
the loop either. See docs/fastapi.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request

from tether._app import App

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


@asynccontextmanager
async def opened(app: App) -> AsyncIterator[App]:
    """``async with opened(app):`` the store and its async producer are open inside, closed
    after (for a lifespan of your own, or a script)."""
    await app.runtime.async_producer()
    try:
        yield app
    finally:
        await app.aclose()  # the producer on this loop (its connections are the loop's),
        # then the store


def lifespan(app: App, inner: Lifespan | None = None) -> Lifespan:
    """``FastAPI(lifespan=lifespan(app))``: open ``app`` when the server starts, close it when
    it stops, and make it the App that :func:`get_app` (and :data:`TetherApp`) hands routes.

    ``inner`` is the application's own lifespan, run inside (so its start-up can enqueue and
    its shutdown still can too); the state it yields is kept, with ``tether`` added.
    """

    @asynccontextmanager
    async def run(api: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with opened(app):
            api.state.tether = app
            try:
                if inner is None:
                    yield {"tether": app}
                else:
                    async with inner(api) as state:
                        yield {**(state or {}), "tether": app}
            finally:
                del api.state.tether

    return run


def get_app(request: Request) -> App:
    """The dependency: the App the lifespan opened (``Depends(get_app)``)."""
    app = getattr(request.app.state, "tether", None)
    if not isinstance(app, App):
        raise RuntimeError("no tether App on this FastAPI application: create it with "
                           "FastAPI(lifespan=tether.contrib.fastapi.lifespan(app))")
    return app


#: A route parameter typed ``TetherApp`` receives the App: ``async def r(app: TetherApp)``.
TetherApp = Annotated[App, Depends(get_app)]

__all__ = ["Lifespan", "TetherApp", "get_app", "lifespan", "opened"]
