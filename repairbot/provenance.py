"""Where a value was written: one analysis for every pattern that follows a value to its source.

Given an expression at a place in a user file (and, when the run traced it, the chain of
constructor call sites it came through), ``written_at`` answers the one place in the source
that writes its value, as a senior engineer reads code: a literal, a name bound once, the
default of a parameter, the argument at the call site that passed the parameter, an attribute
of a config object or dataclass (``self.x = ...``, a class field ``x: int = 64``), an argparse
default (``args.hidden_dim`` <- ``add_argument("--hidden-dim", default=64)``), or an entry
of a dict literal (``cfg["emb_dim"]`` <- ``{"emb_dim": 768}``). It answers None when the
value has no single written place (bound twice, computed by a call, read from a file): a
fix must then go elsewhere or be declined. Pure: it reads only the parsed sources it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from repairbot.analysis import Source, bindings_of, bound_once, dotted_name, source, walk
from repairbot.evidence import PassedArgument
from repairbot.sources import Sources
from repairbot.types import Span

LITERAL = "literal"
NAME = "name bound once"
DEFAULT = "parameter default"
CALL_ARGUMENT = "call-site argument"
ATTRIBUTE = "attribute"
ARGPARSE = "argparse default"
DICT_ENTRY = "dict entry"


@dataclass(frozen=True)
class Written:
    """The expression that writes a value, where it is, and how it was found."""

    kind: str  # one of the constants above
    file: str
    span: Span
    node: cst.BaseExpression
    code: str
    trail: tuple[str, ...] = ()  # the steps followed, "file:line code", outermost last

    @property
    def place(self) -> str:
        return f"{Path(self.file).name}:{self.span.line}"


def is_literal(node: cst.BaseExpression) -> bool:
    """A number, string, or arithmetic of numbers only (``64 * 7 * 7``, ``-1``)."""
    if isinstance(node, cst.Integer | cst.Float | cst.SimpleString | cst.ConcatenatedString):
        return True
    if isinstance(node, cst.UnaryOperation):
        return is_literal(node.expression)
    if isinstance(node, cst.BinaryOperation):
        return is_literal(node.left) and is_literal(node.right)
    return False


def integer_value(node: cst.BaseExpression) -> int | None:
    """The value of an integer expression without names (``-1``, ``16 * 5 * 5``, ``2 ** 8``)."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = integer_value(node.expression)
        return -inner if inner is not None else None
    if isinstance(node, cst.BinaryOperation):
        left, right = integer_value(node.left), integer_value(node.right)
        if left is None or right is None:
            return None
        operator = node.operator
        if isinstance(operator, cst.Multiply):
            return left * right
        if isinstance(operator, cst.Add):
            return left + right
        if isinstance(operator, cst.Subtract):
            return left - right
        if isinstance(operator, cst.FloorDivide) and right:
            return left // right
        if isinstance(operator, cst.Power) and 0 <= right <= 64:
            return int(left**right)
    return None


def parameter_names(function: cst.FunctionDef) -> list[str]:
    """A function's parameter names in order (positional, ``*args``, keyword-only, ``**kw``)."""
    params = function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params)]
    if isinstance(params.star_arg, cst.Param):
        names.append(params.star_arg.name.value)
    names += [p.name.value for p in params.kwonly_params]
    if params.star_kwarg is not None:
        names.append(params.star_kwarg.name.value)
    return names


def _parameter(function: cst.FunctionDef, name: str) -> cst.Param | None:
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param
    return None


def _node_at(src: Source, span: Span) -> cst.BaseExpression | None:
    """The outermost expression node with exactly this span."""
    found = [n for n, s in src.positions.items() if s == span and isinstance(n, cst.BaseExpression)]
    return found[0] if found else None


def expression_at(src: Source, line: int, col: int | None, end_line: int | None, end_col: int | None) -> cst.BaseExpression | None:
    """The expression a traced position names (a call-site argument, say)."""
    if col is None or end_line is None or end_col is None:
        return None
    return _node_at(src, Span(line, col, end_line, end_col))


def _function_around(src: Source, line: int) -> cst.FunctionDef | None:
    functions = src.around(line, cst.FunctionDef)
    return functions[0] if functions and isinstance(functions[0], cst.FunctionDef) else None


