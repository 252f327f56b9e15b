"""Every store implements every role of the contract, and declares its capabilities.

The roles (``tether.stores._roles``) are what callers depend on; a store that lacked one
method of one role would fail only where that caller runs. The capabilities are what callers
check instead of trying a call: they must be declared by the store class, and a store that
declares a transactional ability must have it.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from tether.stores import (
    ROLES,
    Capabilities,
    Store,
    Transactional,
    transactional_enqueue,
    transactional_finish,
)

#: The stores that write inside a caller's transaction (docs/stores.md says which).
TRANSACTIONAL = {"postgres"}


def _own(role: type) -> dict[str, Any]:
    """The members ``role`` itself declares: its methods and its annotated attributes."""
    found: dict[str, Any] = {name: None for name in vars(role).get("__annotations__", {})}
    found.update({name: value for name, value in vars(role).items()
                  if callable(value) and not name.startswith("_")})
    return found


def _members(role: type) -> set[str]:
    """Every member of ``role``, its bases' included."""
    return {name for base in role.__mro__
            if base is not Protocol and getattr(base, "_is_protocol", False)
            for name in _own(base)}


def test_every_store_implements_every_role(store: Store) -> None:
    for role in (*ROLES, Store):
        assert isinstance(store, role), f"{store.kind} is not a {role.__name__}"
        missing = sorted(name for name in _members(role) if not hasattr(store, name))
        assert missing == [], f"{store.kind} lacks {role.__name__}.{missing}"


def test_capabilities_are_declared_by_the_store_class(store: Store, store_kind: str) -> None:
    declared = type(store).capabilities
    assert isinstance(declared, Capabilities)
    assert store.capabilities is declared
    transactional = store_kind in TRANSACTIONAL
    assert declared.enqueue_in_transaction is transactional
    assert declared.complete_in_transaction is transactional
    if transactional:
        assert isinstance(store, Transactional)
        assert transactional_enqueue(store) is store
        assert transactional_finish(store) is store
    else:
        assert transactional_enqueue(store) is None
        assert transactional_finish(store) is None


def test_the_roles_make_up_the_store_and_agree_where_they_meet() -> None:
    """Store adds nothing to its roles, every role adds something, and a member two roles
    declare (a read both of their callers need) has one signature."""
    assert _own(Store) == {}
    assert _members(Store) == set().union(*(_members(role) for role in ROLES))
    declared: dict[str, list[tuple[type, Any]]] = {}
    for role in ROLES:
        assert _own(role), f"{role.__name__} declares nothing"
        for name, value in _own(role).items():
            declared.setdefault(name, []).append((role, value))
    for name, where in declared.items():
        signatures = {str(inspect.signature(value)) for _, value in where if value is not None}
        assert len(signatures) <= 1, f"{name} differs between {[r.__name__ for r, _ in where]}"
