"""Run ``migrate`` on several stores of one file at the same instant (one thread each)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tether.stores._sqlite.store import SQLiteStore


def migrate_at_once(stores: Sequence[SQLiteStore]) -> list[int]:
    """Each store's ``migrate()`` released by one barrier; the versions they returned. Fails
    the test with every exception a thread raised."""
    barrier = threading.Barrier(len(stores))
    versions: list[int] = []
    failures: list[BaseException] = []

    def run(store: SQLiteStore) -> None:
        try:
            barrier.wait(30)
            versions.append(store.migrate())
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    return versions
