"""``tether stats`` and the dashboard show a worker dead as soon as its death is detected
(issue #22): its liveness token released, however fresh its last heartbeat."""

from __future__ import annotations

import json
import uuid

import pytest

from tether._cli.main import main
from tether._config import make_settings
from tether.dashboard._data import Rates, overview
from tether.stores import Store, WorkerInfo


def _stats(capsys: pytest.CaptureFixture[str], url: str) -> dict[str, str]:
    assert main(["stats", "--url", url, "--json"]) == 0
    return {w["id"]: w["state"] for w in json.loads(capsys.readouterr().out)["workers"]}


def test_a_worker_is_dead_as_soon_as_its_token_is_released(
    store: Store, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    gone, here = (f"w-{uuid.uuid4().hex[:8]}" for _ in range(2))
    now = store.now()
    for i, worker in enumerate((gone, here)):
        assert store.take_liveness(worker)
        store.register_worker(WorkerInfo(worker, "h", i + 1, ("q",), 1), now=now)
    try:
        assert _stats(capsys, store_url) == {gone: "live", here: "live"}
        store.release_liveness(gone)  # the process died: its heartbeat is still fresh
        states = _stats(capsys, store_url)
        while states[gone] != "dead":  # Redis sees the closed connection a moment later
            states = _stats(capsys, store_url)
        assert states == {gone: "dead", here: "live"}
        rows = overview(store, make_settings(), Rates())["workers"]
        assert {r["w"].id: r["live"] for r in rows} == {gone: False, here: True}
    finally:
        store.release_liveness(here)
