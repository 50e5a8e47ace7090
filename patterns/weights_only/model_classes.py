"""A whole pickled model: the nn.Module classes it names (torch's own, the project's), and how
the load site can name each project class (its import, or a binding that shadows it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    bindings_of,
    dotted_name,
    reads,
)
from repairbot.evidence import Evidence
from repairbot.provenance import parameter_names
from repairbot.sources import Sources, report_path
from repairbot.types import Failure

from .record import TORCH_MODULE_CLASS, PickledGlobal
from .source import expression_for

# torch.nn classes that are not modules: subclassing one does not make an nn.Module.
_NOT_MODULES = re.compile(r"(Uninitialized)?(Parameter|Buffer)\Z")


@dataclass(frozen=True)
class ModelClass:
    name: str  # the class's name in its module
    file: Path | None  # the project file that defines it; None for torch's own module classes
    module: str = ""  # the module that defines it in the run (a checkpoint's __main__.Net may be models.Net)


def model_classes(
    needed: Sequence[PickledGlobal], failure: Failure, evidence: Evidence | None, sources: Sources
) -> dict[str, ModelClass]:
    """The globals that are nn.Module classes: torch's own, and classes the project defines at
    module level whose bases lead to ``torch.nn.Module`` in its source (a plain class, a
    dataclass, a function of the project is not one)."""
    script = next((f for f in failure.frames if f.user and f.function == "<module>"), None)
    files = [Path(f) for f in getattr(evidence, "imported_files", ()) or ()]
    found: dict[str, ModelClass] = {}
    for entry in needed:
        name = entry.resolved or entry.name
        torch_class = TORCH_MODULE_CLASS.match(name)
        if torch_class is not None:
            found[entry.name] = ModelClass(torch_class["cls"], None)
            continue
        module_name, _, class_name = name.rpartition(".")
        file = Path(script.file) if module_name == "__main__" and script else _module_file(module_name, files)
        if file is not None and _is_module_subclass(sources, file, class_name, files, set()):
            found[entry.name] = ModelClass(class_name, file, module_name)
    return found


def _module_file(module_name: str, files: Sequence[Path]) -> Path | None:
    """The project file of an imported module (``models`` -> models.py), from the traced imports."""
    if not module_name or module_name == "__main__":
        return None
    tail = module_name.replace(".", "/")
    for file in files:
        text = file.as_posix()
        if any(text == end or text.endswith("/" + end) for end in (f"{tail}.py", f"{tail}/__init__.py")):
            return file
    return None


def _is_module_subclass(sources: Sources, file: Path, class_name: str, files: Sequence[Path], seen: set[str]) -> bool:
    key = f"{file}:{class_name}"
    if key in seen or not class_name.isidentifier():
        return False
    seen.add(key)
    try:
        module = sources.module(file)
    except Exception:  # not readable or not Python: the class is not proved to be a module
        return False
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    definition = classes.get(class_name)
    if definition is None:
        return False
    imports = ImportTable(module)
    for base in definition.bases:
        if base.keyword is not None:
            continue
        local = dotted_name(base.value)
        if local in classes and _is_module_subclass(sources, file, local, files, seen):
            return True
        qualified = imports.qualify(base.value)
        if qualified is None:
            continue
        head, _, attr = qualified.rpartition(".")
        if (head == "torch.nn" or head.startswith("torch.nn.modules.")) and attr[:1].isupper() and not _NOT_MODULES.match(attr):
            return True
        other = _module_file(head, files)
        if other is not None and _is_module_subclass(sources, other, attr, files, seen):
            return True
    return False


@dataclass(frozen=True)
class _ProjectNames:
    named: dict[str, str]  # each project class's global -> the code that names it at the load
    # the ``from module import ...`` statements that get classes added, with the names added
    additions: list[tuple[cst.ImportFrom, tuple[str, ...]]]
    # the ``import module`` lines that get a ``from module import Class`` after them (as code)
    inserted: list[tuple[cst.SimpleStatementLine, str]]


def project_class_names(
    project: Mapping[str, ModelClass], load_file: Path, module: cst.Module,
    imports: Sequence[cst.SimpleStatementLine], rebound: Rebinding,
) -> _ProjectNames | str:
    """Each project class as the load site names it: bare in its own file, through the file's
    imports, or added to a ``from models import Net`` of its module that the load already sees
    (the module is imported by then, so naming another of its classes runs no new code; a name
    the file already uses is never rebound). A module name the file rebinds (``model =
    model.RNNModel(...)``: at the load ``model`` is the instance) names nothing: the class is
    then imported by name, ``from model import RNNModel`` right after the file's ``import
    model``. A reason when one cannot be named (importing its module at the load would run
    code the script never ran at that point)."""
    table = import_table(imports, rebound)
    used = set(reads(module))
    named: dict[str, str] = {}
    added: dict[str, list[str]] = {}
    inserted: dict[str, list[str]] = {}
    for name, found in project.items():
        if found.file is None:  # torch's own class: spelled by _spell
            continue
        if found.file.resolve() == load_file.resolve():
            if rebound.besides_definition(found.name):
                return (
                    f"the checkpoint names the class {found.name} of {report_path(load_file)}, and the file also "
                    f"binds the name {found.name} to something else: at the load it may not be the class"
                )
            named[name] = found.name
            continue
        module_name, _, class_name = name.rpartition(".")
        if module_name == "__main__" and found.module not in ("", "__main__"):
            return (
                f"the checkpoint names {name}, a class of the script that saved it; at the load in "
                f"{report_path(load_file)} that name is {found.module}.{found.name} (imported from "
                f"{report_path(found.file)}), another class, which would be built from the saved one's pickled state"
            )
        if module_name == "__main__":
            return (
                f"the checkpoint names {name}, a class of the running script (__main__), which "
                f"{report_path(load_file)} cannot import"
            )
        code = expression_for(table, name, {})
        if code is not None:
            named[name] = code
            continue
        shadowed = _module_import_of(imports, module_name)
        if _from_import_of(imports, module_name) is None and shadowed is None:
            return (
                f"the checkpoint names the project's class {name}, which is not imported at the load in "
                f"{report_path(load_file)} (no import of {module_name} there to name it through)"
            )
        if class_name in used:
            binding = (
                f"binds {module_name} to something else (at the load it is not the module)" if shadowed is not None
                else f"imports from {module_name}"
            )
            return (
                f"the checkpoint names the project's class {name}; {report_path(load_file)} {binding} and already "
                f"uses the name {class_name} for something else, so importing it there would rebind that name"
            )
        named[name] = class_name
        (added if _from_import_of(imports, module_name) is not None else inserted).setdefault(module_name, []).append(class_name)
    additions = []
    for module_name, names in added.items():
        statement = _from_import_of(imports, module_name)
        assert statement is not None  # checked above
        additions.append((statement, tuple(names)))
    insertions = []
    for module_name, names in inserted.items():
        line = _module_import_of(imports, module_name)
        assert line is not None  # checked above
        insertions.append((line, f"from {module_name} import {', '.join(names)}"))
    return _ProjectNames(named, additions, insertions)


def _module_import_of(imports: Sequence[cst.SimpleStatementLine], module_name: str) -> cst.SimpleStatementLine | None:
    """The first ``import module_name`` line among ``imports`` (the module under its own name)."""
    for line in imports:
        for statement in line.body:
            if isinstance(statement, cst.Import) and any(
                dotted_name(alias.name) == module_name and alias.asname is None for alias in statement.names
            ):
                return line
    return None


def import_table(imports: Sequence[cst.SimpleStatementLine], rebound: Callable[[str], bool]) -> ImportTable:
    """The names ``imports`` bind, without those the file also binds otherwise: those may not
    stand for what was imported when the load runs."""
    table = ImportTable(cst.Module(body=list(imports)))
    table.aliases = {local: target for local, target in table.aliases.items() if not rebound(local)}
    return table


@dataclass(frozen=True)
class Rebinding:
    """Which names the file binds otherwise than by an import where the load sees them: at
    module level (an assignment, a loop or ``with`` target, a ``def`` or ``class``, a ``global``
    declaration in any function) or in a function around the load (its parameters too). Such
    a name may not stand for what was imported when the load runs."""

    module: cst.Module
    functions: tuple[cst.FunctionDef, ...]  # around the load, innermost first
    declared: frozenset[str]  # declared global in some function
    defined: tuple[str, ...]  # each module-level def and class, once per definition

    @classmethod
    def around(cls, wrapper: MetadataWrapper, statement: cst.CSTNode) -> Rebinding:
        module = wrapper.module
        parents = wrapper.resolve(ParentNodeProvider)
        functions: list[cst.FunctionDef] = []
        node: cst.CSTNode | None = parents.get(statement)
        while node is not None:
            if isinstance(node, cst.FunctionDef):
                functions.append(node)
            node = parents.get(node)
        declared = frozenset(
            name.name.value for node in m.findall(module, m.Global()) if isinstance(node, cst.Global) for name in node.names
        )
        defined = tuple(s.name.value for s in module.body if isinstance(s, cst.FunctionDef | cst.ClassDef))
        return cls(module, tuple(functions), declared, defined)

    def __call__(self, name: str) -> bool:
        return name in self.defined or self.besides_definition(name)

    def besides_definition(self, name: str) -> bool:
        """Bound otherwise than by an import and by one module-level definition (the class itself)."""
        if name in self.declared or self.defined.count(name) > 1 or bindings_of(self.module, name):
            return True
        return any(name in parameter_names(function) or bindings_of(function, name) for function in self.functions)


def _from_import_of(imports: Sequence[cst.SimpleStatementLine], module_name: str) -> cst.ImportFrom | None:
    """The first ``from module_name import a, b`` (absolute, not a star import) among ``imports``."""
    for line in imports:
        for statement in line.body:
            if (
                isinstance(statement, cst.ImportFrom) and not statement.relative and statement.module is not None
                and dotted_name(statement.module) == module_name and not isinstance(statement.names, cst.ImportStar)
            ):
                return statement
    return None


def kinds_text(needed: Sequence[PickledGlobal], classes: Mapping[str, ModelClass]) -> str:
    plain = [e.name for e in needed if e.name not in classes]
    project = [e.name for e in needed if e.name in classes and classes[e.name].file is not None]
    torch_classes = [e.name for e in needed if e.name in classes and classes[e.name].file is None]
    parts = []
    if plain:
        parts.append(f"{'all are' if not classes else ', '.join(plain) + ' are'} plain data types")
    if project:
        defined = ", ".join(
            f"{name} ({report_path(cast_file)})" for name in project if (cast_file := classes[name].file) is not None
        )
        parts.append(f"{defined} {'is an nn.Module subclass' if len(project) == 1 else 'are nn.Module subclasses'} of the project")
    if torch_classes:
        parts.append(f"{len(torch_classes)} {'is' if len(torch_classes) == 1 else 'are'} torch's own module classes")
    return "; " + "; ".join(parts)
