"""linear-in-features' fixes: ``in_features`` set at the Linear call (``SetInFeatures``), the size
replaced where it is written (``ReplaceSize``), a discarded flatten assigned (``AssignFlatten``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    argument,
)
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes


@dataclass(frozen=True)
class SetInFeatures(Rewrite):
    """Replaces the value of the Linear call's ``in_features`` argument, nothing else."""

    in_features: str  # the new value, as code

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, 0, "in_features")
        if target is None:
            raise EditError("no in_features argument")
        return [Edit(target.value, cst.parse_expression(self.in_features))]


@dataclass(frozen=True)
class ReplaceSize(Rewrite):
    """Replaces the size expression at the site (where the number is written, a name in scope...)."""

    code: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        return [Edit(nodes.node(cst.BaseExpression), cst.parse_expression(self.code))]


@dataclass(frozen=True)
class AssignFlatten(Rewrite):
    """Assigns a flatten whose result was thrown away: ``x.view(x.size(0), -1)`` -> ``x = ...``."""

    name: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.Expr)
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(self.name))], value=statement.value, semicolon=statement.semicolon)
        return [Edit(statement, assign)]
