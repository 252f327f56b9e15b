from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import tether
from tests.faults import FaultProxy
from tests.pg_template import clone_for_url
from tests.remote import clone_backing, is_remote, served_url
from tests.servers import PG_DSN, REDIS_URL, STORE_KINDS, isolated_url, require_server
from tether.stores import Store, open_store

#: Test directories whose every test is `serial` (tests/crash: real worker subprocesses killed
#: and timed; tests/bench: the benchmarks' smoke run, which measures). Tests marked `crash`
#: elsewhere are serial too.
SERIAL_DIRS = ("crash", "bench")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) the `serial` tests are one group: one process
    runs them one at a time, while the other processes share the rest. The group goes first,
    so its long run starts at once instead of becoming the suite's tail."""
    root = Path(str(config.rootpath)) / "tests"
    serial: list[pytest.Item] = []
    rest: list[pytest.Item] = []
    for item in items:
        parts = Path(str(item.path)).relative_to(root).parts if item.path else ()
        if (item.get_closest_marker("serial") or item.get_closest_marker("crash")
                or (parts and parts[0] in SERIAL_DIRS)):
            item.add_marker(pytest.mark.serial)
            item.add_marker(pytest.mark.xdist_group("serial"))
            serial.append(item)
        else:
            rest.append(item)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = serial + rest


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path) -> Iterator[str]:
    if is_remote(store_kind):  # tests/remote.py: a tether server in front of the store
        with served_url(store_kind, tmp_path) as url:
            yield url
        return
    with isolated_url(store_kind, tmp_path) as url:
        yield url


@pytest.fixture
def store(store_kind: str, store_url: str) -> Iterator[Store]:
    """The test's store, migrated. On PostgreSQL the schema is first cloned from a migrated
    template (tests/pg_template.py), which leaves migrate() nothing to do but check it."""
    if store_kind == "postgres":
        clone_for_url(store_url)
    elif is_remote(store_kind):
        clone_backing(store_kind, store_url)
    s = open_store(store_url)
    s.migrate()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def make_app(store_url: str) -> Iterator[object]:
    """Apps on this test's store (tests/api, tests/worker: every store kind), closed
    afterwards; a short lease and poll so tests of expiry and wake-ups run quickly."""
    apps: list[tether.App] = []

    def _make(**options: object) -> tether.App:
        options.setdefault("lease_ttl", 1.5)
        options.setdefault("poll_interval", 0.1)
        app = tether.App(store_url, **options)  # type: ignore[arg-type]
        apps.append(app)
        return app

    yield _make
    for app in apps:
        app.close()


@pytest.fixture
def open_another(store_url: str) -> Iterator[object]:
    """Open more connections to the same store (for concurrency tests)."""
    opened: list[Store] = []

    def _open() -> Store:
        s = open_store(store_url)
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()


@pytest.fixture
def fault_proxy() -> Iterator[Callable[[str], FaultProxy]]:
    """``fault_proxy("postgres" | "redis")``: a loopback proxy in front of that real server
    (see tests/faults.py); stopped after the test."""
    made: list[FaultProxy] = []

    def _make(kind: str) -> FaultProxy:
        require_server(kind)
        target = urlsplit(PG_DSN if kind == "postgres" else REDIS_URL)
        proxy = FaultProxy(target.hostname or "127.0.0.1", target.port or 0)
        made.append(proxy)
        return proxy

    yield _make
    for proxy in made:
        proxy.stop()


#: Strings that have broken stores and workers: NUL, lone surrogates (what ``os.fsdecode``
#: makes of a non-UTF-8 file name), emoji (4-byte UTF-8), and very long text.
POISON = {
    "nul": "before\x00after",
    "surrogate": "file-" + __import__("os").fsdecode(b"\xff\xfe") + ".txt",
    "high_surrogate": "x\ud800y",
    "emoji": "done \U0001f680\U0001f44d",
    "long": "é" * 100_000,
    "mixed": "\x00\udcff\U0001f680" + "z" * 5000,
}


@pytest.fixture(params=sorted(POISON))
def poison(request: pytest.FixtureRequest) -> str:
    """Each poison string in turn."""
    value: str = POISON[request.param]
    return value