def _class_around(src: Source, line: int) -> cst.ClassDef | None:
    classes = src.around(line, cst.ClassDef)
    return classes[0] if classes and isinstance(classes[0], cst.ClassDef) else None


def _written(kind: str, src: Source, node: cst.BaseExpression, trail: Sequence[str]) -> Written | None:
    span = src.positions.get(node)
    if span is None:
        return None
    here = f"{src.path.name}:{span.line} {src.code(node)}"
    return Written(kind, str(src.path), span, node, src.code(node), (*trail, here))


def written_at(
    sources: Sources,
    file: str,
    node: cst.BaseExpression,
    chain: Sequence[PassedArgument] = (),
    trail: tuple[str, ...] = (),
    depth: int = 0,
) -> Written | None:
    """Where the value of ``node`` (an expression of ``file``) is written; see the module doc.

    ``chain``: the traced call-site arguments for the parameters of the enclosing
    ``__init__`` (innermost first), as the harness recorded them at a layer's construction.
    """
    src = source(sources, file)
    if src is None or depth > 6 or node not in src.positions:
        return None
    line = src.positions[node].line
    if is_literal(node):
        return _written(LITERAL, src, node, trail)
    if isinstance(node, cst.Name):
        return _name(sources, src, node, line, chain, trail, depth)
    if isinstance(node, cst.Attribute):
        return _attribute(sources, src, node, line, trail, depth)
    if isinstance(node, cst.Subscript):
        return _dict_entry(src, node, trail)
    return None


def _name(
    sources: Sources, src: Source, node: cst.Name, line: int, chain: Sequence[PassedArgument],
    trail: tuple[str, ...], depth: int,
) -> Written | None:
    name = node.value
    function = _function_around(src, line)
    if function is not None:
        param = _parameter(function, name)
        if param is not None:
            step = next((s for s in chain if s.param == name and s.where.file), None)
            if step is not None:
                rest = list(chain[chain.index(step) + 1:])
                caller = source(sources, step.where.file)
                argument = (
                    expression_at(caller, step.where.line, step.where.col, step.where.end_line, step.where.end_col)
                    if caller is not None else None
                )
                if caller is None or argument is None:
                    return None
                here = f"{src.path.name}:{line} {name}"
                if is_literal(argument):
                    return _written(CALL_ARGUMENT, caller, argument, (*trail, here))
                return written_at(sources, str(caller.path), argument, rest, (*trail, here), depth + 1)
            if param.default is not None and bound_once(function, name) is None:
                return _written(DEFAULT, src, param.default, trail)
            return None
        value = bound_once(function, name)
        if value is not None:
            return _follow(sources, src, value, chain, trail, depth)
        if bindings_of(function, name):
            return None  # bound more than once, or in a way no single expression writes
    value = bound_once(src.module, name)
    if value is not None:
        return _follow(sources, src, value, (), trail, depth)
    return None


def _follow(
    sources: Sources, src: Source, value: cst.BaseExpression, chain: Sequence[PassedArgument],
    trail: tuple[str, ...], depth: int,
) -> Written | None:
    """A binding's value: itself when it is the written place, else followed once more."""
    if is_literal(value):
        return _written(NAME, src, value, trail)
    if isinstance(value, cst.Name | cst.Attribute | cst.Subscript):
        here = f"{src.path.name}:{src.positions[value].line} {src.code(value)}" if value in src.positions else ""
        return written_at(sources, str(src.path), value, chain, (*trail, here) if here else trail, depth + 1)
    return None


