"""One fast pre-order walk of a LibCST tree: the lint engine's walk for every rule at once,
and the descent that ``repairbot.analysis`` and the rules use to read a subtree.

LibCST's own visitor rebuilds every node it passes (``_visit_and_replace_children``), which
costs more than parsing the file did. Rules only read the tree, so this walk follows each node
class's child fields directly, in source order, and leaves out whitespace, parentheses,
commas and operator tokens, which no rule reads through the walk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence

import libcst as cst

Handler = Callable[[cst.CSTNode], object]

# Fields that hold only tokens and whitespace (a rule reads ``node.operator`` itself).
_TOKEN_FIELDS = frozenset({
    "lpar", "rpar", "comma", "semicolon", "leading_lines", "lines_after_decorators",
    "trailing_whitespace", "header", "footer", "equal", "colon", "dot", "star", "asynchronous",
    "operator", "arrow", "first_line", "empty_lines", "indent", "newline", "lbrace", "rbrace",
    "lbracket", "rbracket", "first_colon", "second_colon", "leading_whitespace", "posonly_ind",
    "default_indent", "default_newline", "encoding", "has_trailing_newline", "relative",
})

# Where dataclass field order is not source order.
_SOURCE_ORDER: dict[type[cst.CSTNode], tuple[str, ...]] = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
    cst.Parameters: ("posonly_params", "params", "star_arg", "kwonly_params", "star_kwarg"),
}

_FIELDS: dict[type[cst.CSTNode], tuple[str, ...]] = {}


def _child_fields(node_type: type[cst.CSTNode]) -> tuple[str, ...]:
    fields = _SOURCE_ORDER.get(node_type) or tuple(
        f.name for f in dataclasses.fields(node_type)
        if f.name not in _TOKEN_FIELDS and not f.name.startswith("whitespace")
    )
    _FIELDS[node_type] = fields
    return fields


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """A node's children that rules read, in source order."""
    found: list[cst.CSTNode] = []
    node_types = _NODE_TYPES
    for name in _FIELDS.get(type(node)) or _child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            found.extend(item for item in value if node_types.get(type(item)) or _is_node(type(item)))
        elif node_types.get(value_type) or _is_node(value_type):
            found.append(value)
    return found


def descendants(node: cst.CSTNode, prune: tuple[type[cst.CSTNode], ...] = ()) -> Iterator[cst.CSTNode]:
    """``node`` and everything under it in source order, not entering nodes of the ``prune``
    types (they are yielded themselves): e.g. a loop's body without its nested functions."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        if prune and current is not node and is_kind(current, prune):
            continue
        todo.extend(reversed(children(current)))


_KINDS: dict[tuple[type, tuple[type, ...]], bool] = {}


def is_kind(node: object, kinds: tuple[type, ...]) -> bool:
    """``isinstance(node, kinds)``, remembered per node class: LibCST's node classes are ABCs,
    whose isinstance check runs Python code each time, and rules ask it of every node."""
    key = (type(node), kinds)
    known = _KINDS.get(key)
    if known is None:
        known = _KINDS[key] = issubclass(key[0], kinds)
    return known


def _is_node(value_type: type) -> bool:
    # a type-keyed cache: isinstance against the CSTNode ABC is the walk's most frequent cost
    known = _NODE_TYPES.get(value_type)
    if known is None:
        known = _NODE_TYPES[value_type] = issubclass(value_type, cst.CSTNode)
    return known


_NODE_TYPES: dict[type, bool] = {}


_STATEMENT_TYPES: dict[type, bool] = {}

Path = tuple[cst.CSTNode, ...]


def walk(
    root: cst.CSTNode,
    visits: Mapping[type[cst.CSTNode], Sequence[Handler]],
    leaves: Mapping[type[cst.CSTNode], Sequence[Handler]],
    stack: list[cst.CSTNode],
    statements: Callable[[Sequence[cst.CSTNode]], Path] | None = None,
    paths: dict[cst.CSTNode, Path] | None = None,
) -> None:
    """Calls ``visits[type(node)]`` on entering each node and ``leaves[...]`` after its
    children, with ``stack`` holding the path from the module down to the node. With
    ``paths``, also records each node's statement path (``statements(stack)`` at the
    innermost statement that holds it): where a finding's code is, found in the one walk.
    ``root`` is the module, or one of its top-level statements with ``stack`` holding the module."""
    todo: list[cst.CSTNode | tuple[cst.CSTNode, Path]] = [root]
    fields_of = _FIELDS
    node_types = _NODE_TYPES
    statement_types = _STATEMENT_TYPES
    current: Path = ()
    while todo:
        item = todo.pop()
        if type(item) is tuple:
            node, current = item
            handlers = leaves.get(type(node))
            if handlers:
                for handler in handlers:
                    handler(node)
            stack.pop()
            continue
        node = item  # type: ignore[assignment]
        node_type = type(node)
        stack.append(node)
        todo.append((node, current))
        if paths is not None and statements is not None:
            is_statement = statement_types.get(node_type)
            if is_statement is None:
                is_statement = statement_types[node_type] = issubclass(node_type, cst.BaseStatement)
            if is_statement:
                current = statements(stack)
            paths[node] = current
        handlers = visits.get(node_type)
        if handlers:
            for handler in handlers:
                handler(node)
        kids: list[cst.CSTNode] = []
        for name in fields_of.get(node_type) or _child_fields(node_type):
            value = getattr(node, name)
            value_type = type(value)
            if value_type is tuple or value_type is list:
                for child in value:
                    if node_types.get(type(child)) or _is_node(type(child)):
                        kids.append(child)
            elif node_types.get(value_type) or _is_node(value_type):
                kids.append(value)
        kids.reverse()
        todo.extend(kids)


def imports(root: cst.CSTNode) -> list[cst.Import | cst.ImportFrom]:
    """Every import statement in a tree (the module, a statement), nested ones included, found
    without entering expressions."""
    found: list[cst.Import | cst.ImportFrom] = []
    todo: list[cst.CSTNode] = [root]
    while todo:
        node = todo.pop()
        if type(node) is cst.SimpleStatementLine:
            found.extend(s for s in node.body if type(s) is cst.Import or type(s) is cst.ImportFrom)
            continue
        for name in ("body", "orelse", "handlers", "finalbody", "cases"):
            value = getattr(node, name, None)
            if type(value) is tuple or type(value) is list:
                todo.extend(value)
            elif value is not None and _is_node(type(value)):
                todo.append(value)
    return found
