"""The web dashboard (the ``dashboard`` extra): server-rendered pages over the store
contract, so it works on every store; see docs/dashboard.md.

``create_app`` is imported on first use, so importing this package needs no web stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.dashboard._app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from tether.dashboard._app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
