"""The facts about a program that patterns and lint rules both ask, in one place.

- names: what a name stands for under the file's imports (``ImportTable``, ``is_torch_name``),
  the imports bound where a node runs (``visible_imports``), torch names written with them;
- positions: nodes by traced position (``spans``, ``call_at``, ``failing_expression``), the
  stale-source guard (``traced_line_matches``), the enclosing node (``enclosing``);
- bindings and reads in execution order (``events``, ``last_binding``, ``bound_once``);
- autograd-off regions (``grad_mode_of``, ``grad_off_around``, ``under_no_grad``...);
- the loss call (``loss_name``), from the torch-semantics table (repairbot/torch_semantics.py);
- the traced evidence read for a report (``place``, ``local_tensors``, ``tensor_text``...).

Source helpers answer ``None`` (or nothing) when a file cannot be read or parsed: a diagnosis
then falls back to the traceback. The stack-based helpers (``innermost``, ``under_no_grad``...)
read a lint walk's ``FileContext.stack`` in place of parents; the others read LibCST metadata.
Building or editing nodes is repairbot/codemod.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from repairbot.cst_walk import descendants, is_kind
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.sources import SourceError, Sources, report_path
from repairbot.torch_semantics import (
    GRAD_MODE_SETTERS,
    GRAD_OFF_CONTEXTS,
    GRAD_ON_CONTEXTS,
    is_loss_name,
)
from repairbot.types import Frame, Span


class FileContext(Protocol):
    """What the walk-time helpers below read of a lint rule's file context (the lint rule
    API's ``FileContext`` is one): a Protocol, so this layer never imports the layer above it."""

    module: cst.Module
    stack: list[cst.CSTNode]

    def qualify(self, node: cst.BaseExpression) -> str | None: ...

    def parent(self) -> cst.CSTNode | None: ...


Description = DescribedValue


# --------------------------------------------------------------------------------------------
# Names


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, None for anything else."""
    # type() rather than isinstance: LibCST's node classes are ABCs (a slow check), and final
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def import_bindings(node: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, str]]:
    """(local name, full name) of each name an import statement binds: ``import torch.nn as nn``
    gives (nn, torch.nn), ``import torch.nn`` (torch, torch), ``from torch import nn`` (nn,
    torch.nn); relative and star imports give nothing."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                yield full.split(".")[0], full.split(".")[0]  # `import torch.nn` binds `torch`
    elif node.module is not None and not node.relative and not isinstance(node.names, cst.ImportStar):
        base = dotted_name(node.module) or ""
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            yield local, f"{base}.{name}"


class ImportTable:
    """What each imported name stands for, across every import statement of a module.

    A deliberately flat view (a name imported anywhere in the file counts everywhere): a
    training script rebinds ``nn`` or ``torch`` to something else only by mistake, and this
    keeps the lookup cheap compared with a full scope analysis.
    """

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        for node in _walk_imports(module):
            self.aliases.update(import_bindings(node))

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The full dotted name an expression refers to (``nn.Linear`` -> ``torch.nn.Linear``)."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head not in self.aliases:
            return None
        full = self.aliases[head]
        return f"{full}.{rest}" if rest else full


def _walk_imports(module: cst.Module) -> Iterator[cst.Import | cst.ImportFrom]:
    """Every import statement of the module, in source order (nested ones included).

    Statements hold imports and expressions never do, so the walk does not enter expressions
    or other simple statements (a matcher's ``findall`` visits and rebuilds every node)."""
    for node in descendants(module, prune=_NO_STATEMENTS):
        if isinstance(node, cst.Import | cst.ImportFrom):
            yield node


# Nodes that hold no statement: the walk for imports does not enter them.
_NO_STATEMENTS = (cst.BaseExpression, cst.BaseSmallStatement, cst.Decorator, cst.Parameters)


def is_torch_name(qualified: str | None, *names: str) -> bool:
    """Whether a qualified name is one of ``names`` (given from ``torch.``), re-exports included.

    ``torch.nn.modules.linear.Linear`` is ``torch.nn.Linear``.
    """
    if qualified is None:
        return False
    for name in names:
        if qualified == name:
            return True
        module, _, attr = name.rpartition(".")
        if qualified.startswith(module + ".") and qualified.rsplit(".", 1)[-1] == attr:
            return True
    return False




# --------------------------------------------------------------------------------------------
# Positions


@dataclass(frozen=True)
class Located:
    node: cst.CSTNode
    span: Span


def spans(wrapper: MetadataWrapper) -> dict[cst.CSTNode, Span]:
    positions = wrapper.resolve(PositionProvider)
    return {
        node: Span(r.start.line, r.start.column, r.end.line, r.end.column)
        for node, r in positions.items()
    }


def calls_on_line(wrapper: MetadataWrapper, line: int) -> list[Located]:
    """Every call that starts on ``line``, outermost first."""
    found = [
        Located(node, span)
        for node, span in spans(wrapper).items()
        if isinstance(node, cst.Call) and span.line == line
    ]
    return sorted(found, key=lambda located: (located.span.col, -located.span.end_line, -located.span.end_col))


