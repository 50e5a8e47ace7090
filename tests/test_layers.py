"""The import graph of ``repairbot/`` has no circle beyond the known ones listed here.

The graph is read with ``ast`` (nothing is imported): ``import x``, ``from x import y`` and
relative imports, at module level, inside functions and under ``TYPE_CHECKING`` alike (an import
moved into a function or a type-checking block to dodge a circle is still a circle to a reader).

KNOWN_CYCLES are the circles this test found when it was written (issue 27, part 1); breaking
one means removing it here. A new circle, or a known one that grew, fails with its modules named.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "repairbot"

# the strongly connected components of the graph today, each with the imports that close it
KNOWN_CYCLES: list[frozenset[str]] = [
    # types -> edits (Rewrite, TYPE_CHECKING, for Site.rewrite) closes it; the rest of the
    # edits go bottom up (analysis no longer imports lint.rule: its FileContext is a Protocol)
    frozenset({
        "repairbot.analysis", "repairbot.edits", "repairbot.evidence",
        "repairbot.sources", "repairbot.tracebacks", "repairbot.types",
    }),
    # function-level imports both ways (notebook cells linted; lint reads notebooks)
    frozenset({"repairbot.lint.engine", "repairbot.notebook"}),
]


def module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_modules(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The repairbot modules one module imports (a name imported from a package resolves to
    its submodule where one has that name, else to the package)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [origin + "." + alias.name if origin + "." + alias.name in modules else origin for alias in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {module: set(imported_modules(module, path, modules)) for module, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def test_cycle_finder_names_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_resolves_relative_and_from_imports() -> None:
    graph = import_graph()
    assert "repairbot.types" in graph["repairbot.unit"]
    assert "repairbot.lint.engine" in graph["repairbot.notebook"]  # a function-level import


def test_no_new_import_cycle() -> None:
    new = [sorted(cycle) for cycle in cycles(import_graph()) if cycle not in KNOWN_CYCLES]
    assert not new, f"import circle(s) in repairbot/: {new}"


def test_known_cycles_are_current() -> None:
    # a broken circle leaves the list, so KNOWN_CYCLES only shrinks
    found = cycles(import_graph())
    stale = [sorted(cycle) for cycle in KNOWN_CYCLES if cycle not in found]
    assert not stale, f"no longer a circle, remove from KNOWN_CYCLES: {stale}"
