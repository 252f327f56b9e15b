"""Fixtures for the store contract suite; plain helpers live in ``helpers.py``.

Every test runs once per store: the ``store`` fixture of ``tests/conftest.py`` takes its kind
from ``store_kind``, which this module widens to sqlite, postgres, redis *and* memory (the
in-process store runs the whole contract; what needs several processes, test_processes.py, is
a strict xfail on it with its reason; other suites with subprocesses keep the three others).
Time is driven only through explicit ``now=`` arguments:
a test takes ``t0`` (the store's clock, once) and passes ``now=t0 + x`` everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.servers import IN_PROCESS_KINDS
from tether.stores import Store


@pytest.fixture(params=IN_PROCESS_KINDS)
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
