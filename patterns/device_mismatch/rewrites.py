"""device-mismatch's fix: ``MoveToDevice``, one move of the tensor or module that stayed behind
(a ``.to(device)`` on a value, a statement inserted in a loop, a ``device=`` keyword).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    keyword_arg,
)
from repairbot.codemod import append_keyword
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes

MOVE_METHODS = ("to", "cuda")


NEW_DEVICE_NAME = "device"


@dataclass(frozen=True)
class MoveToDevice(Rewrite):
    """Applies one move (``action``): a statement inserted in a loop (``insert-in-loop``) or
    after a statement (``insert-after``), a move line extended (``extend-move``), ``.to(device)``
    chained on a constructor call (``chain-to``), or ``device=`` added to a creation call
    (``device-keyword``); plus, with a ``device_line``, a device variable introduced before the
    statement at the extra span."""

    action: str
    device: str  # the device, as code
    statement: str = ""  # the statement inserted, or the move line as extended
    device_line: str = ""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        moved, replacement = self._move(nodes)
        if not self.device_line:
            return [Edit(moved, replacement)]
        (anchor,) = nodes.extra(cst.BaseStatement)
        if not isinstance(anchor, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            raise EditError("the device line has no statement to go before")
        # the device line goes first; blank lines above the anchor move above it
        leading = list(anchor.leading_lines)
        blank = 0
        while blank < len(leading) and leading[blank].comment is None:
            blank += 1
        device_line = cst.parse_statement(self.device_line + "\n").with_changes(leading_lines=leading[:blank])
        if anchor is not moved:
            return [Edit(moved, replacement), Edit(anchor, cst.FlattenSentinel([device_line, anchor.with_changes(leading_lines=leading[blank:])]))]
        # the move rewrites the anchor itself: one edit of it
        statements = list(replacement.nodes) if isinstance(replacement, cst.FlattenSentinel) else [replacement]
        statements[0] = statements[0].with_changes(leading_lines=leading[blank:])  # the anchor, moved or not
        return [Edit(anchor, cst.FlattenSentinel([device_line, *statements]))]

    def _move(self, nodes: SiteNodes) -> tuple[cst.CSTNode, cst.CSTNode | cst.FlattenSentinel[cst.CSTNode]]:
        """The node the move rewrites, and what it becomes."""
        if self.action == "insert-in-loop":
            loop = nodes.node(cst.For)
            if not isinstance(loop.body, cst.IndentedBlock):
                raise EditError("the loop is written on one line")
            return loop, loop.with_changes(body=loop.body.with_changes(body=[self._statement(), *loop.body.body]))
        if self.action == "insert-after":
            statement = nodes.node(cst.BaseStatement)
            return statement, cst.FlattenSentinel([statement, self._statement()])
        if self.action == "extend-move":
            assign = nodes.node(cst.Assign)
            new = self._statement()
            if not isinstance(new, cst.SimpleStatementLine) or not isinstance(new.body[0], cst.Assign):
                raise EditError("the move line is not an assignment")
            return assign, assign.with_changes(targets=new.body[0].targets, value=new.body[0].value)
        call = nodes.node(cst.Call)
        device = cst.parse_expression(self.device)
        if self.action == "chain-to":
            return call, cst.Call(func=cst.Attribute(value=call, attr=cst.Name("to")), args=[cst.Arg(device)])
        if self.action != "device-keyword" or keyword_arg(call, "device") is not None:
            raise EditError(f"no {self.action} edit of this call")
        return call, append_keyword(call, "device", device)

    def _statement(self) -> cst.BaseStatement:
        return cst.parse_statement(self.statement + "\n")
