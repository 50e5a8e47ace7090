"""repairbot/'s modules import in one direction: each layer uses only the layers below it.

The graph is read with ``ast`` (nothing is imported): ``import x``, ``from x import y`` and
relative imports, at module level, inside functions and under ``TYPE_CHECKING`` alike (an import
moved into a function or a type-checking block to dodge a circle is still a circle to a reader).

LAYERS is the contract, bottom up (docs/architecture.md says the same in prose). A module
imports modules of its own layer or of a lower one; an import of a higher layer fails, named,
and so does a module that no layer lists (a new module is placed on purpose) and any import
circle (within one layer too).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "repairbot"

# Bottom up. An entry names a module, or a package and everything under it ("x.*").
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # runs in the user's interpreter: the standard library and torch, never the rest of repairbot
    ("harness", ("repairbot.trace.harness.*", "repairbot.trace.bootstrap")),
    # values and tables every layer shares; they import nothing of repairbot above
    ("base", (
        "repairbot", "repairbot.trace", "repairbot.output", "repairbot.action",
        "repairbot.run_config", "repairbot.torch_semantics", "repairbot.types",
        "repairbot.cst_walk", "repairbot.codemod", "repairbot.launchers", "repairbot.output.diff", "repairbot.action.github",
    )),
    # what a run left and the files it ran: sources, tracebacks, evidence, notebooks
    ("inputs", (
        "repairbot.sources", "repairbot.tracebacks", "repairbot.evidence", "repairbot.notebook",
    )),
    # facts about a program, and where a value was written
    ("analysis", ("repairbot.analysis", "repairbot.frameworks", "repairbot.provenance")),
    # a fix as edits on nodes, and the one applier
    ("edits", ("repairbot.edits",)),
    # what a repair did: attempts, their fixes (which hold a Site) and the run's report
    ("results", ("repairbot.results",)),
    # the units (patterns, lint rules, health checks), their discovery and the catalogue
    ("units", (
        "repairbot.unit", "repairbot.pattern", "repairbot.lint.rule", "repairbot.lint.selection",
        "repairbot.health", "repairbot.classify", "repairbot.registry",
    )),
    # what runs the units: the tracing runner, the repair loop, the lint engine, the reports
    ("engines", (
        "repairbot.trace.runner", "repairbot.loop", "repairbot.lint.engine", "repairbot.lint.incremental",
        "repairbot.lint.files", "repairbot.lint.run", "repairbot.output.report", "repairbot.output.markdown",
        "repairbot.output.sarif", "repairbot.output.git", "repairbot.output.paths",
    )),
    # the ways in: the API, the CLI, the LSP server, the GitHub Action's stages
    ("front", (
        "repairbot.api", "repairbot.cli", "repairbot.__main__", "repairbot.lint",
        "repairbot.lint.formats", "repairbot.server.*", "repairbot.action.stage_a",
        "repairbot.action.stage_b",
    )),
)


def layer_of(module: str) -> int | None:
    """The index of the layer that lists ``module`` (its nearest "x.*" package else)."""
    for index, (_name, entries) in enumerate(LAYERS):
        if module in entries:
            return index
    for index, (_name, entries) in enumerate(LAYERS):
        if any(e.endswith(".*") and (module == e[:-2] or module.startswith(e[:-1])) for e in entries):
            return index
    return None


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


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a higher layer, as "module (layer) -> imported (layer)"."""
    found = []
    for module, imported in sorted(graph.items()):
        own = layer_of(module)
        for target in sorted(imported):
            other = layer_of(target)
            if own is not None and other is not None and other > own:
                found.append(f"{module} ({LAYERS[own][0]}) -> {target} ({LAYERS[other][0]})")
    return found


def test_cycle_finder_names_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_graph_resolves_relative_and_from_imports() -> None:
    graph = import_graph()
    assert "repairbot.types" in graph["repairbot.unit"]
    assert "repairbot.notebook" in graph["repairbot.lint.engine"]
    assert "repairbot.pattern" in graph["repairbot.classify"]


def test_an_import_of_a_higher_layer_is_named() -> None:
    graph = {"repairbot.types": {"repairbot.edits"}, "repairbot.edits": {"repairbot.types"}}
    assert upward_imports(graph) == ["repairbot.types (base) -> repairbot.edits (edits)"]
    assert layer_of("repairbot.trace.harness.probes.step_budget") == 0
    assert layer_of("repairbot.server.lsp") == len(LAYERS) - 1


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(module for module in module_files() if layer_of(module) is None)
    assert not unplaced, f"add to a layer of LAYERS (tests/test_layers.py): {unplaced}"


def test_no_module_is_listed_twice() -> None:
    entries = [entry for _name, layer in LAYERS for entry in layer]
    assert len(entries) == len(set(entries))


def test_layers_import_only_downwards() -> None:
    upward = upward_imports(import_graph())
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_no_import_cycle() -> None:
    found = [sorted(cycle) for cycle in cycles(import_graph())]
    assert not found, f"import circle(s) in repairbot/: {found}"