def _attribute(
    sources: Sources, src: Source, node: cst.Attribute, line: int, trail: tuple[str, ...], depth: int
) -> Written | None:
    attr = node.attr.value
    root = node.value
    if isinstance(root, cst.Name) and root.value == "self":
        cls = _class_around(src, line)
        if cls is None:
            return None
        values = [
            n.value for n in walk(cls)
            if isinstance(n, cst.Assign) and len(n.targets) == 1 and isinstance(n.targets[0].target, cst.Attribute)
            and dotted_name(n.targets[0].target) == f"self.{attr}"
        ]
        if len(values) == 1:
            return _follow_attribute(sources, src, values[0], trail, depth)
        field = _class_field(cls, attr)
        return _written(ATTRIBUTE, src, field, trail) if field is not None and is_literal(field) else None
    argparse = _argparse_default(src, attr)
    if argparse is not None:
        return _written(ARGPARSE, src, argparse, trail)
    fields = [(f, s) for s in project_sources(sources, src) for cls in _classes(s) if (f := _class_field(cls, attr)) is not None]
    keywords = [
        (a.value, s) for s in project_sources(sources, src) for n in walk(s.module) if isinstance(n, cst.Call)
        for a in n.args if a.keyword is not None and a.keyword.value == attr and _builds_namespace(s, n)
    ]
    found = fields + keywords
    if len(found) == 1 and is_literal(found[0][0]):
        value, where = found[0]
        return _written(ATTRIBUTE, where, value, trail)
    return None


def _follow_attribute(
    sources: Sources, src: Source, value: cst.BaseExpression, trail: tuple[str, ...], depth: int
) -> Written | None:
    if is_literal(value):
        return _written(ATTRIBUTE, src, value, trail)
    if isinstance(value, cst.Name | cst.Attribute | cst.Subscript):
        return written_at(sources, str(src.path), value, (), trail, depth + 1)
    return None


def _class_field(cls: cst.ClassDef, attr: str) -> cst.BaseExpression | None:
    """``attr: int = 64`` or ``attr = 64`` in a class body (a dataclass field, a config class)."""
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == attr:
                return small.value
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                    and small.targets[0].target.value == attr:
                return small.value
    return None


def _classes(src: Source) -> list[cst.ClassDef]:
    return [n for n in walk(src.module) if isinstance(n, cst.ClassDef)]


def _builds_namespace(src: Source, call: cst.Call) -> bool:
    """``SimpleNamespace(...)``, ``argparse.Namespace(...)``, ``dict(...)``, ``Config(...)`` of a
    project class: calls whose keywords become attributes (or keys) of a config object."""
    name = dotted_name(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    return last in ("SimpleNamespace", "Namespace", "EasyDict", "edict", "AttrDict") or (
        last[:1].isupper() and any(cls.name.value == last for cls in _classes(src))
    )


def project_sources(sources: Sources, src: Source) -> list[Source]:
    """The file and its sibling project files (where config classes usually live)."""
    found = [src]
    for path in sorted(src.path.parent.glob("*.py")):
        if path != src.path:
            other = source(sources, str(path))
            if other is not None:
                found.append(other)
    return found


def _argparse_default(src: Source, attr: str) -> cst.BaseExpression | None:
    """The ``default=`` of the one ``add_argument("--attr")`` (dashes or underscores) of the file."""
    flags = {f"--{attr}", f"--{attr.replace('_', '-')}", attr}
    found = []
    for node in walk(src.module):
        if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "add_argument":
            continue
        names = [a.value.evaluated_value for a in node.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        dest = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "dest"), None)
        if dest is not None and isinstance(dest, cst.SimpleString):
            names = [dest.evaluated_value]
        if flags & {str(n) for n in names}:
            default = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "default"), None)
            found.append(default)
    return found[0] if len(found) == 1 and found[0] is not None and is_literal(found[0]) else None


def _dict_entry(src: Source, node: cst.Subscript, trail: tuple[str, ...]) -> Written | None:
    """``cfg["emb_dim"]`` <- the one ``"emb_dim": 768`` entry of a dict literal of the file."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    key = node.slice[0].slice.value
    if not isinstance(key, cst.SimpleString):
        return None
    wanted = key.evaluated_value
    values = [
        element.value for n in walk(src.module) if isinstance(n, cst.Dict) for element in n.elements
        if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString)
        and element.key.evaluated_value == wanted
    ]
    values += [
        a.value for n in walk(src.module) if isinstance(n, cst.Call) and dotted_name(n.func) == "dict"
        for a in n.args if a.keyword is not None and a.keyword.value == wanted
    ]
    if len(values) == 1 and is_literal(values[0]):
        return _written(DICT_ENTRY, src, values[0], trail)
    return None
