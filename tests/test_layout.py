"""One public face: what users import is public by name, everything else is private.

Issue #17: every module path looked public (``tether.worker.sendahead``) and two classes were
called ``Job``. These tests hold the layout docs/architecture.md describes: a module is public
only in the packages listed here; every other module has an underscore in its dotted path; the
public names of ``tether`` say they come from ``tether``; no two classes share a name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import tether

PACKAGE = Path(tether.__file__).resolve().parent

#: The public modules and packages (everything in them that is not underscored is public API).
PUBLIC = {
    "tether", "tether.__main__", "tether.stores", "tether.testing", "tether.testing.plugin",
    "tether.dashboard", "tether.metrics", "tether.tracing", "tether.contrib",
}


def _module_names() -> list[str]:
    names = []
    for path in PACKAGE.rglob("*.py"):
        parts = ["tether", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return sorted(names)


def test_every_module_is_public_by_name_or_private() -> None:
    stray = [name for name in _module_names()
             if name not in PUBLIC and not name.startswith("tether.contrib.")
             and not any(part.startswith("_") for part in name.split("."))]
    assert stray == [], f"modules that look public but are not in the public list: {stray}"


def test_the_layout_check_can_fail() -> None:
    """The check above is not vacuous: a non-underscored internal path would be reported."""
    name = "tether.worker.sendahead"
    assert name not in PUBLIC and not any(p.startswith("_") for p in name.split("."))


@pytest.mark.parametrize("package", ["tether", "tether.stores", "tether.testing"])
def test_public_packages_declare_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert exported == sorted(set(exported), key=exported.index), "duplicates in __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == []


def test_tethers_public_names_say_they_come_from_tether() -> None:
    wrong = {name: obj.__module__ for name in tether.__all__ if not name.startswith("__")
             for obj in [getattr(tether, name)]
             if hasattr(obj, "__module__") and obj.__module__ != "tether"}
    assert wrong == {}


def test_no_two_classes_share_a_name() -> None:
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if "_pb2" in path.name:  # generated from tether.proto: its names are the protocol's
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    twice = {name: places for name, places in seen.items() if len(places) > 1}
    assert twice == {}, f"classes that share a name: {twice}"
