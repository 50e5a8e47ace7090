"""log-one-plus: ``torch.log(1 + x)``, which loses the small x that ``torch.log1p`` keeps."""

from __future__ import annotations

import re

import libcst as cst

from repairbot.analysis import is_method_call, number, receiver
from repairbot.codemod import method_call
from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid
from repairbot.types import Applicability

_LOG = re.compile(rb"\blog\b")


def one_plus(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` for ``1 + x`` or ``x + 1`` (1 or 1.0)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        if number(node.left) == 1.0:
            return node.right
        if number(node.right) == 1.0:
            return node.left
    return None


class LogOnePlus(LintRule):
    """Finds ``torch.log(1 + x)`` and ``(1 + x).log()``, which ``torch.log1p(x)`` computes accurately.

    What it finds:
        ``torch.log`` (under any alias) of ``1 + x`` or ``x + 1``, and the method form
        ``(1 + x).log()``.

    Why it matters:
        For small ``x`` (below about 1e-7 in float32), ``1 + x`` rounds to ``1`` before the
        logarithm sees it, and the result is 0 or badly off; ``log1p`` keeps full precision
        (log-likelihoods, softplus-like terms, probabilities near 0).

    Fix safety:
        The fix calls ``torch.log1p(x)`` (``x.log1p()``). Unsafe: the results change, in the
        last bits for most inputs and entirely for tiny ones, which is the point but not
        bit-for-bit reproducible.

    Not handled:
        ``torch.log(x + 1e-8)``-style epsilons (not log1p); ``math.log`` and NumPy.

    Differs from TorchFix:
        The method form ``(x + 1).log()`` is reported too (a known miss of TorchFix's), and the
        finding carries a fix (TorchFix's has none).
    """

    ID = "log-one-plus"
    SEVERITY = Severity.INFORMATION
    TITLE = "torch.log(1 + x) instead of torch.log1p(x)"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "torch.log(1 + x) is inaccurate for small x: use torch.log1p(x)"
    APPLICABILITY = Applicability.UNSAFE

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        # `log` as a word (`torch.log (1 + x)`, `.log(\n)` are calls too) and a `+`: the 1 can be
        # spelt too many ways (`1.`, `1e0`, `0x1`, `(1)`) for a pattern to be sure of it
        return b"+" in data and _LOG.search(data) is not None

    VALID = (
        Valid("""
            import torch
            y = torch.log1p(x) + torch.log(2 + x) + torch.log(x + 1e-8)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            nll = -torch.log(1 + probs.exp())
            """,
            line=2, column=8, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            nll = -torch.log1p(probs.exp())
            """,
        ),
        Invalid(
            """
            import torch
            y = (x * scale + 1.0).log()
            """,
            line=2, column=5, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            y = (x * scale).log1p()
            """,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.is_torch(node.func, "torch.log") and isinstance(node.func, cst.Attribute):
            if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
                return
            inner = one_plus(node.args[0].value)
            if inner is None:
                return
            replacement: cst.BaseExpression = node.with_changes(
                func=node.func.with_changes(attr=cst.Name("log1p")), args=[node.args[0].with_changes(value=inner)]
            )
        elif is_method_call(node, "log") and not node.args:
            owner = receiver(node)
            inner = one_plus(owner) if owner is not None else None
            if inner is None:
                return
            replacement = method_call(inner, "log1p")
        else:
            return
        self.report(
            node,
            f"`{self.context.code(node)}` rounds 1 + x to 1 for small x: `log1p` keeps the precision",
            replacement=replacement,
        )
