"""The end-of-burst tally reads its jobs a page per round trip (issue #21: through
``tether://`` one round trip per job made the tally of a burst as long as the burst)."""

from __future__ import annotations

from typing import Any

from tether._worker.burst import tally
from tether.stores import NewJob, open_store

PAGE = 1000  # burst.TALLY_PAGE


class _Counting:
    """A real store whose reads of jobs are counted."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.store, name)
        if name in ("get_job", "get_jobs"):
            self.reads += 1
        return found


def test_the_tally_reads_a_page_per_round_trip() -> None:
    store = open_store("memory://")
    store.migrate()
    try:
        ids = store.enqueue([NewJob("t") for _ in range(PAGE + 5)])
        counting = _Counting(store)
        ran = [*ids, ids[0], 10**9]  # one ran twice, one deleted since
        counts = tally(counting, ran, ["default"])  # type: ignore[arg-type]
        assert counts["pending"] == len(ids) + 1
        assert counts["deleted"] == 1
        assert counting.reads <= 2
    finally:
        store.close()
