"""Facts patterns read: the traced evidence, and the failing source around a line.

Written for the diagnose-only patterns (``backward-twice``, ``no-grad-graph``,
``collate-size``, ``embedding-index``, ``cuda-oom``, ``batch-size-mismatch``,
``cudnn-error``), usable by any pattern. Nothing here is specific to one
failure class: the evidence helpers (tensors among a frame's recorded locals, a recorded
``file:line`` site as a frame) and the source helpers (the blocks around a line, names carried
from one loop iteration to the next, the last assignment of a name, a ``torch.no_grad()`` block)
serve any pattern that explains rather than edits. Every source helper answers ``None`` (or
nothing) when a file cannot be read or parsed: a diagnosis then falls back to the traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.codemod import ImportTable, is_torch_name, spans
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.sources import SourceError, Sources, report_path
from repairbot.types import Frame, Span

Description = DescribedValue

# Context managers and decorators that switch autograd off for the code under them.
GRAD_OFF = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode")
_SET_GRAD_ENABLED = ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled")
_SITE = re.compile(r"(?P<file>.+):(?P<line>\d+)")


# --------------------------------------------------------------------------------------------
# Evidence


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


def _small_events(statement: cst.BaseSmallStatement) -> Iterator[Event]:
    if isinstance(statement, cst.Assign):
        for name in reads(statement.value):
            yield Event("read", name, statement)
        for target in statement.targets:
            bound, read = _targets(target.target)
            for name in read:
                yield Event("read", name, statement)
            for name in bound:
                yield Event("bind", name, statement, statement.value)
    elif isinstance(statement, cst.AugAssign):
        for name in [*reads(statement.target), *reads(statement.value)]:
            yield Event("read", name, statement)
        bound, _ = _targets(statement.target)
        for name in bound:
            yield Event("bind", name, statement, statement.value)
    elif isinstance(statement, cst.AnnAssign):
        for name in reads(statement.value):
            yield Event("read", name, statement)
        bound, read = _targets(statement.target)
        for name in read:
            yield Event("read", name, statement)
        for name in bound:
            yield Event("bind", name, statement, statement.value)
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
            bound, read = _targets(statement.target)
            for name in read:
                yield Event("read", name, statement)
            for name in bound:
                yield Event("bind", name, statement)
            yield from events(_body(statement.body))
            if statement.orelse is not None:
                yield from events(_body(statement.orelse.body))
        elif isinstance(statement, cst.While):
            for name in reads(statement.test):
                yield Event("read", name, statement)
            yield from events(_body(statement.body))
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


def grad_off_around(src: Source, line: int) -> cst.CSTNode | None:
    """The innermost ``with torch.no_grad()`` (``inference_mode``, ``set_grad_enabled(False)``)
    block, or decorated function, that turns autograd off at ``line``."""
    for node in src.around(line, cst.With, cst.FunctionDef):
        if isinstance(node, cst.With) and any(_turns_grad_off(src, item.item) for item in node.items):
            return node
        if isinstance(node, cst.FunctionDef):
            for decorator in node.decorators:
                if _turns_grad_off(src, decorator.decorator):
                    return decorator
    return None


def _turns_grad_off(src: Source, node: cst.BaseExpression) -> bool:
    if src.is_call_of(node, *GRAD_OFF):
        return True
    if isinstance(node, cst.Attribute | cst.Name) and is_torch_name(src.imports.qualify(node), *GRAD_OFF):
        return True  # @torch.no_grad without parentheses
    if isinstance(node, cst.Call) and src.is_call_of(node, *_SET_GRAD_ENABLED) and node.args:
        value = node.args[0].value
        return isinstance(value, cst.Name) and value.value == "False"
    return False


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