def call_at(
    wrapper: MetadataWrapper,
    line: int,
    col: int | None = None,
    end_line: int | None = None,
    end_col: int | None = None,
) -> Located | None:
    """The call expression at a traced position.

    Python (>= 3.11) records the start and end columns of the call it was executing; with
    them the call is exact. Without columns (older interpreters) only a line is known, and the
    answer is the single call on it, or None when there are several.
    """
    candidates = [c for c in calls_on_line(wrapper, line)]
    if col is not None:
        for located in candidates:
            span = located.span
            if span.col == col and (end_line is None or (span.end_line, span.end_col) == (end_line, end_col)):
                return located
        return None
    return candidates[0] if len(candidates) == 1 else None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def argument(call: cst.Call, position: int, name: str) -> cst.Arg | None:
    """A parameter's argument, given by position or by keyword."""
    found = keyword_arg(call, name)
    if found is not None:
        return found
    positional = positional_args(call)
    return positional[position] if position < len(positional) else None


def has_star_args(call: cst.Call) -> bool:
    return any(a.star for a in call.args)



def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A node and everything under it, in source order."""
    yield node
    for child in node.children:
        yield from walk(child)


def own_nodes(owner: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``owner`` and everything under it in its own code, in source order: nested functions,
    classes and lambdas (their own scopes) are not entered."""
    yield owner
    for child in owner.children:
        if not isinstance(child, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            yield from own_nodes(child)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(code: str) -> list[str]:
    """A module's lines as Python numbers them (``str.splitlines`` also splits at form feeds and
    other characters that Python's tokenizer reads as whitespace, shifting every line after)."""
    return _LINE_BREAK.split(code)


def one_line(module: cst.Module, node: cst.CSTNode) -> str:
    """A node's code on one line, for a report: ``nn.Dropout(p=0.1, inplace=True)`` whatever
    its layout (a call's arguments are joined with ``, ``; other whitespace runs collapse)."""
    if isinstance(node, cst.Call):
        parts = [
            f"{arg.star}{arg.keyword.value + '=' if arg.keyword else ''}{one_line(module, arg.value)}"
            for arg in node.args
        ]
        return f"{one_line(module, node.func)}({', '.join(parts)})"
    return " ".join(module.code_for_node(node).split())



def called_name(call: cst.Call) -> str:
    """The last name of what a call calls: ``init_hidden`` of ``self.model.init_hidden(n)``,
    ``DataLoader`` of ``DataLoader(ds)``; ``""`` for a call of anything else (``fs[0]()``)."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


# --------------------------------------------------------------------------------------------
# Evidence (what the run traced, for a report)

_SITE = re.compile(r"(?P<file>.+):(?P<line>\d+)")


def place(frame: Frame) -> str:
    """``models/net.py:12``: a location in the form of every path of the reports (relative to
    the repository's top), so that an evidence line never mixes it with bare file names."""
    return f"{report_path(frame.file)}:{frame.line}"


def place_in(path: Path, line: int) -> str:
    """``place`` for a line of a file the pattern read (its ``SourceView.path``)."""
    return f"{report_path(path)}:{line}"


def frame_at(file: str, line: int, function: str = "") -> Frame:
    return Frame(file=file, line=line, function=function, user=True)


def resolve_site(evidence: Evidence | None, site: object) -> Frame | None:
    """A recorded ``file:line`` site (a module's construction site) as a frame of a project file.

    A live run records absolute paths; a recorded case stores them relative to its project,
    and only the failure's frames and the imported files are re-anchored when it is read, so
    a relative path is matched against those.
    """
    if not isinstance(site, str):
        return None
    match = _SITE.fullmatch(site)
    if match is None:
        return None
    file, line = match["file"], int(match["line"])
    if Path(file).is_absolute():
        return frame_at(file, line)
    if evidence is None:
        return None
    frames = evidence.failure.frames if evidence.failure else ()
    known = [*evidence.imported_files, *(f.file for f in frames)]
    relative = Path(file).as_posix()
    for candidate in known:
        posix = Path(candidate).as_posix()
        if posix == relative or posix.endswith("/" + relative):
            return frame_at(candidate, line)
    return None


def scope_of(evidence: Evidence | None, frame: Frame | None) -> Scope:
    if evidence is None or frame is None:
        return Scope()
    return evidence.scope(frame)


def local_tensors(evidence: Evidence | None, frame: Frame | None) -> dict[str, Description]:
    """The tensors among a frame's recorded locals, by name."""
    described = scope_of(evidence, frame).locals
    return {name: value for name, value in described.items() if value.is_tensor}


def recorded_local(evidence: Evidence | None, frame: Frame | None, name: str) -> Description | None:
    return scope_of(evidence, frame).locals.get(name)


def tracks_grad(value: Description | None) -> bool:
    """Whether a recorded value is a tensor that requires grad (one autograd is following)."""
    return value is not None and value.is_tensor and bool(value.requires_grad)


def shape_of(tensor: Description) -> list[int] | None:
    return list(tensor.shape) if tensor.shape is not None else None


def shape_text(shape: Sequence[int] | None) -> str:
    return "[" + ", ".join(map(str, shape)) + "]" if shape is not None else "[?]"


def tensor_text(tensor: Description) -> str:
    """``[2, 16] float32 on cpu, requires grad``: one recorded tensor for people."""
    shape = shape_of(tensor)
    parts = ["scalar" if shape == [] else shape_text(shape)]
    if tensor.dtype:
        parts.append(tensor.dtype)
    text = " ".join(parts)
    if tensor.device:
        text += f" on {tensor.device}"
    if tensor.requires_grad is not None:
        text += ", requires grad" if tensor.requires_grad else ", does not require grad"
    return text


def numel(tensor: Description) -> int:
    return shape_numel(tensor.shape)


def shape_numel(shape: object) -> int:
    """The elements of a shape (a list or tuple of sizes); 0 when it is not one."""
    if not isinstance(shape, list | tuple):
        return 0
    total = 1
    for size in shape:
        total *= int(size)
    return total


# --------------------------------------------------------------------------------------------
# Source


@dataclass(frozen=True)
class Source:
    """One parsed user file: its module, the positions of its nodes, and its imports."""

    path: Path
    wrapper: MetadataWrapper
    positions: Mapping[cst.CSTNode, Span]
    imports: ImportTable

    @property
    def module(self) -> cst.Module:
        return self.wrapper.module

    def code(self, node: cst.CSTNode) -> str:
        """A node's code on one line, whitespace runs collapsed (for a report line)."""
        return " ".join(self.module.code_for_node(node).split())

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].line

    def around(self, line: int, *kinds: type[cst.CSTNode]) -> list[cst.CSTNode]:
        """The compound statements of the given kinds that contain ``line``, innermost first."""
        found = [
            (span, node) for node, span in self.positions.items()
            if isinstance(node, kinds) and span.contains_line(line)
        ]
        found.sort(key=lambda item: (item[0].line, -item[0].end_line), reverse=True)
        return [node for _, node in found]

    def statements_of(self, line: int) -> Sequence[cst.BaseStatement]:
        """The body of the innermost function around ``line``, or the module's body."""
        functions = self.around(line, cst.FunctionDef)
        if functions and isinstance(functions[0], cst.FunctionDef):
            body = functions[0].body
            return body.body if isinstance(body, cst.IndentedBlock) else ()
        return self.module.body

    def call_on_line(self, line: int, method: str) -> cst.Call | None:
        """The one call of ``.method(...)`` on a line (``loss.backward()``), if there is exactly one."""
        calls = [
            node for node, span in self.positions.items()
            if isinstance(node, cst.Call) and span.line <= line <= span.end_line
            and isinstance(node.func, cst.Attribute) and node.func.attr.value == method
        ]
        return calls[0] if len(calls) == 1 else None

    def backward_target(self, call: cst.Call | None) -> str | None:
        """``loss`` of ``loss.backward()`` or of ``torch.autograd.backward(loss)``."""
        if call is None:
            return None
        if self.is_call_of(call, "torch.autograd.backward"):
            first = call.args[0].value if call.args else None
            return first.value if isinstance(first, cst.Name) else None
        if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
            return call.func.value.value
        return None

    def is_call_of(self, node: cst.CSTNode, *names: str) -> bool:
        """Whether ``node`` calls one of the torch names (``torch.no_grad()``), aliases resolved."""
        return isinstance(node, cst.Call) and is_torch_name(self.imports.qualify(node.func), *names)


def source(sources: Sources, file: str) -> Source | None:
    """The parsed file, or None for a file that is not the user's readable Python source."""
    path = Path(file)
    if not path.is_absolute() or not path.is_file():
        return None
    try:
        wrapper = sources.metadata(path)
    except (SourceError, OSError):
        return None
    return Source(path=path, wrapper=wrapper, positions=spans(wrapper), imports=ImportTable(wrapper.module))


class _Reads(cst.CSTVisitor):
    """The plain names an expression reads (attribute names and keywords are not variables)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def reads(node: cst.CSTNode | None) -> list[str]:
    if node is None:
        return []
    visitor = _Reads()
    node.visit(visitor)
    return visitor.names


def bound_names(target: cst.BaseExpression) -> list[str]:
    """Names an assignment or loop target binds, in order: ``step, (x, y)`` -> step, x, y."""
    return _targets(target)[0]


def _targets(node: cst.BaseExpression) -> tuple[list[str], list[str]]:
    """Names an assignment target binds, and names it reads (``x[i] = ...`` reads x and i)."""
    if isinstance(node, cst.Name):
        return [node.value], []
    if isinstance(node, cst.Tuple | cst.List):
        bound: list[str] = []
        read: list[str] = []
        for element in node.elements:
            more_bound, more_read = _targets(element.value)
            bound += more_bound
            read += more_read
        return bound, read
    if isinstance(node, cst.StarredElement):
        return _targets(node.value)
    return [], reads(node)


@dataclass(frozen=True)
class Event:
    """A statement reading or binding a name, in execution order within one pass of a block."""

    kind: str  # "read" or "bind"
    name: str
    statement: cst.CSTNode
    value: cst.BaseExpression | None = None  # what a binding assigns, when it is an assignment


def _target_events(
    statement: cst.CSTNode, target: cst.BaseExpression, value: cst.BaseExpression | None = None
) -> Iterator[Event]:
    """What binding ``target`` reads (``x[i] = ...`` reads x and i), then what it binds."""
    bound, read = _targets(target)
    for name in read:
        yield Event("read", name, statement)
    for name in bound:
        yield Event("bind", name, statement, value)


def _small_events(statement: cst.BaseSmallStatement) -> Iterator[Event]:
    if isinstance(statement, cst.Assign):
        for name in reads(statement.value):
            yield Event("read", name, statement)
        for target in statement.targets:
            yield from _target_events(statement, target.target, statement.value)
    elif isinstance(statement, cst.AugAssign):
        for name in [*reads(statement.target), *reads(statement.value)]:
            yield Event("read", name, statement)
        bound, _ = _targets(statement.target)
        for name in bound:
            yield Event("bind", name, statement, statement.value)
    elif isinstance(statement, cst.AnnAssign):
        for name in reads(statement.value):
            yield Event("read", name, statement)
        yield from _target_events(statement, statement.target, statement.value)
    else:
        for name in reads(statement):
            yield Event("read", name, statement)


def events(statements: Sequence[cst.BaseStatement]) -> Iterator[Event]:
    """Reads and bindings of a block's statements in source order (one pass, branches in order).

    An approximation of execution order good enough for a diagnosis: both branches of an
    ``if`` count, nested functions and classes do not.
    """
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                yield from _small_events(small)
        elif isinstance(statement, cst.For):
            for name in reads(statement.iter):
                yield Event("read", name, statement)
            yield from _target_events(statement, statement.target)
            yield from events(_body(statement.body))
            if statement.orelse is not None:
                yield from events(_body(statement.orelse.body))
        elif isinstance(statement, cst.While):
            for name in reads(statement.test):
                yield Event("read", name, statement)
            yield from events(_body(statement.body))
            if statement.orelse is not None:
                yield from events(_body(statement.orelse.body))
        elif isinstance(statement, cst.If):
            yield from _if_events(statement)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                for name in reads(item.item):
                    yield Event("read", name, statement)
                if item.asname is not None:
                    for name in _targets(item.asname.name)[0]:
                        yield Event("bind", name, statement)
            yield from events(_body(statement.body))
        elif isinstance(statement, cst.Try):
            yield from events(_body(statement.body))
            for handler in statement.handlers:
                yield from events(_body(handler.body))
            if statement.orelse is not None:
                yield from events(_body(statement.orelse.body))
            if statement.finalbody is not None:
                yield from events(_body(statement.finalbody.body))


def _if_events(statement: cst.If) -> Iterator[Event]:
    for name in reads(statement.test):
        yield Event("read", name, statement)
    yield from events(_body(statement.body))
    if isinstance(statement.orelse, cst.If):
        yield from _if_events(statement.orelse)
    elif isinstance(statement.orelse, cst.Else):
        yield from events(_body(statement.orelse.body))


def _body(block: cst.BaseSuite) -> Sequence[cst.BaseStatement]:
    return block.body if isinstance(block, cst.IndentedBlock) else ()


def bindings_of(scope: cst.CSTNode, name: str) -> list[Event]:
    """Every binding of ``name`` in the body of ``scope`` (a module, function or class), nested
    blocks included, nested functions and classes not, in source order."""
    body = scope.body if isinstance(scope, cst.Module) else _body(getattr(scope, "body", cst.IndentedBlock(body=())))
    return [event for event in events(body) if event.kind == "bind" and event.name == name]


def plain_value(event: Event) -> cst.BaseExpression | None:
    """What a binding gives its name as a whole: the value of ``name = value`` or
    ``name: T = value``; None for the other bindings (unpacking, ``+=``, ``for``, ``with ... as``),
    whose value is not one written expression."""
    statement = event.statement
    if isinstance(statement, cst.Assign) and any(
        isinstance(target.target, cst.Name) and target.target.value == event.name for target in statement.targets
    ):
        return statement.value
    if isinstance(statement, cst.AnnAssign) and isinstance(statement.target, cst.Name):
        return statement.value
    return None


def assigned_value(statement: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """What a one-target assignment gives ``name``: the value of ``name = value``, or its
    element of ``a, name = x, value``; None for other statements and bindings."""
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return None
    target, value = statement.targets[0].target, statement.value
    if isinstance(target, cst.Name):
        return value if target.value == name else None
    if isinstance(target, cst.Tuple | cst.List) and isinstance(value, cst.Tuple | cst.List):
        if len(target.elements) != len(value.elements):
            return None
        for bound, given in zip(target.elements, value.elements, strict=True):
            if isinstance(bound.value, cst.Name) and bound.value.value == name and not isinstance(given, cst.StarredElement):
                return given.value
    return None


def name_reads(owner: cst.CSTNode, name: str) -> list[cst.Name]:
    """The ``Name`` nodes of ``name`` in ``owner``'s own code (nested functions, classes and
    lambdas left out; an attribute's or a keyword argument's name is no read). A function's
    parameters are its own Names too: pass its body for the reads alone."""
    found: list[cst.Name] = []
    stack = [owner]
    while stack:
        node = stack.pop()
        if node is not owner and isinstance(node, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)  # `x.labels` is no read of `labels`
            continue
        if isinstance(node, cst.Arg):
            stack.append(node.value)  # a keyword's name is no read
            continue
        if isinstance(node, cst.Name) and node.value == name:
            found.append(node)
        stack.extend(node.children)
    return found


def bound_once(scope: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """The value of the one binding of ``name`` in ``scope`` when it is a plain assignment."""
    found = bindings_of(scope, name)
    return plain_value(found[0]) if len(found) == 1 else None


@dataclass(frozen=True)
class Carried:
    """A name one loop iteration leaves for the next: read before it is bound in the body."""

    name: str
    first_read: int  # line of the first read in the body
    bound_at: int  # line of the first binding in the body
    binding: Event  # that binding


def loop_carried(src: Source, loop: cst.For | cst.While) -> list[Carried]:
    """Names whose value flows from one iteration of ``loop`` into the next."""
    first: dict[str, Event] = {}
    bound: dict[str, Event] = {}
    for event in events(_body(loop.body)):
        first.setdefault(event.name, event)
        if event.kind == "bind":
            bound.setdefault(event.name, event)
    return [
        Carried(name, src.line(event.statement), src.line(bound[name].statement), bound[name])
        for name, event in first.items()
        if event.kind == "read" and name in bound
    ]


def last_binding(src: Source, name: str, before: int) -> Event | None:
    """The last statement before line ``before`` (same function) that binds ``name``."""
    found = None
    for event in events(src.statements_of(before)):
        if event.kind == "bind" and event.name == name and src.line(event.statement) < before:
            found = event
    return found


# --------------------------------------------------------------------------------------------
# The enclosing node, the failing expression, the stale-source guard


def ancestors(parents: Mapping[cst.CSTNode, cst.CSTNode], node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes around ``node`` (LibCST's ``ParentNodeProvider`` map), innermost first."""
    current = parents.get(node)
    while current is not None:
        yield current
        current = parents.get(current)


