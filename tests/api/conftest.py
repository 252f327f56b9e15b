from __future__ import annotations

import pytest

from tests.servers import IN_PROCESS_KINDS


@pytest.fixture(params=IN_PROCESS_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The public API is the same on every store, the memory store included (issue #12):
    tests here run on all four. A test that needs a second process parametrizes
    ``store_kind`` over STORE_KINDS (the server stores)."""
    kind: str = request.param
    return kind
