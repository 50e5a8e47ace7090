"""The flattens and views before the failing Linear in its function: a flatten whose result is
thrown away, a ``view(-1, N)`` that folds the batch, one that keeps dimension 0, and the batch
sizes the run showed.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Source,
    argument,
    call_at,
    local_tensors,
    reads,
    shape_of,
    walk,
)
from repairbot.evidence import Evidence, LinearTrace
from repairbot.provenance import (
    integer_value,
    is_literal,
)
from repairbot.sources import Sources
from repairbot.types import Failure

_FLATTENS = ("flatten", "view", "reshape")


def _flatten_of(src: Source, node: cst.BaseExpression) -> str | None:
    """``x`` of ``x.flatten(1)``, ``x.view(x.size(0), -1)``, ``x.reshape(...)``, ``torch.flatten(x, 1)``."""
    if not isinstance(node, cst.Call):
        return None
    if src.is_call_of(node, "torch.flatten"):
        first = node.args[0].value if node.args else None
        return first.value if isinstance(first, cst.Name) else None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _FLATTENS and isinstance(func.value, cst.Name):
        return func.value.value
    return None


def discarded_flatten(src: Source, line: int) -> tuple[cst.Expr, str] | None:
    """A statement before ``line`` in its function that flattens a name and throws the result
    away (``x.flatten(1)`` alone on its line), the name unbound again before ``line``, which reads it."""
    statements = src.statements_of(line)
    found: tuple[cst.Expr, str] | None = None
    for statement in statements:
        span = src.positions.get(statement)
        if span is None or span.line >= line:
            if span is not None and span.line <= line <= span.end_line and found is not None:
                return found if found[1] in reads(statement) else None
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            if found is not None and found[1] in _bound_names(statement):
                found = None
            continue
        for small in statement.body:
            if isinstance(small, cst.Expr) and (name := _flatten_of(src, small.value)) is not None:
                found = (small, name)
            elif found is not None and found[1] in _bound_names(small):
                found = None
    return None


def _bound_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    for child in walk(node):
        if isinstance(child, cst.AssignTarget | cst.AugAssign | cst.AnnAssign):
            target = child.target
            if isinstance(target, cst.Name):
                names.add(target.value)
        elif isinstance(child, cst.For) and isinstance(child.target, cst.Name):
            names.add(child.target.value)
    return names


def folding_view(src: Source, line: int, columns: int) -> cst.Call | None:
    """A ``t.view(-1, N)`` / ``t.reshape(-1, N)`` before ``line`` in its function, with N a
    number (or product of numbers) equal to ``columns``: the flatten that decided the rows."""
    for node, span in src.positions.items():
        if not isinstance(node, cst.Call) or span.line > line or not isinstance(node.func, cst.Attribute):
            continue
        if node.func.attr.value not in ("view", "reshape") or src.statements_of(span.line) != src.statements_of(line):
            continue
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if len(args) != 2 or integer_value(args[0]) != -1:
            continue
        if integer_value(args[1]) == columns:
            return node
    return None


def folding_size(view: cst.Call) -> cst.BaseExpression | None:
    """The size written in a ``t.view(-1, N)``: N, when it is a number or product of numbers."""
    args = [a.value for a in view.args if a.keyword is None and not a.star]
    return args[1] if len(args) == 2 and is_literal(args[1]) else None


def in_features_code(sources: Sources, linear: LinearTrace) -> str | None:
    """The Linear's in_features as its call writes it, when that is a number or product of numbers."""
    site = linear.site
    if site is None:
        return None
    wrapper = sources.metadata(Path(site.file))
    located = call_at(wrapper, site.line, site.col, site.end_line, site.end_col)
    if located is None or not isinstance(located.node, cst.Call):
        return None
    target = argument(located.node, 0, "in_features")
    if target is None or not is_literal(target.value) or integer_value(target.value) != linear.in_features:
        return None
    return wrapper.module.code_for_node(target.value)


def batch_keeping_flatten(src: Source, line: int) -> cst.Call | None:
    """A flatten before ``line`` in its function that keeps dimension 0 as the batch:
    ``t.flatten(1)``, ``torch.flatten(t, 1)``, ``t.view(t.size(0), -1)``, ``t.reshape(t.shape[0], -1)``
    (or ``len(t)``)."""
    for node, span in src.positions.items():
        if not isinstance(node, cst.Call) or span.line > line or src.statements_of(span.line) != src.statements_of(line):
            continue
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if src.is_call_of(node, "torch.flatten"):
            if len(args) == 2 and integer_value(args[1]) == 1:
                return node
            continue
        if not isinstance(node.func, cst.Attribute):
            continue
        method = node.func.attr.value
        if method == "flatten" and len(args) == 1 and integer_value(args[0]) == 1:
            return node
        if method in ("view", "reshape") and len(args) == 2 and integer_value(args[1]) == -1 and _first_dim_of(args[0]):
            return node
    return None


def _first_dim_of(node: cst.BaseExpression) -> bool:
    """``t.size(0)``, ``t.shape[0]`` or ``len(t)``: a tensor's dimension 0."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        return len(node.args) == 1 and integer_value(node.args[0].value) == 0
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len":
        return len(node.args) == 1
    if (
        isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape"
        and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
    ):
        return integer_value(node.slice[0].slice.value) == 0
    return False


def batch_sizes(failure: Failure, evidence: Evidence | None) -> set[int]:
    """The batch sizes the run showed: the forced one, and the first dimension of the batched
    tensors (2-D or more) in the user frames that called the model (not the innermost one)."""
    sizes: set[int] = set()
    if evidence is None:
        return sizes
    if evidence.limits.forced:
        size = evidence.limits.batch_size
        if size is not None and size > 0:
            sizes.add(size)
    user = [frame for frame in failure.frames if frame.user]
    for frame in user[:-1]:
        for tensor in local_tensors(evidence, frame).values():
            shape = shape_of(tensor)
            if shape and len(shape) >= 2 and shape[0] > 0:
                sizes.add(shape[0])
    return sizes