def nearest(
    around: Iterable[cst.CSTNode], kinds: tuple[type[cst.CSTNode], ...], stop: tuple[type[cst.CSTNode], ...] = ()
) -> cst.CSTNode | None:
    """The first of ``around`` (enclosing nodes, innermost first) of one of ``kinds``; None when
    a node of ``stop`` comes first. Every "enclosing node" question goes through here, whether
    the nodes around come from LibCST's parents (``ancestors``) or a lint walk's stack."""
    for node in around:
        if is_kind(node, kinds):
            return node
        if stop and is_kind(node, stop):
            return None
    return None


def enclosing(
    parents: Mapping[cst.CSTNode, cst.CSTNode],
    node: cst.CSTNode,
    *kinds: type[cst.CSTNode],
    stop: tuple[type[cst.CSTNode], ...] = (),
) -> cst.CSTNode | None:
    """The nearest node around ``node`` of one of ``kinds``; None when a node of ``stop`` comes
    first (``stop=(cst.ClassDef,)``: the function of a class-level statement is not the one
    around the class)."""
    return nearest(ancestors(parents, node), kinds, stop)


def statement_of(parents: Mapping[cst.CSTNode, cst.CSTNode], node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement a node is part of (itself when it is one): a simple statement line or a
    compound statement."""
    for current in (node, *ancestors(parents, node)):
        if isinstance(current, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            return current
    return None


def traced_line_matches(code: str, frame: Frame) -> bool:
    """Whether line ``frame.line`` of ``code`` (a file's current text) is still the line the run
    executed: a fix or an edit since the run moves lines, and a site found on a moved line is
    not the traced one. True when the trace recorded no code for the frame (nothing to compare)."""
    if frame.code is None:
        return True
    lines = source_lines(code)
    current = lines[frame.line - 1].strip() if 0 < frame.line <= len(lines) else None
    return current == frame.code.strip()


def failing_expression(positions: Mapping[cst.CSTNode, Span], frame: Frame) -> cst.CSTNode | None:
    """The node a traceback frame was executing, from the columns Python 3.11+ records.

    With columns: the expression with exactly the traced span (of nodes sharing it, the
    outermost: an expression and its only child); a method call written over several lines
    (``Model(\\n...\\n).to(device)``), which Python places from its attribute to the call's
    end; else the smallest expression containing the span, whatever line it starts on. Without
    columns (older Pythons), or when no expression fits, the one simple statement line around
    the line, which the caller reads as a whole. ``None`` when the line holds no single simple
    statement line (a compound statement's header).
    """
    if frame.col is not None and frame.end_col is not None:
        end_line = frame.end_line or frame.line
        wanted = Span(frame.line, frame.col, end_line, frame.end_col)
        expressions = [(n, s) for n, s in positions.items() if isinstance(n, cst.BaseExpression)]
        exact = [n for n, s in expressions if s == wanted]
        if exact:
            return max(exact, key=lambda node: sum(1 for _ in walk(node)))
        split = [
            n for n, s in expressions
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and s.line < frame.line
            and (s.end_line, s.end_col) == (end_line, frame.end_col) and positions[n.func.attr].line == frame.line
        ]
        if len(split) == 1:
            return split[0]
        containing = [
            (s.end_line - s.line, s.end_col - s.col, n) for n, s in expressions
            if (s.line, s.col) <= (frame.line, frame.col) and (s.end_line, s.end_col) >= (end_line, frame.end_col)
        ]
        if containing:
            return min(containing, key=lambda item: (item[0], item[1]))[2]
    lines = [n for n, s in positions.items() if isinstance(n, cst.SimpleStatementLine) and s.line <= frame.line <= s.end_line]
    return lines[0] if len(lines) == 1 else None


# --------------------------------------------------------------------------------------------
# Autograd-off regions
#
# The innermost grad-mode switch decides: `with torch.enable_grad():` inside a no_grad block
# runs with autograd on. A function's body runs when it is called, so at a ``def`` its own
# decorators decide and the blocks around the ``def`` do not.

Qualify = Callable[[cst.BaseExpression], str | None]


def grad_mode_of(expression: cst.BaseExpression, qualify: Qualify) -> bool | None:
    """The autograd mode a ``with`` item or a decorator sets for the code under it.

    False (off): ``torch.no_grad()``, ``@torch.no_grad`` (no call), ``torch.inference_mode()``,
    ``inference_mode(True)``, ``set_grad_enabled(False)``. True (on, or may be on):
    ``torch.enable_grad()``, ``inference_mode(False)`` (it sets grad mode to ``not mode``),
    ``set_grad_enabled(True)``, and a setter whose argument is not a literal
    (``set_grad_enabled(training)``). None: it sets no grad mode.
    """
    call = expression if isinstance(expression, cst.Call) else None
    name = qualify(call.func if call is not None else expression)
    if is_torch_name(name, *GRAD_ON_CONTEXTS):
        return True
    if is_torch_name(name, *GRAD_OFF_CONTEXTS):
        if call is None or not call.args:
            return False
        return _literal_bool(call.args[0].value) is not True  # inference_mode(False) or (flag): on
    if call is not None and is_torch_name(name, *GRAD_MODE_SETTERS):
        mode = _literal_bool(call.args[0].value) if call.args else None
        return mode is not False
    return None


def _literal_bool(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def with_grad_mode(node: cst.With, qualify: Qualify) -> bool | None:
    """The mode a ``with`` block runs its body in (its last switching item is entered last)."""
    for item in reversed(node.items):
        mode = grad_mode_of(item.item, qualify)
        if mode is not None:
            return mode
    return None


def decorated_grad_mode(function: cst.FunctionDef, qualify: Qualify) -> bool | None:
    """The mode a function's decorators run its body in (the one nearest the ``def`` wraps it
    innermost)."""
    for decorator in reversed(function.decorators):
        mode = grad_mode_of(decorator.decorator, qualify)
        if mode is not None:
            return mode
    return None


def grad_off_in(around: Iterable[cst.CSTNode], qualify: Qualify) -> cst.CSTNode | None:
    """The ``with`` block or decorator that turns autograd off for a node whose enclosing nodes,
    innermost first, are ``around``; None when it runs with autograd on (or may)."""
    for node in around:
        if isinstance(node, cst.With):
            mode = with_grad_mode(node, qualify)
            if mode is not None:
                return node if mode is False else None
        elif isinstance(node, cst.FunctionDef):
            for decorator in reversed(node.decorators):
                mode = grad_mode_of(decorator.decorator, qualify)
                if mode is not None:
                    return decorator if mode is False else None
            return None
        elif isinstance(node, cst.ClassDef | cst.Lambda):
            return None
    return None


def grad_off_around(src: Source, line: int) -> cst.CSTNode | None:
    """The ``with`` block or decorator that turns autograd off at ``line`` of a parsed file."""
    return grad_off_in(src.around(line, cst.With, cst.FunctionDef, cst.ClassDef), src.imports.qualify)


def is_no_grad_context(context: FileContext, expression: cst.BaseExpression) -> bool:
    """Whether a ``with`` item or decorator turns autograd off (``grad_mode_of``), in a lint rule."""
    return grad_mode_of(expression, context.qualify) is False


def decorated_no_grad(context: FileContext, function: cst.FunctionDef) -> bool:
    return decorated_grad_mode(function, context.qualify) is False


def under_no_grad(context: FileContext, stack: Sequence[cst.CSTNode]) -> bool:
    """Whether the visited node (``stack[-1]``) runs with autograd off."""
    return grad_off_in(reversed(stack[:-1]), context.qualify) is not None


# --------------------------------------------------------------------------------------------
# The loss call


def loss_name(call: cst.Call, imports: ImportTable, scope: Scope) -> str | None:
    """``cross_entropy``, ``BCEWithLogitsLoss``, ``FocalLoss``...: the loss a call invokes, when
    it says so: ``F.mse_loss(...)``, ``nn.MSELoss()(...)`` by the torch name it calls (aliases
    resolved), ``criterion(...)`` by the traced type of the module the name holds (``scope``: a
    frame's recorded ``locals`` / ``globals``)."""
    func = call.func.func if isinstance(call.func, cst.Call) else call.func  # nn.CrossEntropyLoss()(...)
    qualified = imports.qualify(func)
    if qualified is not None and qualified.startswith("torch."):
        name = qualified.rsplit(".", 1)[-1]
        return name if is_loss_name(name) else None
    if isinstance(func, cst.Name):
        for names in (scope.locals, scope.globals):
            described = names.get(func.value)
            if described is not None and described.is_module:
                kind_name = described.type or ""
                if is_loss_name(kind_name):
                    return kind_name
    return None


def loss_call_at(
    wrapper: MetadataWrapper,
    imports: ImportTable,
    scope: Scope,
    frame: Frame,
    accepts: Callable[[cst.Call], bool] = lambda call: True,
) -> Located | None:
    """The call a frame that runs a loss was executing.

    With traced columns, the call at that exact position (whatever it calls: a file edited since
    the run has no call there). From a log there is only a line: among its calls that ``accepts``
    (a pattern's filter, say two arguments), the one loss call (``loss_name``), else the only
    call; None when it cannot be told.
    """
    if frame.col is not None:
        located = call_at(wrapper, frame.line, frame.col, frame.end_line, frame.end_col)
        return located if located is not None and isinstance(located.node, cst.Call) else None
    calls = [c for c in calls_on_line(wrapper, frame.line) if isinstance(c.node, cst.Call) and accepts(c.node)]
    losses = [c for c in calls if isinstance(c.node, cst.Call) and loss_name(c.node, imports, scope) is not None]
    for chosen in (losses, calls):
        if len(chosen) == 1:
            return chosen[0]
    return None


# --------------------------------------------------------------------------------------------
# Dtypes

# The words PyTorch's messages use for a dtype (C++ scalar names, legacy tensor types).
DTYPE_WORDS = {
    "double": "float64", "float64": "float64", "float": "float32", "float32": "float32",
    "half": "float16", "float16": "float16", "bfloat16": "bfloat16",
    "long": "int64", "long int": "int64", "int64": "int64", "int": "int32", "int32": "int32",
    "short": "int16", "int16": "int16", "char": "int8", "signed char": "int8", "int8": "int8",
    "byte": "uint8", "unsigned char": "uint8", "uint8": "uint8", "bool": "bool",
    "complexfloat": "complex64", "complex64": "complex64", "complexdouble": "complex128",
    "complex128": "complex128",
}


def dtype_name(text: str | None) -> str | None:
    """``float64`` for ``Double``, ``double``, ``torch.float64``, ``torch.cuda.DoubleTensor``,
    ``CUDADoubleType``...; ``None`` for a word that names no dtype."""
    if not text:
        return None
    word = text.strip()
    word = re.sub(r"^(?:torch\.)?(?:cuda\.)?", "", word)
    word = re.sub(r"^c10::", "", word)
    word = re.sub(r"^(?:CPU|CUDA)(?=[A-Z])", "", word)
    word = re.sub(r"(?<=[a-z0-9])(?:Tensor|Type)$", "", word).lower()
    if word.startswith("float8"):
        return word
    return DTYPE_WORDS.get(word)


# --------------------------------------------------------------------------------------------
# Lint helpers (the walk stack stands in for parents)

# Nodes that open a new scope: what a loop or a function "contains" stops at them.
SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
LOOPS = (cst.For, cst.While)


# The names a training script gives the device it trains on, the likeliest first.
DEVICE_NAMES = ("device", "dev", "DEVICE", "torch_device")
_MODEL_NAME = re.compile(r"(?:model|net|network|encoder|decoder|backbone|classifier)$", re.IGNORECASE)


def model_like(name: str) -> bool:
    """Whether a name reads like a model: ``model``, ``net``, ``self.encoder``, ``student_model``."""
    last = name.rsplit(".", 1)[-1]
    return last != "self" and _MODEL_NAME.search(last) is not None


def method_name(call: cst.Call) -> str | None:
    """``step`` for ``opt.step()``; None for a call of a plain name."""
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def receiver(call: cst.Call) -> cst.BaseExpression | None:
    """``opt`` for ``opt.step()``."""
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def is_method_call(node: cst.CSTNode, *names: str) -> bool:
    # `type(...) is` rather than isinstance: LibCST's node classes are ABCs, slow to isinstance
    return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in names


def reference_head(node: cst.CSTNode) -> str | None:
    """The name a Name/Attribute chain starts from (``torch`` for ``torch.nn.Linear``), cheaply."""
    while type(node) is cst.Attribute:
        node = node.value
    return node.value if type(node) is cst.Name else None


def number(node: cst.BaseExpression) -> float | None:
    """The value of an int or float literal (``1``, ``1.0``, ``1.``), else None."""
    try:
        if isinstance(node, cst.Integer):
            return float(int(node.value.replace("_", ""), 0))
        if isinstance(node, cst.Float):
            return float(node.value.replace("_", ""))
    except ValueError:
        return None
    return None


def string_value(node: cst.CSTNode) -> str | None:
    """The text of a plain string literal (no f-string, no bytes), else None."""
    if isinstance(node, cst.SimpleString) and "f" not in node.prefix.lower() and "b" not in node.prefix.lower():
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def last_name(node: cst.BaseExpression) -> str | None:
    """``model`` for ``model``, ``encoder`` for ``self.encoder``."""
    dotted = dotted_name(node)
    return dotted.rsplit(".", 1)[-1] if dotted else None


def innermost(stack: Sequence[cst.CSTNode], kinds: tuple[type[cst.CSTNode], ...]) -> cst.CSTNode | None:
    """The nearest ancestor of the visited node (``stack[-1]``) of one of ``kinds``, not looking
    past the function, class or lambda that holds it."""
    return nearest(reversed(stack[:-1]), kinds, stop=SCOPES)


def enclosing_scope(stack: Sequence[cst.CSTNode]) -> cst.CSTNode:
    """The function, class or lambda around the visited node, else the module."""
    return nearest(reversed(stack[:-1]), SCOPES) or stack[0]


def enclosing_function(stack: Sequence[cst.CSTNode]) -> cst.FunctionDef | None:
    found = nearest(reversed(stack[:-1]), (cst.FunctionDef,))
    return found if isinstance(found, cst.FunctionDef) else None


def within(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A node and what it holds, without entering nested functions, classes and lambdas."""
    return descendants(node, prune=SCOPES)


def calls_within(node: cst.CSTNode) -> Iterator[cst.Call]:
    for item in within(node):
        if isinstance(item, cst.Call):
            yield item


def _bindings(statement: cst.CSTNode) -> Iterator[tuple[str, str]]:
    """``import_bindings`` of each import in a statement, nested blocks included (``try:`` /
    ``if``), nested functions and classes not: what running the statement binds in its scope."""
    if isinstance(statement, SCOPES):
        return
    for node in descendants(statement, prune=SCOPES):
        if type(node) is cst.Import or type(node) is cst.ImportFrom:
            yield from import_bindings(node)


def visible_imports(stack: Sequence[cst.CSTNode]) -> dict[str, str]:
    """The import aliases bound where the visited node (``stack[-1]``) runs: imports of the
    enclosing bodies that come before it in source order (a function's body sees the imports of
    the module before the ``def``, not those of a class around it, nor imports of other
    functions, nor later ones). Innermost bindings win."""
    found: dict[str, str] = {}
    in_function = False
    layers: list[list[tuple[str, str]]] = []
    for index in range(len(stack) - 2, -1, -1):
        holder = stack[index]
        if isinstance(holder, cst.FunctionDef | cst.Lambda):
            in_function = True
            continue
        body = getattr(holder, "body", None)
        if not isinstance(body, tuple | list):
            continue
        owner = stack[index - 1] if index > 0 else None
        if in_function and isinstance(owner, cst.ClassDef):
            continue  # a class body's names are not visible inside its methods
        child = stack[index + 1]
        if child in body:
            layer = [binding for statement in body[:body.index(child)] for binding in _bindings(statement)]
            layers.append(layer)
    for layer in reversed(layers):  # outermost first, so that inner bindings override
        found.update(layer)
    return found


def torch_reference(context: FileContext, qualified: str, written: cst.BaseExpression | None = None) -> cst.BaseExpression | None:
    """``qualified`` (``torch.linalg.cholesky``) written with the aliases bound where the
    visited node runs (``torch.linalg.cholesky``, ``th.linalg.cholesky``, ``F.interpolate``...):
    through the alias that ``written`` (the expression being replaced) starts with when it
    reaches ``qualified``, else the longest imported module that holds it; None when no import
    visible there does (a fix must never write a name that is not bound where it runs)."""
    aliases = visible_imports(context.stack)
    head = reference_head(written) if written is not None else None
    if head is not None and head in aliases and qualified.startswith(aliases[head] + "."):
        return cst.parse_expression(head + qualified[len(aliases[head]):])
    best: tuple[int, str] | None = None
    for local, full in aliases.items():
        if (qualified == full or qualified.startswith(full + ".")) and (best is None or len(full) > best[0]):
            best = (len(full), local + qualified[len(full):])
    return cst.parse_expression(best[1]) if best else None


def whole_reference(context: FileContext) -> bool:
    """Whether the visited Name/Attribute is a whole reference to something: not the head or the
    ``.attr`` of a longer attribute chain (the chain's outermost Attribute speaks for it), and not
    a name being imported, defined or used as a keyword."""
    node = context.stack[-1]
    parent = context.parent()
    if isinstance(parent, cst.Attribute | cst.ImportAlias | cst.AsName | cst.ImportFrom | cst.Import | cst.Param):
        return False
    if isinstance(parent, cst.Arg) and parent.keyword is node:
        return False
    return not (isinstance(parent, cst.FunctionDef | cst.ClassDef) and parent.name is node)


def statements_before(stack: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """For each body on the way from the module down to the visited node, the statements that
    come before the one holding it (innermost body first)."""
    for index in range(len(stack) - 2, -1, -1):
        holder = stack[index]
        body = getattr(holder, "body", None)
        if not isinstance(body, tuple | list) or index + 1 >= len(stack):
            continue
        child = stack[index + 1]
        if child in body:
            yield from reversed(body[:body.index(child)])


def code_mentions(context: FileContext, node: cst.CSTNode, words: tuple[str, ...]) -> bool:
    text = context.module.code_for_node(node).lower()
    return any(word in text for word in words)


def assigned_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets an assignment statement binds (``a = b = f()`` gives a and b)."""
    if isinstance(node, cst.Assign):
        return [target.target for target in node.targets]
    if isinstance(node, cst.AnnAssign | cst.AugAssign):
        return [node.target]
    return []
