"""How the labels are bound and read in the source: the bindings before a read, the names a
loop or a return unpacks, the moves to a device, and whether every read of the labels is
blind to their dtype (so that the call which makes them may change it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ParentNodeProvider

from repairbot.analysis import (
    Event,
    Source,
    argument,
    assigned_value,
    bound_once,
    keyword_arg,
    name_reads,
    own_nodes,
    walk,
)
from repairbot.evidence import DescribedValue

# Answers whether labels passed on stay dtype-blind: an argument of a call (the call, the Arg), a
# value bound to a name (the statement, the name), or a returned value (the Return, its position
# in the returned tuple, -1 for the whole value).
Onward = Callable[[cst.CSTNode, cst.Arg | str | int], bool]


INTEGER = r"(?:Long|Int|Short|Byte|Char|Bool)"


FLOATING = r"(?:Float|Double|Half|BFloat16)"


# torch factories that write a dtype= (the float-target creation fix).
FACTORIES = (
    "torch.tensor", "torch.as_tensor", "torch.full", "torch.ones", "torch.zeros", "torch.empty",
    "torch.ones_like", "torch.zeros_like", "torch.full_like", "torch.randint", "torch.arange",
)


# Conversions to an integer dtype, renamed .float() for a float-target loss.
INTEGER_METHODS = frozenset({"long", "int", "short", "byte", "bool"})


# Reads of a labels tensor that work the same whatever its dtype (for the creation-site fix).
_COUNTS = frozenset({"size", "numel", "dim", "shape", "device", "ndim", "dtype"})  # no tensor comes out


MOVES = frozenset({"to", "cuda", "cpu"})  # the same labels on another device


# Methods that give the labels back in another shape with their dtype (followed to where they are made).
KEEPS_DTYPE = frozenset({"squeeze", "unsqueeze", "view", "reshape", "flatten", "clone", "detach", "contiguous"})


# torch functions whose result does not depend on the labels' dtype (an accuracy's comparison).
# torch factories of continuous random values: targets made by them are regression values, not classes.
CONTINUOUS = ("torch.randn", "torch.rand", "torch.normal", "torch.randn_like", "torch.rand_like")


# Probabilities (of a sigmoid or softmax): soft or BCE targets, which .long() would make class 0.
PROBABILITIES = ("torch.sigmoid", "torch.softmax", "torch.nn.functional.softmax", "torch.nn.functional.sigmoid")


COMPARES = ("torch.eq", "torch.ne", "torch.equal", "torch.lt", "torch.le", "torch.gt", "torch.ge")


def blind_or_target(
    read: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode], losses: set[int], onward: Onward | None = None,
    reached: set[int] | None = None, fills: bool = False,
) -> bool:
    """Whether a read of the labels ends as a loss's target argument, or in something whose
    result does not depend on their dtype (a comparison, ``len()``, ``.size()``, ``.shape``);
    ``onward`` answers for an argument of another call, a value bound to another name and a
    returned value. The loss calls whose target it is are added to ``reached``."""
    child: cst.CSTNode = read
    parent = parents.get(read)
    while parent is not None:
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            if id(call) in losses and argument(call, 1, "target") is parent:
                if reached is not None:
                    reached.add(id(call))
                return True
            if isinstance(call.func, cst.Name) and call.func.value == "len":
                return True
            return onward is not None and onward(call, parent)
        if isinstance(parent, cst.Assign) and parent.value is child:
            bound = parent.targets[0].target if len(parent.targets) == 1 else None
            return isinstance(bound, cst.Name) and onward is not None and onward(parent, bound.value)
        if isinstance(parent, cst.Return) and parent.value is child:
            return onward is not None and onward(parent, -1)
        if isinstance(parent, cst.Element):  # x_test, y_test = x[800:], y[800:]
            values = parents.get(parent)
            assign = parents.get(values) if values is not None else None
            if isinstance(assign, cst.Return) and isinstance(values, cst.Tuple) and assign.value is values:
                return onward is not None and onward(assign, list(values.elements).index(parent))
            if not isinstance(assign, cst.Assign):
                return False
            name = _unpacked_name(assign, values, parent)
            return name is not None and onward is not None and onward(assign, name)
        if isinstance(parent, cst.Comparison | cst.ComparisonTarget):
            return True
        if isinstance(parent, cst.Attribute):
            if fills and parent.value is child and parent.attr.value == "fill_":
                call = parents.get(parent)
                return isinstance(call, cst.Call) and call.func is parent and isinstance(parents.get(call), cst.Expr)
            if parent.value is not child or parent.attr.value not in _COUNTS | MOVES:
                return False
            if parent.attr.value in _COUNTS:
                return True
        elif isinstance(parent, cst.Subscript):
            if parent.value is not child:
                return False  # the labels index something: their dtype matters there
        elif not (isinstance(parent, cst.Call) and parent.func is child):
            return False
        child, parent = parent, parents.get(parent)
    return False


@dataclass(frozen=True)
class LabelsMade:
    """The call that gives the labels their dtype, and the edit that makes it int64 there."""

    src: Source
    call: cst.Call
    edit: str  # dtype-keyword, add-dtype, type-arg, method (the transformer's actions)
    dtype: str  # the dtype code written (torch.long), or the method (long)
    where: str  # repository-relative file:line
    how: str  # the edit, for the report
    attributes: tuple[str, ...] = ()  # self.<attribute>s followed, innermost first
    names: tuple[tuple[cst.CSTNode, str, int], ...] = ()  # (scope, name, line bound) of names followed
    followed: frozenset[int] = frozenset()  # ids of the expressions followed to the call
    through: tuple[str, ...] = ()  # the steps of a walk through calls and returns, for the report


def owner_of(src: Source, node: cst.CSTNode) -> cst.CSTNode:
    """The function around a node, or its module."""
    parents = src.wrapper.resolve(ParentNodeProvider)
    current: cst.CSTNode | None = node
    while current is not None:
        if isinstance(current, cst.FunctionDef):
            return current
        current = parents.get(current)
    return src.module


def binding_before(src: Source, scope: cst.CSTNode, node: cst.Name) -> cst.BaseExpression | None:
    """The value the last plain binding of a read name before its line (in its scope) gives it:
    ``name = value``, or its element of ``a, name = x, value``."""
    line = src.line(node)
    found: tuple[int, cst.BaseExpression] | None = None
    for each in own_nodes(scope):
        if not isinstance(each, cst.Assign) or each not in src.positions or src.line(each) >= line:
            continue
        value = assigned_value(each, node.value)
        if value is not None and (found is None or src.line(each) > found[0]):
            found = (src.line(each), value)
    if found is None or _rebound_otherwise(scope, node.value):
        return None
    return found[1]


def _unpacked_name(assign: cst.Assign, values: cst.CSTNode | None, element: cst.CSTNode) -> str | None:
    """The name ``a, name = x, value`` binds to the element ``value``."""
    if len(assign.targets) != 1 or assign.value is not values or not isinstance(values, cst.Tuple | cst.List):
        return None
    target = assign.targets[0].target
    if not isinstance(target, cst.Tuple | cst.List) or len(target.elements) != len(values.elements):
        return None
    bound = target.elements[list(values.elements).index(element)].value  # type: ignore[arg-type]
    return bound.value if isinstance(bound, cst.Name) else None


def _rebound_otherwise(scope: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` is also bound by something other than a plain assignment (a loop, ``+=``)."""
    visitor = _OtherBindings(name)
    scope.visit(visitor)
    return visitor.found


