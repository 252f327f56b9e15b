"""Maintenance that always runs, with the app's settings (issue #8, item G).

* Each duty (reaping, pruning) has its own election, and a maintainer only campaigns for what
  it does: a workers' prune-only maintainer can never hold the reaper's leadership.
* ``leader_get`` reads the current holder on every store, and a maintainer whose settings
  disagree with the leader's says so once, at ERROR.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tether._config import Settings, make_settings
from tether._events import Events
from tether._maintenance import maintainer as maintainer_module
from tether._maintenance.leadership import split_holder
from tether._maintenance.maintainer import ELECTION, PRUNE_ELECTION, Maintainer
from tether.stores import Leadership, NewJob, Store

pytestmark = pytest.mark.timeout(60)


def wait(cond: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@contextmanager
def started(*maintainers: Maintainer) -> Iterator[None]:
    for m in maintainers:
        m.start()
    try:
        yield
    finally:
        for m in maintainers:
            m.stop()


def test_leader_get_reads_the_holder_expired_or_not(store: Store) -> None:
    t0 = store.now()
    assert store.leader_get("maintenance") is None
    got = store.leader_acquire("maintenance", "h1 settings=abc", 5.0, now=t0)
    assert got is not None
    seen = store.leader_get("maintenance")
    assert isinstance(seen, Leadership)
    assert (seen.name, seen.holder, seen.term) == ("maintenance", "h1 settings=abc", got.term)
    assert seen.expires_at == pytest.approx(t0 + 5.0, abs=0.01)
    assert store.leader_get("other") is None
    later = store.leader_acquire("maintenance", "h2", 5.0, now=t0 + 6)  # h1 expired
    assert later is not None
    seen = store.leader_get("maintenance")
    assert seen is not None and (seen.holder, seen.term) == ("h2", later.term)
    assert store.leader_release("maintenance", "h2", later.term)
    assert store.leader_get("maintenance") is None


def test_a_prune_only_maintainer_never_keeps_the_reaper_from_leading(
    store: Store, open_another: Callable[[], Store]
) -> None:
    """``reaper_interval=0`` in workers plus ``tether reaper``: the workers' maintainers only
    prune; they must not win the election the reaper needs."""
    workers = make_settings(lease_ttl=1.0, reaper_interval=0)
    prune_only = Maintainer(open_another(), "worker-1", workers, Events(), reap=False)
    reaper = Maintainer(open_another(), "reaper-1", make_settings(lease_ttl=1.0), Events())
    store.enqueue([NewJob("t")])
    store.claim("dead-worker", ["default"], 1, 0.2)
    with started(prune_only):
        wait(lambda: prune_only.acting, 5, "the prune-only maintainer to lead its duty")
        with started(reaper):
            wait(lambda: not store.list_jobs(status="running"), 5,
                 "the reaper to take the dead worker's job back")
    job = store.list_jobs()[0]
    assert (job.status, job.stall_count) == ("pending", 1)


def _settings(**options: float) -> Settings:
    # A leader lease long enough that a loaded machine never lets it lapse mid-test (renewed
    # every 2 s, lost only after a 6 s stall): a change of leader is a new disagreement, rightly
    # reported again, and with a 0.3 s lease that made the count below fail under CI-like load.
    return make_settings(lease_ttl=10.0, leader_ttl=6.0, leader_retry=0.1, **options)


@pytest.mark.slow
def test_maintainers_whose_settings_disagree_are_reported_once(
    store: Store, open_another: Callable[[], Store], caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Compare settings every round rather than every 10 s, so "once" is tested over many checks.
    monkeypatch.setattr(maintainer_module, "CHECK_EVERY", 0.05)
    app = Maintainer(open_another(), "worker-1", _settings(retention_failed=30 * 86400.0),
                     Events())
    with caplog.at_level(logging.INFO, logger="tether"), started(app):
        wait(lambda: all(d.acting for d in app.duties), 5, "the first maintainer to lead")
        terms = [d.elector.lease.term for d in app.duties if d.elector and d.elector.lease]
        stray = Maintainer(open_another(), "reaper-1", _settings(), Events())
        same = Maintainer(open_another(), "worker-2",
                          _settings(retention_failed=30 * 86400.0), Events())
        with started(stray, same):
            wait(lambda: any(r.levelno == logging.ERROR for r in caplog.records), 5,
                 "the disagreement to be reported")
            threading.Event().wait(1.0)  # some 20 more comparisons
            leads = [store.leader_get(e) for e in (ELECTION, PRUNE_ELECTION)]
    # Still worker-1's first terms: no change of leader could excuse a second report.
    assert [(split_holder(lead.holder)[0], lead.term) for lead in leads if lead] == [
        ("worker-1", t) for t in terms], leads
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors  # once per change, not once per round
    assert "reaper-1" in errors[0] and "worker-1" in errors[0] and "retention" in errors[0]
