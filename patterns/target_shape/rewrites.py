"""target-shape's fixes: ``.squeeze(dim)`` on the loss's argument, ``.unsqueeze(dim)`` (or
``.squeeze``) where the target is built, a Dataset item's value wrapped in a list.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    argument,
)
from repairbot.codemod import method_call, replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes


@dataclass(frozen=True)
class SqueezeLossArgument(Rewrite):
    """Appends ``.squeeze(dim)`` to one argument of the loss call at the site, nothing else."""

    position: int  # the argument, by position or by keyword
    keyword: str
    dim: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, self.position, self.keyword)
        if target is None:
            raise EditError(f"no {self.keyword} argument")
        return [Edit(call, replace_arg_value(call, target, method_call(target.value, "squeeze", cst.Integer(str(self.dim)))))]


@dataclass(frozen=True)
class ReshapeBuiltTarget(Rewrite):
    """Appends ``.unsqueeze(dim)`` (or ``.squeeze(dim)``) to the expression that builds the
    target tensor, where it is written."""

    method: str  # unsqueeze or squeeze
    dim: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        built = nodes.node(cst.BaseExpression)
        return [Edit(built, method_call(built, self.method, cst.Integer(str(self.dim))))]


@dataclass(frozen=True)
class ItemAsList(Rewrite):
    """In a Dataset's ``torch.tensor(value)`` of a sample's target: the value wrapped in a
    one-element list (``torch.tensor([y])``: one value per sample, batched to (N, 1)), or such a
    list unwrapped (``torch.tensor(y)``: batched to (N,))."""

    wrap: bool

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        data = argument(call, 0, "data")
        if data is None:
            raise EditError("no data argument")
        value = data.value
        if self.wrap:
            changed: cst.BaseExpression = cst.List([cst.Element(value)])
        elif isinstance(value, cst.List) and len(value.elements) == 1 and isinstance(value.elements[0], cst.Element):
            changed = value.elements[0].value
        else:
            raise EditError("not a one-element list")
        return [Edit(call, replace_arg_value(call, data, changed))]
