"""Issue #21: the CLI and the dashboard work unchanged through ``tether://``.

The operators' suite of issue #20 (``tether job``, ``tether jobs``, ``tether enqueue
--after``, ``tether purge``, ``tether stats`` and the dashboard's job page with its graph)
runs here again with its ``--url`` a ``tether://`` URL: a tether server (admin role) in front
of each store (tests/remote.py). Nothing in those tests knows it is remote.
"""

from __future__ import annotations

import pytest

from tests.ops.test_workflow_ops import (
    store,
    test_enqueue_after_and_purge_waiting,
    test_job_shows_its_links_and_jobs_lists_the_waiting,
    test_the_dashboard_job_page_lists_links_and_draws_the_graph,
    test_the_graph_is_cut_at_200_jobs,
)
from tests.remote import REMOTE_KINDS

__all__ = [
    "store",
    "test_enqueue_after_and_purge_waiting",
    "test_job_shows_its_links_and_jobs_lists_the_waiting",
    "test_the_dashboard_job_page_lists_links_and_draws_the_graph",
    "test_the_graph_is_cut_at_200_jobs",
]

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(params=REMOTE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind
