"""The worker's extra store connections (heartbeat, maintenance), opened side by side."""

from __future__ import annotations

import threading

from tether.stores import open_store
from tether.stores._contract import Store


def open_stores(url: str, n: int) -> list[Store]:
    """``n`` more connections to the store, opened side by side: each costs a connection
    set-up (a server process fork on PostgreSQL), and a worker's start to its first job
    should wait for one of them, not for each in turn."""
    opened: list[Store | BaseException] = [RuntimeError("not opened")] * n

    def one(i: int) -> None:
        try:
            opened[i] = open_store(url)
        except BaseException as exc:
            opened[i] = exc

    threads = [threading.Thread(target=one, args=(i,), name="tether-open", daemon=True)
               for i in range(1, n)]
    for t in threads:
        t.start()
    one(0)
    for t in threads:
        t.join()
    stores = [s for s in opened if not isinstance(s, BaseException)]
    errors = [s for s in opened if isinstance(s, BaseException)]
    if errors:
        for s in stores:
            s.close()
        raise errors[0]
    return stores
