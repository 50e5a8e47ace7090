"""The failing code, resolved against the traced locals: the operands of the failing expression
that the run described as tensors or modules, and where the ones that stayed behind are used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.analysis import (
    place_in,
    walk,
)
from repairbot.evidence import DescribedValue, Scope
from repairbot.provenance import parameter_names
from repairbot.types import Frame, Span

from .message import same_device

# Creation functions that take a device= keyword; the tensor they return is made on the CPU
# unless told otherwise.
FACTORIES = (
    "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand", "torch.randn",
    "torch.randint", "torch.randperm", "torch.arange", "torch.linspace", "torch.logspace",
    "torch.eye", "torch.tensor", "torch.as_tensor",
)


@dataclass(frozen=True)
class Operand:
    """A name of the failing expression that the run described as a tensor or a module."""

    name: str
    kind: str  # "tensor" or "module"
    devices: tuple[str, ...]
    info: DescribedValue
    parameter: bool  # a parameter of the frame's function: its value came from the caller

    @property
    def device(self) -> str:
        return self.devices[0] if len(self.devices) == 1 else "+".join(self.devices)

    def on(self, device: str) -> bool:
        return bool(self.devices) and all(same_device(d, device) for d in self.devices)

    def describe(self) -> str:
        if self.kind == "module":
            return f"{self.name} ({self.info.type or 'module'})"
        shape = "x".join(str(s) for s in self.info.shape or ())
        return f"{self.name} ({shape} {self.info.dtype or ''})".replace(" )", ")")


@dataclass
class View:
    """One user frame of the failure: its file parsed, the failing expression and its scope."""

    frame: Frame
    path: Path
    wrapper: MetadataWrapper
    positions: Mapping[cst.CSTNode, Span]
    parents: Mapping[cst.CSTNode, cst.CSTNode]
    expression: cst.CSTNode
    statement: cst.CSTNode
    function: cst.FunctionDef | None
    scope: Scope
    operands: list[Operand] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)  # operands the run could not describe

    @property
    def location(self) -> str:
        return f"{place_in(self.path, self.frame.line)}"

    def code(self, node: cst.CSTNode) -> str:
        return self.wrapper.module.code_for_node(node).strip()

    def described(self, name: str) -> DescribedValue | None:
        return self.scope.get(name)


def tensor_attributes(view: View, attributes: Sequence[str]) -> list[str]:
    """The ``self.x`` operands that can be a plain tensor, likeliest first: not ``self.training``,
    not registered as a buffer or made a Parameter or a module in the class (those move with
    the model), and an attribute assigned arithmetic of numbers (``key_dim ** -0.5``) last."""
    classes = [
        n for n, span in view.positions.items()
        if isinstance(n, cst.ClassDef) and span.line <= view.frame.line <= span.end_line
    ]
    cls = min(classes, key=lambda n: view.positions[n].end_line - view.positions[n].line) if classes else None
    if cls is None:
        return list(attributes)
    registered: set[str] = set()
    values: dict[str, list[cst.BaseExpression]] = {}
    for node in walk(cls):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "register_buffer" \
                and node.args and isinstance(node.args[0].value, cst.SimpleString):
            registered.add(node.args[0].value.evaluated_value if isinstance(node.args[0].value.evaluated_value, str) else "")
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                values.setdefault(target.attr.value, []).append(node.value)

    def moved_with_model(value: cst.BaseExpression) -> bool:
        func = value.func if isinstance(value, cst.Call) else None
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return name == "Parameter" or (name[:1].isupper() and isinstance(func, cst.Attribute)
                                       and view.code(func.value) in ("nn", "torch.nn"))

    def numeric(value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Integer | cst.Float | cst.UnaryOperation | cst.BinaryOperation) and not any(
            isinstance(n, cst.Call | cst.Subscript) for n in walk(value))

    kept = []
    for attribute in attributes:
        attr = attribute.split(".", 1)[1]
        assigned = values.get(attr, [])
        if attr == "training" or attr in registered or (assigned and all(moved_with_model(v) for v in assigned)):
            continue
        kept.append((bool(assigned) and all(numeric(v) for v in assigned), attribute))
    return [attribute for _, attribute in sorted(kept, key=lambda item: item[0])]


def parameter_names_of(function: cst.FunctionDef | None) -> set[str]:
    return set(parameter_names(function)) if function is not None else set()


class Operands(cst.CSTVisitor):
    """Names read by an expression, attributes read off them, and calls of unknown functions."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.attributes: list[cst.Attribute] = []
        self.calls: list[cst.Call] = []

    def visit_Name(self, node: cst.Name) -> bool:
        if node.value not in self.names:
            self.names.append(node.value)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        # `self.scale` is an operand; its `.scale` part is no name of its own, and the inner
        # links of `self.fc.weight` are no operands of their own either
        self.attributes.append(node)
        base: cst.BaseExpression = node.value
        while isinstance(base, cst.Attribute):
            base = base.value
        base.visit(self)
        return False

    def visit_Call(self, node: cst.Call) -> bool:
        self.calls.append(node)
        func = node.func
        # `self.fc1(x)` uses self; `h.size(0)` uses h: the callee's base is the operand
        (func.value if isinstance(func, cst.Attribute) else func).visit(self)
        for arg in node.args:
            arg.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


@dataclass(frozen=True)
class Attribution:
    """Where the operands that stayed behind are used, and what is already on the target."""

    view: View
    stayed: list[Operand]
    ahead: list[Operand]  # from the innermost frame that has any
