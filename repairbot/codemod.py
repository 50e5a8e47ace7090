"""LibCST helpers that build or edit nodes in the file's own style: argument edits that keep
the call's formatting, string literals in the file's quotes, method calls parenthesised where
needed. Reading a program (names, positions, bindings...) is repairbot/analysis.py's."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m


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


