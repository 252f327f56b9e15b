from __future__ import annotations

from collections.abc import Iterator

import pytest

import tether
from tests.servers import IN_PROCESS_KINDS


@pytest.fixture(params=IN_PROCESS_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The worker runs in this process, so the memory store serves it as well."""
    kind: str = request.param
    return kind


@pytest.fixture
def make_app(store_url: str) -> Iterator[object]:
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
