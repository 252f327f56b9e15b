from __future__ import annotations

from collections.abc import Iterator

import pytest

import tether
from tests.servers import IN_PROCESS_KINDS


@pytest.fixture(params=IN_PROCESS_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The public API is the same on every store, the memory store included (issue #12):
    tests here run on all four. A test that needs a second process parametrizes
    ``store_kind`` over STORE_KINDS (the server stores)."""
    kind: str = request.param
    return kind


@pytest.fixture
def make_app(store_url: str) -> Iterator[object]:
    """Apps on this test's store (every store kind), closed afterwards."""
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
