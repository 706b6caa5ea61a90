"""The package's import graph has no cycles and keeps docs/design.md's floors, lazy
imports included.

A function-local import still makes a dependency: a cycle hidden behind one is a cycle.
Imports under `if TYPE_CHECKING:` are for the type checker only and do not count for
cycles; for the floors they do (a type from a higher floor is still a dependency on it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

PACKAGE = REPO / "src" / "cce_knowledge"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, typing_too: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing_too:
            yield from (n for branch in node.orelse for n in _imports_in(branch))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node, typing_too)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, package: str, mods: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        # `from pkg import mod` depends on the submodule; `from mod import name` on mod.
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = set()
    for name in names:
        while name not in mods and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in mods:
            out.add(name)
    return out


def import_graph(typing_too: bool = False) -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), typing_too):
            deps |= _targets(node, package, mods)
        graph[name] = deps - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_cycle_among_package_modules() -> None:
    assert cycles(import_graph()) == []


def test_the_checker_sees_lazy_and_relative_imports() -> None:
    # The checker itself must find a cycle made only of function-local imports.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from cce_knowledge.sync import push\n"
        "def f():\n    from cce_knowledge.sync.cck import CckError\n"
    )
    mods = _modules()
    deps = set().union(*(_targets(n, "cce_knowledge.sync", mods) for n in _imports(tree)))
    assert deps == {"cce_knowledge.sync.cck"}
    graph = import_graph()
    assert "cce_knowledge.retrieval.hits" in graph["cce_knowledge.retrieval.default"]


def design_floors() -> dict[str, int]:
    """docs/design.md's floors: the line `core → … → cli`, lowest first; packages on one
    floor are separated by commas."""
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    m = re.search(r"^core → .* → cli$", text, re.MULTILINE)
    assert m, "docs/design.md lost its floors line (`core → … → cli`)"
    floors: dict[str, int] = {}
    for level, group in enumerate(m.group(0).split(" → ")):
        for pkg in group.split(","):
            floors[pkg.strip()] = level
    return floors


def broken_floors(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Every import of a module from another package on the same or a higher floor."""
    out = []
    for mod, deps in sorted(graph.items()):
        parts = mod.split(".")
        if len(parts) < 3:  # the package itself and __main__ (the entry point)
            continue
        for dep in sorted(deps):
            dparts = dep.split(".")
            if len(dparts) < 3 or dparts[1] == parts[1]:
                continue
            if floors[dparts[1]] >= floors[parts[1]]:
                out.append(f"{mod} -> {dep}")
    return out


def test_every_package_is_on_a_floor() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert set(design_floors()) == packages


def test_imports_go_down_the_floors_only() -> None:
    assert broken_floors(import_graph(typing_too=True), design_floors()) == []


@pytest.mark.parametrize(
    ("source", "broken"),
    [
        # lazy, inside a function: still a dependency
        ("def f():\n    from cce_knowledge.semantic.hybrid import Fusion\n", True),
        # for the type checker only: a dependency on the floor above all the same
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from cce_knowledge.semantic.hybrid import Fusion\n",
            True,
        ),
        ("from cce_knowledge.store.snapshots import read_current\n", False),
        ("from cce_knowledge.retrieval.hits import Hit\n", False),  # its own package
    ],
)
def test_the_floor_checker_sees_every_kind_of_import(source: str, broken: bool) -> None:
    mods = _modules()
    tree = ast.parse(source)
    deps = set().union(
        *(_targets(n, "cce_knowledge.retrieval", mods) for n in _imports(tree, True))
    )
    graph = {"cce_knowledge.retrieval.probe": deps}
    assert bool(broken_floors(graph, design_floors())) is broken


def _local_imports_without_reason(path: Path) -> list[str]:
    """Imports inside functions that give no reason: no comment on the line or the line
    above, no docstring of the function that names the import, and no `Lazy imports:`
    paragraph in the module's docstring."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    if "Lazy imports:" in (ast.get_docstring(tree) or ""):
        return []
    lines = text.splitlines()
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(fn) or ""
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if "#" in lines[node.lineno - 1] or above.startswith("#") or "import" in doc:
                continue
            out.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return out


def test_every_import_inside_a_function_says_what_it_saves() -> None:
    missing = [m for p in sorted(PACKAGE.rglob("*.py")) for m in _local_imports_without_reason(p)]
    assert missing == []
