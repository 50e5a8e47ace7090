"""The load site in the source: the statement the frame was executing, the imports visible there,
how each global is spelled in this file, and an existing ``safe_globals([...])`` around it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    is_torch_name,
    one_line,
    place,
    spans,
)
from repairbot.codemod import string_literal
from repairbot.types import Frame, Span

from .record import TORCH_MODULE_CLASS, PickledGlobal, public_torch_name

# The loaders whose weights_only default changed; a call of another function reaches one.
_LOADERS = ("torch.load", "torch.serialization.load")


_SAFE_GLOBALS = ("torch.serialization.safe_globals",)


_NUMPY_ALIAS = "np"


def statement_of(wrapper: MetadataWrapper, frame: Frame) -> cst.SimpleStatementLine | str:
    """The simple statement the frame was executing."""
    positions = spans(wrapper)
    parents = wrapper.resolve(ParentNodeProvider)
    where = place(frame)
    lines = [
        (node, span) for node, span in positions.items()
        if isinstance(node, cst.SimpleStatementLine) and span.line <= frame.line <= span.end_line
    ]
    if not lines:
        kind = next(
            (type(node).__name__ for node, span in sorted(positions.items(), key=lambda item: -item[1].line)
             if isinstance(node, cst.BaseCompoundStatement) and span.line == frame.line),
            "compound",
        )
        return (
            f"the load at {where} is in the header of a {kind.lower()} statement: wrapping it would put the "
            "whole block under the allowlist"
        )
    statement = min(lines, key=lambda item: item[1].end_line - item[1].line)[0]
    for node in m.findall(statement, m.Lambda()):
        if frame.col is not None and _inside(positions.get(node), frame):
            return f"the load at {where} is inside a lambda, which runs later than its statement"
    parent = parents.get(statement)
    if parent is not None and not isinstance(parent, cst.IndentedBlock | cst.Module):
        return f"the statement at {where} shares its line with a compound statement's header"
    return cst.ensure_type(statement, cst.SimpleStatementLine)


def _inside(span: Span | None, frame: Frame) -> bool:
    if span is None or frame.col is None:
        return False
    return (span.line, span.col) <= (frame.line, frame.col) and (frame.end_line or frame.line, frame.end_col or 0) <= (span.end_line, span.end_col)


def loader_text(wrapper: MetadataWrapper, frame: Frame) -> str:
    """``torch.load(args.resume)`` when the frame calls it, else the call that leads there."""
    imports = ImportTable(wrapper.module)
    for node, span in spans(wrapper).items():
        if not isinstance(node, cst.Call) or frame.col is None:
            continue
        if (span.line, span.col, span.end_line, span.end_col) == (frame.line, frame.col, frame.end_line, frame.end_col):
            text = one_line(wrapper.module, node)
            if is_torch_name(imports.qualify(node.func), *_LOADERS):
                return text
            return f"{text} (which calls torch.load)"
    return "torch.load"


def visible_imports(wrapper: MetadataWrapper, statement: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The import statements bound at module level, plus those of the functions around the
    statement."""
    parents = wrapper.resolve(ParentNodeProvider)
    body = [s for s in wrapper.module.body if _is_import_line(s)]
    node: cst.CSTNode | None = parents.get(statement)
    while node is not None:
        if isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock):
            body.extend(s for s in node.body.body if _is_import_line(s))
        node = parents.get(node)
    return body


def _is_import_line(statement: cst.CSTNode) -> TypeGuard[cst.SimpleStatementLine]:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )


def local_name_of(imports: ImportTable, full: str) -> str | None:
    """The local name bound to module or object ``full`` (``np`` for numpy), if any."""
    names = [local for local, target in imports.aliases.items() if target == full]
    return sorted(names, key=len)[0] if names else None


@dataclass(frozen=True)
class Spelling:
    elements: list[str]  # one code expression per global, in the file's names
    imports: list[str]  # import statements to add


def spell(
    module: cst.Module, imports: ImportTable, needed: Sequence[PickledGlobal], named: Mapping[str, str]
) -> Spelling:
    """Each global as code that names it in this file (``named``: the project's classes, already
    spelled), and the imports that makes work."""
    elements: list[str] = []
    added: list[str] = []
    added_aliases: dict[str, str] = {}
    for entry in needed:
        if entry.name in named:
            elements.append(named[entry.name])
            continue
        target = public_torch_name(entry.resolved or entry.name)
        code = expression_for(imports, target, added_aliases)
        if code is None:
            top = target.split(".")[0]
            alias = _NUMPY_ALIAS if top == "numpy" and _NUMPY_ALIAS not in imports.aliases else top
            added.append(f"import {top} as {alias}" if alias != top else f"import {top}")
            added_aliases[top] = alias
            code = alias + target[len(top):]
        if entry.resolved and entry.resolved != entry.name and not TORCH_MODULE_CLASS.match(entry.name):
            # saved under an older module path: safe_globals matches the checkpoint's name
            code = f"({code}, {string_literal(module, entry.name)})"
        elements.append(code)
    return Spelling(elements, added)


def expression_for(imports: ImportTable, target: str, added: Mapping[str, str]) -> str | None:
    """``np.dtypes.Float64DType`` for numpy.dtypes.Float64DType under ``import numpy as np``."""
    module, _, attr = target.rpartition(".")
    if module == "builtins":
        return attr
    exact = local_name_of(imports, target)
    if exact is not None:
        return exact
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        local = local_name_of(imports, prefix) or added.get(prefix)
        if local is not None:
            return ".".join([local, *parts[cut:]])
    return None


def enclosing_safe_globals(
    wrapper: MetadataWrapper, statement: cst.CSTNode, imports: ImportTable
) -> tuple[list[str], Span] | None:
    """The list literal of a ``with torch.serialization.safe_globals([...]):`` around the statement,
    with the code of its elements."""
    parents = wrapper.resolve(ParentNodeProvider)
    positions = spans(wrapper)
    node: cst.CSTNode | None = parents.get(statement)
    while node is not None and not isinstance(node, cst.FunctionDef):
        if isinstance(node, cst.With):
            for item in node.items:
                call = item.item
                if (
                    isinstance(call, cst.Call) and is_torch_name(imports.qualify(call.func), *_SAFE_GLOBALS)
                    and call.args and isinstance(call.args[0].value, cst.List)
                ):
                    listed = call.args[0].value
                    codes = [" ".join(wrapper.module.code_for_node(e.value).split()) for e in listed.elements]
                    return codes, positions[listed]
        node = parents.get(node)
    return None


def extended_list(listed: cst.List, new: Sequence[cst.BaseExpression]) -> cst.List:
    """The list with ``new`` appended in its own layout (a trailing comma stays trailing)."""
    elements = list(listed.elements)
    if not elements:
        return listed.with_changes(elements=[cst.Element(value) for value in new])
    last = elements[-1]
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing = last.comma if isinstance(last.comma, cst.Comma) else None
    if trailing is not None and len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma):
        separator = elements[-2].comma
    elements[-1] = last.with_changes(comma=separator)
    added = [cst.Element(value, comma=separator) for value in new]
    added[-1] = added[-1].with_changes(comma=trailing if trailing is not None else cst.MaybeSentinel.DEFAULT)
    return listed.with_changes(elements=[*elements, *added])
