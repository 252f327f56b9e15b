"""Closing a SQLite store while other threads are inside calls on it must not crash the
process.

Found as a segfault of a test process in CI: the async producer's waiter thread was polling
(``wait_for_finish``) when the store was closed from the test's thread, and closing a sqlite3
connection while its owner steps a statement frees memory that call still uses. The store now
closes only its own thread's and ended threads' connections; a live thread closes its own at
its next call. The hammer runs in a subprocess, so a crash fails this test instead of killing
the test runner.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HAMMER = textwrap.dedent("""
    import sys, threading, time
    from tether.stores import NewJob, open_store
    from tether._errors import StoreError

    url = sys.argv[1]
    for _ in range(150):
        store = open_store(url)
        store.migrate()
        ids = store.enqueue([NewJob("t")])
        stop = threading.Event()
        errors = []

        def use():
            while not stop.is_set():
                try:
                    store.wait_for_finish(ids, 0.01)
                    store.get_job(ids[0])
                except StoreError:
                    return  # "the SQLite store is closed": the clean way out
                except BaseException as exc:
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=use) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.01)
        store.close()
        stop.set()
        for t in threads:
            t.join()
        assert not errors, errors
    print("survived")
""")


@pytest.mark.timeout(120)
def test_closing_while_other_threads_use_the_store_does_not_crash(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    done = subprocess.run([sys.executable, "-c", HAMMER, url], capture_output=True, text=True,
                          check=False,
                          timeout=110)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "survived" in done.stdout
