"""Source helpers: the statements of a block and a function body, and the move statements
(``x = x.to(d)``) a fix writes or finds already written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import libcst as cst
import libcst.matchers as m

from repairbot.analysis import (
    bound_names,
)
from repairbot.provenance import own_nodes, parameter_names


def child_in(parents: Mapping[cst.CSTNode, cst.CSTNode], node: cst.CSTNode, block: cst.IndentedBlock) -> cst.CSTNode | None:
    """The statement of ``block`` that contains ``node``."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = parents.get(current)
        if parent is block:
            return current
        current = parent
    return None


def tuple_elements(value: cst.BaseExpression) -> list[cst.BaseElement]:
    if isinstance(value, cst.Tuple):
        return list(value.elements)
    return [cst.Element(value)]


def parse_move(small: cst.BaseSmallStatement) -> tuple[cst.Assign, list[str], cst.Call] | None:
    """``x = x.to(d)`` / ``x, y = x.to(d), y.to(d)``: the statement, its names and one move call."""
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    targets = small.targets[0].target
    names = bound_names(targets)
    values = tuple_elements(small.value)
    if not names or len(names) != len(values) or (isinstance(targets, cst.Tuple) != isinstance(small.value, cst.Tuple)):
        return None
    call: cst.Call | None = None
    for name, element in zip(names, values, strict=True):
        value = element.value
        if not m.matches(value, m.Call(func=m.Attribute(value=m.Name(name), attr=m.Name("to") | m.Name("cuda")))):
            return None
        call = call or cst.ensure_type(value, cst.Call)
    return (small, names, call) if call is not None else None


def assignments(owner: cst.FunctionDef | cst.Module) -> Iterator[tuple[cst.SimpleStatementLine, cst.Assign]]:
    """Plain assignments of a function body (or module), in order, nested functions and classes left out."""
    for node in own_nodes(owner):
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Assign):
                    yield node, small


def move_statement(names: Sequence[str], device: str) -> str:
    targets = ", ".join(names)
    return f"{targets} = {', '.join(f'{n}.to({device})' for n in names)}"


def is_docstring(statement: cst.CSTNode) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())]))


def is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )


def param_order(function: cst.FunctionDef | None, name: str) -> int:
    params = parameter_names(function) if function is not None else []
    return params.index(name) if name in params else len(params)
