from __future__ import annotations

import pytest

from tests.servers import IN_PROCESS_KINDS


@pytest.fixture(params=IN_PROCESS_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """The worker runs in this process, so the memory store serves it as well."""
    kind: str = request.param
    return kind
