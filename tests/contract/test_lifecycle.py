"""migrate / check_schema / info: the schema is created once, safely, and checked."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.contract.helpers import run_concurrently, transient
from tether._errors import SchemaError
from tether.stores import NewJob, Store


def test_check_schema_without_migrate_raises(open_another: Callable[[], Store]) -> None:
    fresh = open_another()  # a new, isolated store that nobody migrated
    with pytest.raises(SchemaError):
        fresh.check_schema()
    version = fresh.migrate()
    assert version >= 1
    fresh.check_schema()


def test_concurrent_migrate_is_safe(open_another: Callable[[], Store]) -> None:
    stores = [open_another() for _ in range(4)]
    versions = run_concurrently([s.migrate for s in stores])
    assert len(set(versions)) == 1
    assert versions[0] >= 1
    for s in stores:
        s.check_schema()
    ids = transient(lambda: stores[0].enqueue([NewJob("t"), NewJob("t")]))
    assert [j.id for j in stores[1].list_jobs()] == ids


def test_migrate_is_idempotent_and_keeps_jobs(store: Store, t0: float) -> None:
    ids = store.enqueue([NewJob("t")], now=t0)
    version = store.info().schema_version
    assert store.migrate() == version
    assert store.migrate() == version
    store.check_schema()
    assert [j.id for j in store.list_jobs()] == ids


def test_info(store: Store, store_kind: str) -> None:
    info = store.info()
    # Through a tether server the store is the remote one; info.extra names the one behind.
    kind = "tether" if store_kind.startswith("remote-") else store_kind
    assert info.kind == kind == store.kind
    assert info.schema_version >= 1
    assert isinstance(info.url, str)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.extra.items())


def test_now_is_epoch_seconds(store: Store) -> None:
    first = store.now()
    second = store.now()
    assert first > 1_600_000_000  # epoch seconds, not ms and not a Julian day
    assert first < 10_000_000_000
    assert second >= first