class _OtherBindings(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.found = False

    def visit_For(self, node: cst.For) -> None:
        if any(isinstance(n, cst.Name) and n.value == self.name for n in walk(node.target)):
            self.found = True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.found = True

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Tuple | cst.List) and any(
                isinstance(n, cst.Name) and n.value == self.name for n in walk(target.target)
            ) and assigned_value(node, self.name) is None:
                self.found = True  # unpacked from a call: no single expression writes it

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None and any(isinstance(n, cst.Name) and n.value == self.name for n in walk(node.asname)):
            self.found = True


def device_moves(binding: Event, name: str) -> bool:
    """``y = y.to(device)`` / ``x, y = x.cuda(), y.cuda()``: the same labels on another device."""
    statement = binding.statement
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return False
    target, value = statement.targets[0].target, statement.value
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements, strict=True)]
    else:
        pairs = [(target, value)]
    for bound, made in pairs:
        if isinstance(bound, cst.Name) and bound.value == name:
            return (
                isinstance(made, cst.Call) and isinstance(made.func, cst.Attribute) and made.func.attr.value in MOVES
                and isinstance(made.func.value, cst.Name) and made.func.value.value == name
            )
    return False


def is_device_like(value: cst.BaseExpression) -> bool:
    """A device argument of ``.to(...)`` (a name, ``"cuda"``, ``torch.device(...)``), not a dtype."""
    if isinstance(value, cst.Attribute):
        return value.attr.value not in ("float", "float32", "float64", "double", "half", "long", "int64", "int")
    return isinstance(value, cst.Name | cst.SimpleString | cst.Call | cst.Subscript)


