"""conv-in-channels' fixes: ``in_channels`` set at the conv call or where its value is written,
passed at the construction that leaves it to a default, or the batch's channels moved first.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    argument,
)
from repairbot.codemod import append_keyword, method_call, replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes
from repairbot.provenance import integer_value


@dataclass(frozen=True)
class SetInChannels(Rewrite):
    """Replaces the value of the Conv call's ``in_channels`` argument, nothing else."""

    in_channels: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, 0, "in_channels")
        if target is None:
            raise EditError("no in_channels argument")
        return [Edit(call, replace_arg_value(call, target, cst.Integer(str(self.in_channels))))]


@dataclass(frozen=True)
class SetWrittenChannels(Rewrite):
    """Replaces the number where the conv's ``in_channels`` value is written (a call-site
    argument, a config entry), nothing else."""

    in_channels: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        written = nodes.node(cst.BaseExpression)
        if integer_value(written) is None:
            raise EditError("the value is not written as a number there")
        return [Edit(written, cst.Integer(str(self.in_channels)))]


@dataclass(frozen=True)
class PassChannelsAtConstruction(Rewrite):
    """Passes ``param=in_channels`` at the call that builds the model (a parameter whose
    default sizes the conv, left out there), after its last argument, in the call's layout."""

    param: str
    in_channels: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        if any(arg.keyword is not None and arg.keyword.value == self.param for arg in call.args):
            raise EditError(f"{self.param} is already passed there")  # a second application
        added = append_keyword(call, self.param, cst.Integer(str(self.in_channels)))
        # `a = 1` where the call's own keywords are written so
        spaced = next((arg.equal for arg in call.args if arg.keyword is not None and isinstance(arg.equal, cst.AssignEqual)), None)
        if spaced is not None:
            args = list(added.args)
            args[-1] = args[-1].with_changes(equal=spaced)
            added = added.with_changes(args=args)
        return [Edit(call, added)]


@dataclass(frozen=True)
class PermuteChannelsFirst(Rewrite):
    """Moves the channels of the expression that makes the batch first (``.permute(order)``)."""

    order: tuple[int, ...]

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        value = nodes.node(cst.BaseExpression)
        around = nodes.parent(value)
        if isinstance(around, cst.Attribute) and around.attr.value == "permute":
            call = nodes.parent(around)
            if isinstance(call, cst.Call) and call.func is around:
                raise EditError("the batch is already reordered there")  # a second application
        return [Edit(value, method_call(value, "permute", *(cst.Integer(str(d)) for d in self.order)))]
