"""inplace-autograd's fixes: the ``Rewrite`` classes (out of place, under no_grad, a clone of the
saved read, ``masked_fill``) and the node builders they use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from repairbot.analysis import argument, keyword_arg, positional_args
from repairbot.codemod import remove_arg
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes

_AUGMENTED: dict[type[cst.BaseAugOp], type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo, cst.PowerAssign: cst.Power,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply, cst.BitAndAssign: cst.BitAnd,
    cst.BitOrAssign: cst.BitOr, cst.BitXorAssign: cst.BitXor,
    cst.LeftShiftAssign: cst.LeftShift, cst.RightShiftAssign: cst.RightShift,
}


# Python's binding strength of the binary operators, weakest first.
_PRECEDENCE: dict[type[cst.BaseBinaryOp], int] = {
    cst.BitOr: 1, cst.BitXor: 2, cst.BitAnd: 3, cst.LeftShift: 4, cst.RightShift: 4,
    cst.Add: 5, cst.Subtract: 5, cst.Multiply: 6, cst.Divide: 6, cst.FloorDivide: 6,
    cst.Modulo: 6, cst.MatrixMultiply: 6, cst.Power: 8,
}


@dataclass(frozen=True)
class OutOfPlace(Rewrite):
    """Rewrites the one in-place operation at the site, as ``kind`` says.

    ``augmented``: ``x += y`` -> ``x = x + y``. ``method``/``function``: ``x.add_(y)`` ->
    ``x.add(y)``, ``torch.relu_(x)`` -> ``torch.relu(x)``. ``drop-inplace``: the call without its
    ``inplace=True`` (passed by keyword, or at ``position``). With ``rebind`` the site is an
    expression statement whose result was dropped, which becomes ``x = <the new call>``.
    """

    kind: str
    position: int | None = None
    rebind: bool = False

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        if self.kind == "augmented":
            statement = nodes.node(cst.AugAssign)
            return [Edit(statement, augmented_to_assign(statement))]
        if not self.rebind:
            call = nodes.node(cst.Call)
            return [Edit(call, out_of_place_call(call, self))]
        expression = nodes.node(cst.Expr)
        call = cst.ensure_type(expression.value, cst.Call)
        target = receiver_of(call, self.kind)
        if not isinstance(target, cst.Name | cst.Attribute):
            raise EditError("no name to bind the new tensor to")
        rebound = cst.Assign(
            targets=[cst.AssignTarget(target=target.deep_clone())],
            value=out_of_place_call(call, self),
            semicolon=expression.semicolon,
        )
        return [Edit(expression, rebound)]


@dataclass(frozen=True)
class NoGrad(Rewrite):
    """The statement at the site wrapped in ``with torch.no_grad():`` (``no_grad``, as the file
    spells it); comments and blank lines above it stay above the new block."""

    no_grad: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.SimpleStatementLine)
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.parse_expression(self.no_grad))],
            body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
            leading_lines=statement.leading_lines,
        )
        return [Edit(statement, wrapped)]


@dataclass(frozen=True)
class NoGradMerge(Rewrite):
    """The statement at the site moved into the ``with torch.no_grad():`` block just above it
    (the extra span): the block grows, the statement leaves its old place."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.BaseStatement)
        (block,) = nodes.extra(cst.With)
        if not isinstance(statement, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            raise EditError("not a statement of a block")
        around = nodes.parent(statement)
        body = around.body if isinstance(around, cst.Module | cst.IndentedBlock) else ()
        index = next((i for i, s in enumerate(body) if s is statement), 0)
        if index == 0 or body[index - 1] is not block or not isinstance(block.body, cst.IndentedBlock):
            raise EditError("the statement does not follow the with block")
        moved = statement.with_changes(leading_lines=self._kept_in_place(nodes, statement))
        grown = block.with_changes(body=block.body.with_changes(body=[*block.body.body, moved]))
        return [Edit(block, grown), Edit(statement, cst.RemovalSentinel.REMOVE)]

    @staticmethod
    def _kept_in_place(nodes: SiteNodes, statement: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> list[cst.EmptyLine]:
        """The blank and comment lines above a statement moved one block deeper, written as they
        were: LibCST would indent them with the block (a whitespace-only line, a comment), and
        only the statement itself is the edit."""
        default = nodes.module.default_indent
        blocks = [node for node in reversed(nodes.ancestors(statement)) if isinstance(node, cst.IndentedBlock)]
        outer = "".join(default if block.indent is None else block.indent for block in blocks)
        return [
            line.with_changes(indent=False, whitespace=cst.SimpleWhitespace(outer + line.whitespace.value))
            if line.indent else line
            for line in statement.leading_lines
        ]


@dataclass(frozen=True)
class CloneReads(Rewrite):
    """``buf[t] = buf[t - 1] * w`` -> ``buf[t] = buf[t - 1].clone() * w``: each read of the
    buffer ``base`` on the right-hand side of the assignment at the site is cloned (the
    gradient flows through ``clone()``; only the storage is new)."""

    base: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        assign = nodes.node(cst.Assign)
        reads = buffer_reads(assign.value, self.base, nodes.module)
        if not reads:
            raise EditError(f"the assignment reads nothing of {self.base}")
        return [Edit(read, _clone(read)) for read in reads]

    def cloned(self, assign: cst.Assign, module: cst.Module) -> cst.Assign:
        """The assignment as the edits leave it (for the report)."""
        reads = {id(read) for read in buffer_reads(assign.value, self.base, module)}

        class Clone(cst.CSTTransformer):
            def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
                return _clone(updated) if id(original) in reads else updated

        return cst.ensure_type(assign.visit(Clone()), cst.Assign)


@dataclass(frozen=True)
class MaskedFill(Rewrite):
    """``x[mask] = 0`` -> ``x = x.masked_fill(mask, 0)``: the masked write into the tensor at
    the site made out of place (the same values, in a new tensor bound to the same name)."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        assign = nodes.node(cst.Assign)
        return [Edit(assign, masked_fill_assign(assign))]


def masked_fill_assign(assign: cst.Assign) -> cst.Assign:
    """``x[mask] = v`` as ``x = x.masked_fill(mask, v)``, with the assignment's own spacing."""
    (target,) = assign.targets
    subscript = cst.ensure_type(target.target, cst.Subscript)
    index = cst.ensure_type(subscript.slice[0].slice, cst.Index)
    base = subscript.value
    call = cst.Call(
        func=cst.Attribute(value=base.deep_clone(), attr=cst.Name("masked_fill")),
        args=[
            cst.Arg(value=index.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(value=assign.value),
        ],
    )
    return assign.with_changes(targets=[target.with_changes(target=base)], value=call)


def _clone(read: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=read, attr=cst.Name("clone")))


def buffer_reads(value: cst.BaseExpression, base: str, module: cst.Module) -> list[cst.Subscript]:
    """The outermost subscripts of ``base`` in ``value`` (``buf[t - 1]`` of ``buf[t - 1] * w``)
    that are not already cloned."""
    found: list[cst.Subscript] = []

    class Reads(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> bool:
            if module.code_for_node(node.value) == base:
                found.append(node)
                return False
            return True

        def visit_Call(self, node: cst.Call) -> bool:
            # buf[t - 1].clone() (or .detach()) is already a copy of its own
            func = node.func
            return not (isinstance(func, cst.Attribute) and func.attr.value in ("clone", "detach")
                        and isinstance(func.value, cst.Subscript) and module.code_for_node(func.value.value) == base)

    value.visit(Reads())
    return found


def out_of_place_call(call: cst.Call, rewrite: OutOfPlace) -> cst.Call:
    """The call's out-of-place form: ``inplace=True`` dropped, or the method's trailing ``_``."""
    if rewrite.kind == "drop-inplace":
        position = rewrite.position
        target = argument(call, position, "inplace") if position is not None else keyword_arg(call, "inplace")
        return remove_arg(call, target) if target is not None else call
    func = cst.ensure_type(call.func, cst.Attribute)
    return call.with_changes(func=func.with_changes(attr=func.attr.with_changes(value=func.attr.value[:-1])))


def receiver_of(call: cst.Call, kind: str) -> cst.BaseExpression | None:
    """The tensor an in-place call modifies: ``x`` of ``x.add_(1)``, ``torch.relu_(x)``, ``F.relu(x, inplace=True)``."""
    if kind == "method" and isinstance(call.func, cst.Attribute):
        return call.func.value
    positional = positional_args(call)
    return positional[0].value if positional else None


def augmented_to_assign(node: cst.AugAssign) -> cst.Assign:
    """``x += y`` as ``x = x + y``: the target's own spacing around ``=``, parentheses only where needed."""
    operator_type = _AUGMENTED[type(node.operator)]
    value = node.value
    if _needs_parentheses(value, operator_type):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    # every augmented operator token has the spacing fields; BaseAugOp does not declare them
    operator: Any = node.operator
    return cst.Assign(
        targets=[
            cst.AssignTarget(
                target=node.target,
                whitespace_before_equal=operator.whitespace_before,
                whitespace_after_equal=operator.whitespace_after,
            )
        ],
        value=cst.BinaryOperation(left=node.target.deep_clone(), operator=operator_type(), right=value),
        semicolon=node.semicolon,
    )


def _needs_parentheses(value: cst.BaseExpression, operator_type: type[cst.BaseBinaryOp]) -> bool:
    """Whether ``x OP value`` would bind differently from ``x OP= value`` without parentheses."""
    if value.lpar:
        return False
    if isinstance(value, cst.BinaryOperation):
        # equal strength too: x - (a - b) is not x - a - b
        return _PRECEDENCE[type(value.operator)] <= _PRECEDENCE[operator_type]
    if isinstance(value, cst.UnaryOperation):
        return isinstance(value.operator, cst.Not)
    return isinstance(
        value, cst.BooleanOperation | cst.Comparison | cst.IfExp | cst.Lambda | cst.NamedExpr | cst.Yield
    )
