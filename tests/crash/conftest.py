"""Fixtures for the crash tests: worker subprocesses that are always cleaned up, and their logs
attached to the report of any test that fails (or times out).

Workers are killed *before* the isolated store is torn down (schema dropped, key prefix
deleted): the URL fixtures below close the test's clusters first, so a live worker can never
race the cleanup (a DROP SCHEMA deadlock) or write keys back after it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from tests.crash.harness import Cluster
from tests.servers import isolated_url

MakeCluster = Callable[..., Cluster]


@pytest.fixture
def crash_clusters(request: pytest.FixtureRequest) -> list[Cluster]:
    """The clusters this test started (closed by the URL fixtures and by make_cluster)."""
    made: list[Cluster] = []
    request.node.crash_clusters = made
    return made


def close_all(clusters: list[Cluster]) -> None:
    for cluster in clusters:
        cluster.close()


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path, crash_clusters: list[Cluster]) -> Iterator[str]:
    """tests/conftest.py's isolated URL, but the test's workers die before it is cleaned up."""
    with isolated_url(store_kind, tmp_path) as url:
        try:
            yield url
        finally:
            close_all(crash_clusters)


@pytest.fixture
def pg_url(tmp_path: Path, crash_clusters: list[Cluster]) -> Iterator[str]:
    """An isolated PostgreSQL schema (for the PostgreSQL-only tests)."""
    with isolated_url("postgres", tmp_path) as url:
        try:
            yield url
        finally:
            close_all(crash_clusters)


@pytest.fixture
def make_cluster(crash_clusters: list[Cluster], tmp_path: Path) -> Iterator[MakeCluster]:
    """``make_cluster(url, lease_ttl=2.0)``: a Cluster whose processes die with the test."""

    def _make(url: str, **options: float) -> Cluster:
        cluster = Cluster(url, tmp_path / f"cluster{len(crash_clusters)}", **options)
        crash_clusters.append(cluster)
        return cluster

    try:
        yield _make
    finally:
        close_all(crash_clusters)


@pytest.fixture
def cluster(make_cluster: MakeCluster, store_url: str) -> Cluster:
    """Workers on the test's isolated store (sqlite, postgres or redis), lease_ttl 2 s."""
    return make_cluster(store_url)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and report.failed:
        for cluster in getattr(item, "crash_clusters", []):
            for title, text in cluster.report():
                report.sections.append((title, text))
        for server in getattr(item, "crash_servers", []):  # tests/crash/remote.py
            report.sections.append((f"{server!r} log", server.log_text()[-20000:]))
    return report
