"""target-dtype's fixes: a conversion method on the loss's target (``TargetMethod``), and the
``dtype=`` of the call that makes the labels (``CreationDtype``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    argument,
    keyword_arg,
)
from repairbot.codemod import append_keyword, method_call, replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes


@dataclass(frozen=True)
class TargetMethod(Rewrite):
    """``.long()`` (or ``.float()``) on the target argument of the loss call at the site."""

    method: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, 1, "target")
        if target is None:
            raise EditError("no target argument")
        return [Edit(call, replace_arg_value(call, target, method_call(target.value, self.method)))]


@dataclass(frozen=True)
class CreationDtype(Rewrite):
    """At a creation call: the ``dtype=`` keyword's value replaced (``dtype-keyword``) or added
    (``add-dtype``), the ``.type(...)`` argument replaced (``type-arg``), or the conversion
    method renamed (``method``)."""

    action: str  # dtype-keyword, add-dtype, type-arg, method
    dtype: str  # the dtype's code (torch.long), or the method (long)

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        if self.action == "method":
            if not isinstance(call.func, cst.Attribute) or call.args:
                raise EditError("not a conversion method call")
            return [Edit(call, call.with_changes(func=call.func.with_changes(attr=cst.Name(self.dtype))))]
        dtype = cst.parse_expression(self.dtype)
        if self.action == "add-dtype":
            if keyword_arg(call, "dtype") is not None:
                raise EditError("the call has a dtype= already")
            return [Edit(call, append_keyword(call, "dtype", dtype))]
        written = keyword_arg(call, "dtype") if self.action == "dtype-keyword" else argument(call, 0, "dtype")
        if written is None:
            raise EditError("no dtype argument")
        return [Edit(call, replace_arg_value(call, written, dtype))]
