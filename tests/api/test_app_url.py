"""``App.url`` names where the app reads and writes, also after it changes."""

from __future__ import annotations

from pathlib import Path

import tether


def test_a_new_url_closes_the_store_opened_on_the_old_one(tmp_path: Path) -> None:
    first, second = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    app = tether.App(first)
    try:
        old = app.store
        on_first = app.enqueue("t.job", queue="q")
        app.url = first  # the same URL: the open store stays
        assert app.store is old
        app.url = second
        assert app.store is not old and app.store.url == second
        on_second = app.enqueue("t.job", queue="q")
        assert [j.id for j in app.store.list_jobs(queue="q")] == [on_second]
    finally:
        app.close()
    with tether.App(first) as back:
        assert [j.id for j in back.store.list_jobs(queue="q")] == [on_first]
