"""Source helpers: CUDA device literals, what an expression reads, the comparisons and choices
that gate a device on CUDA, and the names a scope binds.
"""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.metadata import Scope

from repairbot.analysis import (
    one_line,
    walk,
)
from repairbot.types import Span

# A CUDA device written as a string: "cuda", "cuda:0", f"cuda:{rank}".
_CUDA_TEXT = re.compile(r"cuda(?::\d+)?")


def literal_text(node: cst.CSTNode) -> str | None:
    """The text of a plain string literal, or the leading text of an f-string."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
        return node.parts[0].value + "{}"
    return None


def cuda_literal(node: cst.CSTNode, allow_index: bool = False) -> tuple[bool, bool]:
    """(is a CUDA device literal, carries an index): ``"cuda"``, ``"cuda:1"``, ``f"cuda:{i}"``,
    and with ``allow_index`` a bare integer (a device index, which means CUDA)."""
    text = literal_text(node)
    if text is not None:
        if _CUDA_TEXT.fullmatch(text):
            return True, text != "cuda"
        if isinstance(node, cst.FormattedString) and re.fullmatch(r"cuda:\{\}", text):
            return True, True
        return False, False
    if allow_index and isinstance(node, cst.Integer):
        return True, True
    return False, False


def contains(outer: Span, inner: Span) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def names_read(expression: cst.CSTNode) -> set[str]:
    """What an expression reads: names, attribute names, subscript and ``.get()`` keys."""
    found: set[str] = set()
    for node in walk(expression):
        if isinstance(node, cst.Name):
            found.add(f"name:{node.value}")
        elif isinstance(node, cst.Attribute):
            found.add(f"attr:{node.attr.value}")
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                key = index.value.evaluated_value
                if isinstance(key, str):
                    found.add(f"key:{key}")
        elif m.matches(node, m.Call(func=m.Attribute(attr=m.Name("get")), args=[m.Arg(value=m.SimpleString()), m.ZeroOrMore()])):
            key = cst.ensure_type(cst.ensure_type(node, cst.Call).args[0].value, cst.SimpleString).evaluated_value
            if isinstance(key, str):
                found.add(f"key:{key}")
    return found


def target_name(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return None


def cuda_comparison(test: cst.BaseExpression) -> bool:
    """``device == "cuda"``, ``args.device == "cuda"``, ``"cuda" in device``: a device compared
    with a CUDA literal."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    left, right = test.left, target.comparator
    if isinstance(target.operator, cst.Equal):
        literal, other = (right, left) if isinstance(right, cst.SimpleString) else (left, right)
    elif isinstance(target.operator, cst.In):
        literal, other = left, right
    else:
        return False
    return (isinstance(literal, cst.SimpleString) and cuda_literal(literal)[0]
            and isinstance(other, cst.Name | cst.Attribute))


def cuda_choice(value: cst.BaseExpression) -> cst.IfExp | None:
    """``"cuda" if switch else "cpu"``, bare or inside ``torch.device(...)``."""
    if isinstance(value, cst.Call) and len(value.args) == 1 and value.args[0].keyword is None:
        value = value.args[0].value
    if not isinstance(value, cst.IfExp):
        return None
    body, orelse = value.body, value.orelse
    if (isinstance(body, cst.SimpleString) and str(body.evaluated_value).startswith("cuda")
            and isinstance(orelse, cst.SimpleString) and orelse.evaluated_value == "cpu"):
        return value
    return None


def module_level_alias(module: cst.Module, full: str) -> str | None:
    """The name a module-level ``import torch`` (``import torch as th``) binds."""
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if one_line(module, alias.name) == full:
                        return cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname else full
    return None


def bound_in(scope: Scope, name: str) -> bool:
    """Whether ``name`` is bound in the site's own scope: a new module-level variable of that
    name would be shadowed there (or, at module level, rebound)."""
    return any(getattr(assignment, "scope", None) is scope for assignment in scope[name])


def is_docstring(statement: cst.CSTNode) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())]))


def is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )
