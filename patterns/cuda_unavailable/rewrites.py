"""cuda-unavailable's fix: ``MakeDeviceAgnostic``, one change at each hard-coded CUDA site of the
file (``DeviceEdit``: ``x.cuda()`` to ``x.to(device)``, a literal to a device chosen where CUDA
may be missing).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.edits import Edit, EditError, Rewrite, SiteNodes

NEW_DEVICE_NAME = "device"


@dataclass(frozen=True)
class DeviceEdit:
    """One hard-coded CUDA site made device-agnostic: ``to-device`` turns the ``x.cuda(...)``
    call into ``x.to(code, ...)``; any other kind replaces the expression with ``code``."""

    kind: str
    node: type[cst.BaseExpression]  # the type of the node at the site's span
    code: str


@dataclass(frozen=True)
class MakeDeviceAgnostic(Rewrite):
    """Rewrites every hard-coded CUDA site of the file (one change each, at the site's spans in
    order), and with a ``device_line``, inserts it before the anchor statement (the last extra
    span); blank lines and comments above the anchor move above the device line."""

    changes: tuple[DeviceEdit, ...]
    device_line: str | None = None

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        spans = (nodes.site.span, *nodes.site.extra_spans)
        if len(spans) != len(self.changes) + (1 if self.device_line is not None else 0):
            raise EditError("one change per span, and the device line's anchor")
        edits = [self._edit(nodes.at(span, change.node), change) for span, change in zip(spans, self.changes, strict=False)]
        if self.device_line is not None:
            anchor = nodes.at(spans[-1], cst.BaseStatement)
            if not isinstance(anchor, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                raise EditError("the device line has no statement to go before")
            line = cst.parse_statement(self.device_line + "\n").with_changes(leading_lines=anchor.leading_lines)
            # a def keeps its blank lines above it, now below the device line
            kept = [ln for ln in anchor.leading_lines if ln.comment is None] if isinstance(anchor, cst.FunctionDef | cst.ClassDef) else []
            edits.append(Edit(anchor, cst.FlattenSentinel([line, anchor.with_changes(leading_lines=kept)])))
        return edits

    @staticmethod
    def _edit(node: cst.BaseExpression, change: DeviceEdit) -> Edit:
        if change.kind != "to-device":
            return Edit(node, cst.parse_expression(change.code))
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
            raise EditError("not an `x.cuda(...)` call")
        return Edit(node, to_device(node, change.code))


def to_device(call: cst.Call, device: str) -> cst.Call:
    """``x.cuda(non_blocking=True)`` -> ``x.to(device, non_blocking=True)``: the device argument
    replaced, the other keywords kept."""
    assert isinstance(call.func, cst.Attribute)
    kept = [arg for arg in call.args if arg.keyword is not None and arg.keyword.value != "device"]
    first = cst.Arg(cst.parse_expression(device))
    if kept:
        first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=[first, *kept])