def unpacked_names(target: cst.BaseExpression) -> list[str | None] | None:
    """The names a loop's tuple target unpacks, by position (None: not a plain name)."""
    if not isinstance(target, cst.Tuple | cst.List):
        return None
    if any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    return [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]


def methods_named(cls: cst.ClassDef, name: str) -> list[cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == name]


def returned_tuple(function: cst.FunctionDef, arity: int) -> cst.Tuple | None:
    """The one ``return a, b`` of a function, when every return returns that many values."""
    returns = [n for n in walk(function) if isinstance(n, cst.Return)]
    if len(returns) != 1:
        return None
    value = returns[0].value
    return value if isinstance(value, cst.Tuple) and len(value.elements) == arity else None


def self_assignment(src: Source, node: cst.Attribute) -> tuple[cst.BaseExpression, cst.FunctionDef] | None:
    """The one ``self.<attr> = value`` of the class around ``node``, and the method that writes it."""
    classes = src.around(src.line(node), cst.ClassDef)
    if not classes or not isinstance(classes[0], cst.ClassDef):
        return None
    found = [
        (statement.value, method)
        for method in walk(classes[0]) if isinstance(method, cst.FunctionDef)
        for statement in walk(method)
        if isinstance(statement, cst.Assign | cst.AugAssign | cst.AnnAssign)
        for target in (statement.targets if isinstance(statement, cst.Assign) else [statement])
        if isinstance(target.target, cst.Attribute) and target.target.attr.value == node.attr.value
        and isinstance(target.target.value, cst.Name) and target.target.value.value == "self"
    ]
    if len(found) != 1 or not isinstance(found[0][0], cst.BaseExpression) or isinstance(found[0][1], cst.Lambda):
        return None
    value, method = found[0]
    return (value, method) if isinstance(value, cst.BaseExpression) else None


def bound_names(node: cst.CSTNode) -> list[cst.Name]:
    """The names a statement binds (a loop's target, an assignment's targets, a parameter)."""
    if isinstance(node, cst.For):
        return [n for n in walk(node.target) if isinstance(n, cst.Name)]
    if isinstance(node, cst.Assign):
        return [n for t in node.targets for n in walk(t.target) if isinstance(n, cst.Name)]
    if isinstance(node, cst.Param):
        return [node.name]
    return []


def dataset_reads_blind(
    src: Source, cls: cst.ClassDef, getitem: cst.FunctionDef, element: cst.BaseExpression, made: LabelsMade
) -> bool:
    """Whether the Dataset reads the labels it returns only to return them (or dtype-blind)."""
    parents = src.wrapper.resolve(ParentNodeProvider)
    returned = {id(n) for n in walk(element)}
    if isinstance(element, cst.Name):
        value = bound_once(getitem, element.value)
        if value is not None:
            returned |= {id(n) for n in walk(value)}
        if len(name_reads(getitem, element.value)) > 2:  # bound and returned, nothing else
            return False
    for attribute in made.attributes:
        for node in walk(cls):
            if not (
                isinstance(node, cst.Attribute) and node.attr.value == attribute and isinstance(node.value, cst.Name)
                and node.value.value == "self"
            ):
                continue
            if id(node) in returned or isinstance(parents.get(node), cst.AssignTarget):
                continue
            if not blind_or_target(node, parents, set()):
                return False
    return True


def randint_high(call: cst.Call) -> int | None:
    """The ``high`` of ``torch.randint(high, size)`` / ``torch.randint(low, high, size)`` when it is
    written as a whole number."""
    high = keyword_arg(call, "high")
    positional = [a for a in call.args if a.keyword is None]
    value = high.value if high is not None else (
        positional[1].value if len(positional) >= 3 else positional[0].value if len(positional) == 2 else None
    )
    return int(value.evaluated_value) if isinstance(value, cst.Integer) else None


def a_or_an(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def shape_list(described: DescribedValue) -> list[int] | None:
    return list(described.shape) if described.shape is not None else None


def is_converted_by(value: cst.BaseExpression, method: str) -> bool:
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == method
        and not value.args
    )


def calls_in(owner: cst.CSTNode) -> list[cst.Call]:
    return [node for node in own_nodes(owner) if isinstance(node, cst.Call)]


def same_callee(src: Source, a: cst.Call, b: cst.Call) -> bool:
    return src.module.code_for_node(a.func) == src.module.code_for_node(b.func)
