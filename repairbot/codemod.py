"""LibCST helpers shared by patterns: names under their import aliases, nodes by position,
and argument edits that keep the call's own formatting."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from repairbot.types import Span


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def _module_name(node: cst.Attribute | cst.Name) -> str:
    return dotted_name(node) or ""


class ImportTable:
    """What each imported name stands for, across every import statement of a module.

    A deliberately flat view (a name imported anywhere in the file counts everywhere): a
    training script rebinds ``nn`` or ``torch`` to something else only by mistake, and this
    keeps the lookup cheap compared with a full scope analysis.
    """

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        for node in _walk_imports(module):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = _module_name(alias.name)
                    if alias.asname is not None:
                        self.aliases[cst.ensure_type(alias.asname.name, cst.Name).value] = full
                    else:
                        # `import torch.nn` binds `torch`
                        head = full.split(".")[0]
                        self.aliases[head] = head
            elif isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative:
                base = _module_name(node.module)
                if isinstance(node.names, cst.ImportStar):
                    continue
                for alias in node.names:
                    name = _module_name(alias.name)
                    local = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname else name
                    self.aliases[local] = f"{base}.{name}"

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
    for node in m.findall(module, m.Import() | m.ImportFrom()):
        if isinstance(node, cst.Import | cst.ImportFrom):
            yield node


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


def replace_arg_value(call: cst.Call, target: cst.Arg, value: cst.BaseExpression) -> cst.Call:
    """The call with one argument's value replaced; commas, keyword and spacing kept."""
    return call.with_changes(
        args=[arg.with_changes(value=value) if arg is target else arg for arg in call.args]
    )


def remove_arg(call: cst.Call, target: cst.Arg) -> cst.Call:
    """The call without one argument, in the call's own layout.

    The argument after the removed one keeps its place; when the last argument goes, the one
    before it takes its comma (a trailing comma stays trailing) and what preceded ``)``.
    """
    args = list(call.args)
    index = next(i for i, arg in enumerate(args) if arg is target)
    del args[index]
    if not args:
        return call.with_changes(args=[], whitespace_before_args=cst.SimpleWhitespace(""))
    if index == len(args):
        args[-1] = args[-1].with_changes(comma=target.comma, whitespace_after_arg=target.whitespace_after_arg)
    return call.with_changes(args=args)


def append_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """The call with ``name=value`` added after its last argument, in the call's own layout.

    ``f(a, b)`` -> ``f(a, b, name=value)``. With one argument per line and a trailing comma,
    the new argument gets a line of its own in the same indentation, and a trailing comma.
    """
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma: the new argument inherits the last one's comma (what precedes the
        # closing parenthesis), and the last one is separated as the others are.
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            between = args[-2].comma.whitespace_after
        else:
            between = call.whitespace_before_args
        args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
        args.append(new_arg.with_changes(comma=last.comma))
        return call.with_changes(args=args)
    # No trailing comma: whatever followed the last argument now follows the new one.
    args[-1] = last.with_changes(
        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
        whitespace_after_arg=cst.SimpleWhitespace(""),
    )
    args.append(new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg))
    return call.with_changes(args=args)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A node and everything under it, in source order."""
    yield node
    for child in node.children:
        yield from walk(child)


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


def quote_of(module: cst.Module) -> str:
    """The quote character the file mostly writes its strings with."""
    single = double = 0
    for node in m.findall(module, m.SimpleString()):
        if isinstance(node, cst.SimpleString):
            single += node.quote == "'"
            double += node.quote == '"'
    return "'" if single > double else '"'


def string_literal(module: cst.Module, text: str) -> str:
    """``text`` quoted the way the file mostly quotes its strings."""
    quote = quote_of(module)
    return f"{quote}{text}{quote}"


def binds_tighter_than_attribute(value: cst.BaseExpression) -> bool:
    """Names, attributes, calls, subscripts and anything in parentheses take ``.attr`` as they are."""
    if getattr(value, "lpar", None):
        return True
    return isinstance(value, cst.Name | cst.Attribute | cst.Call | cst.Subscript)


def method_call(value: cst.BaseExpression, method: str, *args: cst.BaseExpression) -> cst.Call:
    """``value.method(args)``, parenthesising ``value`` where ``.`` would bind to part of it."""
    if not binds_tighter_than_attribute(value):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(
        func=cst.Attribute(value=value, attr=cst.Name(method)),
        args=[cst.Arg(arg) for arg in args],
    )


def called_name(call: cst.Call) -> str:
    """The last name of what a call calls: ``init_hidden`` of ``self.model.init_hidden(n)``,
    ``DataLoader`` of ``DataLoader(ds)``; ``""`` for a call of anything else (``fs[0]()``)."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""
