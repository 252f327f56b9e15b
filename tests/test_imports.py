"""No import cycles in the tether package, lazy and type-checking imports included.

An import inside a function is still an import: it only hides a cycle until the function runs
(and makes the first import of a module depend on which one a program happened to import
first). An import under ``if TYPE_CHECKING:`` never runs, but it is still a dependency: the
module cannot be read, typed or moved without the one it names, so a circle drawn through it
is a circle in the design (issue #17: the App in the middle). The walk reads every module's
imports (top level, inside functions and under ``if TYPE_CHECKING:``) and fails on any cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "tether"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The tether modules ``tree`` imports: at run time or for the type checker."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                for alias in child.names:  # ``from tether import payload`` is a module
                    full = f"{child.module}.{alias.name}"
                    out.add(full if full in modules else child.module)
            visit(child)

    visit(tree)
    return {m for m in out if m in modules}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(ast.parse(path.read_text(encoding="utf-8")), modules)
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(_path(graph, set(component)))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A readable cycle inside ``component``: follow edges from its smallest name back home."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        options = sorted(graph[path[-1]] & component)
        if (start in options and len(path) > 1) or options == [start]:
            return [*path, start]
        nxt = next((o for o in options if o not in seen), start)
        if nxt == start:
            return [*path, start]
        path.append(nxt)
        seen.add(nxt)


def test_the_walk_sees_imports_and_finds_a_cycle() -> None:
    tree = ast.parse("import typing\nfrom typing import TYPE_CHECKING\nimport tether.a\n"
                     "if TYPE_CHECKING:\n    from tether.c import X\n"
                     "if typing.TYPE_CHECKING:\n    import tether.d\n"
                     "def f():\n    from tether import b\n")
    modules = dict.fromkeys(["tether.a", "tether.b", "tether.c", "tether.d"], Path())
    assert _imports(tree, modules) == {"tether.a", "tether.b", "tether.c", "tether.d"}
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_in_tether() -> None:
    graph = import_graph()
    assert "tether._app" in graph and "tether._worker.worker" in graph["tether._app"]
    found = cycles(graph)
    assert found == [], "import cycles: " + "; ".join(" -> ".join(c) for c in found)


@pytest.mark.parametrize("module", ["tether._task", "tether._worker.worker", "tether._app",
                                    "tether._worker.processes.child", "tether._jobview",
                                    "tether._runtime", "tether._registry", "tether._events",
                                    "tether._logs", "tether._errors"])
def test_each_entry_module_imports_first(module: str) -> None:
    """Importing any of them first, in a fresh interpreter, works (no half-initialised
    module met on the way)."""
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


#: Layers that may import only from a fixed set of tether modules (prefixes), and why.
#: ``tether._server`` is operations (issue #21): it serves any store through the public API,
#: the store contract (``tether.stores``) and the wire protocol, never a store's private
#: modules, so every store served works the same and a store's internals can change freely.
LAYER_RULES: dict[str, tuple[str, ...]] = {
    "tether._server": ("tether", "tether.stores", "tether._wire", "tether._errors",
                       "tether._version", "tether._server"),
}


def _allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    """``tether`` and ``tether.stores`` allow themselves exactly; the others their package."""
    exact = {"tether", "tether.stores"}
    return any(module == p or (p not in exact and module.startswith(p + "."))
               for p in prefixes)


def test_layers_import_only_what_their_rule_allows() -> None:
    graph = import_graph()
    wrong = {name: sorted(m for m in imports if not _allowed(m, allowed))
             for layer, allowed in LAYER_RULES.items()
             for name, imports in graph.items()
             if name == layer or name.startswith(layer + ".")}
    assert {k: v for k, v in wrong.items() if v} == {}
    assert not _allowed("tether.stores._sqlite.store", LAYER_RULES["tether._server"])
