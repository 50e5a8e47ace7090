"""dtype-mismatch's fix: ``CastToFloat``, a ``.float()`` (or ``dtype=``, or ``.double()``) where the
tensor of the odd dtype is made.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    keyword_arg,
)
from repairbot.codemod import append_keyword, method_call
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes


@dataclass(frozen=True)
class CastToFloat(Rewrite):
    """Appends ``.float()`` (``method``: ``.double()`` for a model cast to float64 on purpose)
    to the tensor-creating call at the site, nothing else; with ``dtype`` (``torch.float32``),
    adds ``dtype=torch.float32`` to the call's arguments instead."""

    method: str = "float"
    dtype: str | None = None

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        if self.dtype is not None:
            if keyword_arg(call, "dtype") is not None:
                raise EditError("the call has a dtype= already")
            return [Edit(call, append_keyword(call, "dtype", cst.parse_expression(self.dtype)))]
        return [Edit(call, method_call(call, self.method))]
