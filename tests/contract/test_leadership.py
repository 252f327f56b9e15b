"""leader_acquire / renew / release: one leader at a time, terms fence the old one."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from tests.contract.helpers import at, run_concurrently, transient
from tether.stores import Leadership, Store


def test_acquire_when_free(store: Store, t0: float) -> None:
    lead = store.leader_acquire("reaper", "a", 30, now=t0)
    assert lead is not None
    assert (lead.name, lead.holder) == ("reaper", "a")
    assert lead.expires_at == at(t0 + 30)
    assert lead.term >= 1


def test_exactly_one_concurrent_candidate_wins(
    store: Store, t0: float, other_stores: Callable[[int], list[Store]]
) -> None:
    candidates = other_stores(8)

    def run(n: int, s: Store) -> Leadership | None:
        return transient(lambda: s.leader_acquire("reaper", f"c{n}", 30, now=t0))

    results = run_concurrently([partial(run, n, s) for n, s in enumerate(candidates)])
    winners = [r for r in results if r is not None]
    assert len(winners) == 1, winners
    (winner,) = winners
    # nobody else can take it while the lease lasts, and the winner can renew
    assert store.leader_acquire("reaper", "late", 30, now=t0 + 1) is None
    renewed = store.leader_renew("reaper", winner.holder, winner.term, 30, now=t0 + 2)
    assert renewed is not None
    assert renewed.term == winner.term


def test_names_are_independent(store: Store, t0: float) -> None:
    assert store.leader_acquire("reaper", "a", 30, now=t0) is not None
    assert store.leader_acquire("pruner", "b", 30, now=t0) is not None
    assert store.leader_acquire("reaper", "b", 30, now=t0) is None


def test_holder_renews(store: Store, t0: float) -> None:
    lead = store.leader_acquire("reaper", "a", 30, now=t0)
    assert lead is not None
    renewed = store.leader_renew("reaper", "a", lead.term, 60, now=t0 + 20)
    assert renewed is not None
    assert (renewed.name, renewed.holder, renewed.term) == ("reaper", "a", lead.term)
    assert renewed.expires_at == at(t0 + 80)
    # the renewed lease holds beyond the original expiry
    assert store.leader_acquire("reaper", "b", 30, now=t0 + 50) is None


def test_acquire_by_the_holder_is_not_a_new_term(store: Store, t0: float) -> None:
    """A replayed acquire (its reply was lost) must leave an acting leader: the holder that
    still holds it gets its leadership back, same term, instead of None."""
    lead = store.leader_acquire("reaper", "a", 30, now=t0)
    assert lead is not None
    again = store.leader_acquire("reaper", "a", 30, now=t0 + 5)
    assert again is not None
    assert (again.holder, again.term) == ("a", lead.term)
    renewed = store.leader_renew("reaper", "a", lead.term, 30, now=t0 + 6)
    assert renewed is not None and renewed.term == lead.term


def test_wrong_holder_or_term_cannot_renew(store: Store, t0: float) -> None:
    lead = store.leader_acquire("reaper", "a", 30, now=t0)
    assert lead is not None
    assert store.leader_renew("reaper", "b", lead.term, 30, now=t0 + 1) is None
    assert store.leader_renew("reaper", "a", lead.term + 1, 30, now=t0 + 1) is None
    assert store.leader_renew("other", "a", lead.term, 30, now=t0 + 1) is None
    assert store.leader_release("reaper", "b", lead.term) is False
    # nothing changed: still a's, still expiring at t0 + 30
    assert store.leader_acquire("reaper", "b", 30, now=t0 + 29) is None
    taken = store.leader_acquire("reaper", "b", 30, now=t0 + 31)
    assert taken is not None and taken.term == lead.term + 1


def test_expired_leader_cannot_renew_itself(store: Store, t0: float) -> None:
    lead = store.leader_acquire("reaper", "a", 10, now=t0)
    assert lead is not None
    assert store.leader_renew("reaper", "a", lead.term, 10, now=t0 + 11) is None
    again = store.leader_acquire("reaper", "a", 10, now=t0 + 12)
    assert again is not None, "an expired lease may be taken again, by anyone"
    assert (again.holder, again.term) == ("a", lead.term + 1)
    assert store.leader_renew("reaper", "a", lead.term, 10, now=t0 + 13) is None


def test_expired_leader_is_replaced_and_fenced(store: Store, t0: float) -> None:
    old = store.leader_acquire("reaper", "a", 10, now=t0)
    assert old is not None
    assert store.leader_acquire("reaper", "b", 10, now=t0 + 5) is None
    new = store.leader_acquire("reaper", "b", 30, now=t0 + 11)
    assert new is not None
    assert (new.holder, new.term) == ("b", old.term + 1)
    assert new.expires_at == at(t0 + 41)

    # the old term can neither renew nor release, and the new leader keeps its lease
    assert store.leader_renew("reaper", "a", old.term, 100, now=t0 + 12) is None
    assert store.leader_release("reaper", "a", old.term) is False
    assert store.leader_acquire("reaper", "c", 30, now=t0 + 40) is None
    renewed = store.leader_renew("reaper", "b", new.term, 30, now=t0 + 40)
    assert renewed is not None
    assert (renewed.holder, renewed.term) == ("b", new.term)
    assert renewed.expires_at == at(t0 + 70)


def test_release_lets_another_acquire_at_once(store: Store, t0: float) -> None:
    lead = store.leader_acquire("reaper", "a", 30, now=t0)
    assert lead is not None
    assert store.leader_release("reaper", "a", lead.term) is True
    assert store.leader_renew("reaper", "a", lead.term, 30, now=t0 + 1) is None
    assert store.leader_release("reaper", "a", lead.term) is False
    nxt = store.leader_acquire("reaper", "b", 30, now=t0 + 1)
    assert nxt is not None
    assert (nxt.holder, nxt.term) == ("b", lead.term + 1)
