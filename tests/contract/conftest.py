"""Fixtures for the store contract suite; plain helpers live in ``helpers.py``.

Every test runs once per store: the ``store`` fixture of ``tests/conftest.py`` takes its kind
from ``store_kind``, which this module widens to sqlite, postgres, redis, memory *and* each
of the first three served through a tether server (``remote-sqlite``, ``remote-postgres``,
``remote-redis``: tests/remote.py; ``faulty``'s proxy then sits between the client and the
server) (the
in-process store runs the whole contract; what needs several processes, test_processes.py, is
a strict xfail on it with its reason; other suites with subprocesses keep the three others).
Time is driven only through explicit ``now=`` arguments:
a test takes ``t0`` (the store's clock, once) and passes ``now=t0 + x`` everywhere.

Network faults (lost replies, outages, cut connections) go through ONE fixture, ``faulty``:
the test's store reached through the loopback fault proxy of tests/faults.py, beside the
direct ``store`` that sees what really happened. SQLite and the memory store have no network
between the caller and the data, so every test that asks for ``faulty`` is a strict xfail on
them (set at collection, with the reason), never a skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest

from tests.contract.helpers import NO_NETWORK, Faulty
from tests.faults import FaultProxy
from tests.remote import REMOTE_KINDS, is_remote
from tests.servers import IN_PROCESS_KINDS
from tether.stores import Store


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "faulty" not in getattr(item, "fixturenames", ()):
            continue
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("store_kind") if callspec is not None else None
        if kind in NO_NETWORK:
            item.add_marker(pytest.mark.xfail(strict=True, reason=NO_NETWORK[kind]))


@pytest.fixture(params=(*IN_PROCESS_KINDS, *REMOTE_KINDS))
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def t0(store: Store) -> float:
    """The store's clock, read once at the start of the test."""
    return store.now()


@pytest.fixture
def other_stores(open_another: Callable[[], Store]) -> Callable[[int], list[Store]]:
    """``other_stores(n)``: n more connections to the test's store, one per thread."""

    def _open(n: int) -> list[Store]:
        return [open_another() for _ in range(n)]

    return _open


@pytest.fixture
def faulty(
    store: Store, store_kind: str, store_url: str,
    fault_proxy: Callable[[str], FaultProxy],
) -> Iterator[Faulty]:
    """The one network-fault fixture of the contract suite (see the module docstring)."""
    if store_kind in NO_NETWORK:
        pytest.fail(NO_NETWORK[store_kind])
    if is_remote(store_kind):  # the proxy sits between the client and the tether server
        port = urlsplit(store_url).port or 0
        proxy = FaultProxy("127.0.0.1", port)
    else:
        proxy = fault_proxy(store_kind)
    made = Faulty(proxy, proxy.url(store_url))
    try:
        yield made
    finally:
        for opened in made.opened:
            opened.close()
        if is_remote(store_kind):
            proxy.stop()
