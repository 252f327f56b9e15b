"""The pytest plugin of tether (entry point ``pytest11: tether``): the user's app on a fresh
store for each test.

Invariant: a test never touches the app's real store. ``tether_app`` closes the app's store,
points the app at a store made for this test alone (``memory://`` with a unique name, an
SQLite file in the test's ``tmp_path``, or a schema / key prefix of its own on a PostgreSQL or
Redis server, removed after the test: :mod:`tether.testing._fresh`) and puts the URL back
afterwards. The app object and
its tasks stay the same, so the test's code enqueues through the very tasks it imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import _environ
from tether._app import App
from tether._appspec import load_app
from tether._errors import ConfigError
from tether.stores import open_store
from tether.testing._drain import DrainedJob, drain
from tether.testing._fresh import check_choice, fresh_url

# A test process is where the implicit default store is expected: no warning about it here.
_environ.warn_default_store = False


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tether", "tether job queue")
    group.addoption("--tether-app", dest="tether_app", default=None, metavar="MODULE:APP",
                    help="the tether App that the tether_app fixture serves (ini: tether_app)")
    group.addoption("--tether-store", dest="tether_store", default=None,
                    metavar="memory|sqlite|URL",
                    help="the fresh store each test gets: memory (default), sqlite, or a "
                         "postgresql:// or redis:// URL (a schema / key prefix of its own per "
                         "test, removed after it) (ini: tether_store)")
    parser.addini("tether_app", "MODULE:APP of the App the tether_app fixture serves",
                  default="")
    parser.addini("tether_store", "the fresh store of each test: memory, sqlite, or a "
                  "postgresql:// or redis:// URL", default="memory")


@pytest.fixture
def tether_base_app(pytestconfig: pytest.Config) -> App:
    """The user's App, from ``--tether-app`` or the ``tether_app`` ini option. Override this
    fixture to hand over an App some other way."""
    spec = pytestconfig.getoption("tether_app") or str(pytestconfig.getini("tether_app"))
    if not spec:
        pytest.fail("the tether_app fixture needs your app: set tether_app = module:app in the "
                    "pytest ini options, pass --tether-app module:app, or override the "
                    "tether_base_app fixture", pytrace=False)
    return load_app(spec)


@pytest.fixture
def tether_store_url(pytestconfig: pytest.Config, tmp_path: Path) -> Iterator[str]:
    """A store URL no other test uses (``--tether-store`` / ini ``tether_store``); on a
    PostgreSQL or Redis server its schema / keys are removed after the test."""
    choice = pytestconfig.getoption("tether_store") or str(pytestconfig.getini("tether_store"))
    try:
        check_choice(choice)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    with fresh_url(choice, tmp_path) as url:
        yield url


@pytest.fixture
def tether_app(tether_base_app: App, tether_store_url: str) -> Iterator[App]:
    """The user's App on a fresh, empty store (tasks kept, URL replaced for this test).

    The store is migrated here (an app made with ``auto_migrate=False`` would refuse a fresh
    one), and held open for the whole test, so a memory store's data outlives an
    ``app.close()`` inside the test."""
    app = tether_base_app
    runtime = app.runtime
    saved = runtime.url
    keeper = open_store(tether_store_url)
    try:
        keeper.migrate()
        runtime.close()
        runtime.url = tether_store_url
        yield app
    finally:
        runtime.close()
        runtime.url = saved
        keeper.close()


@pytest.fixture
def tether_drain(tether_app: App) -> Callable[..., list[DrainedJob]]:
    """``tether_drain(**options)``: :func:`tether.testing.drain` of ``tether_app``."""

    def run(**options: Any) -> list[DrainedJob]:
        return drain(tether_app, **options)

    return run
