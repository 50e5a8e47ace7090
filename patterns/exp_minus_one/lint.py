"""exp-minus-one: ``torch.exp(x) - 1``, which loses the small x that ``torch.expm1`` keeps."""

from __future__ import annotations

import re

import libcst as cst

from repairbot.analysis import is_method_call, number, receiver
from repairbot.codemod import method_call
from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid
from repairbot.types import Applicability

# `exp` then, anywhere later (the call may span lines: `torch.exp(\n...\n) - 1`), a `-` and a 1
_EXP_MINUS_ONE = re.compile(rb"exp\b.*?-", re.DOTALL)


class ExpMinusOne(LintRule):
    """Finds ``torch.exp(x) - 1`` and ``x.exp() - 1``, which ``torch.expm1(x)`` computes accurately.

    What it finds:
        A subtraction of 1 (or 1.0) from ``torch.exp(x)`` (under any alias) or ``x.exp()``.

    Why it matters:
        For small ``x``, ``exp(x)`` is so close to 1 that the subtraction cancels nearly every
        significant digit (catastrophic cancellation); ``expm1`` computes ``e^x - 1`` directly
        and keeps them (ELU-like activations, log-normal variances, compound rates).

    Fix safety:
        The fix calls ``torch.expm1(x)`` (``x.expm1()``). Unsafe: the results change in their
        last bits (entirely for tiny ``x``), which is the point but not bit-for-bit
        reproducible.

    Not handled:
        ``1 - torch.exp(x)`` (that is ``-expm1(x)``); ``-1 + torch.exp(x)``; ``math.exp`` and NumPy.

    Differs from TorchFix:
        The method form ``x.exp() - 1`` is reported too (a known miss of TorchFix's), and the
        finding carries a fix (TorchFix's has none).
    """

    ID = "exp-minus-one"
    SEVERITY = Severity.INFORMATION
    TITLE = "torch.exp(x) - 1 instead of torch.expm1(x)"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "torch.exp(x) - 1 is inaccurate for small x: use torch.expm1(x)"
    APPLICABILITY = Applicability.UNSAFE

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        return _EXP_MINUS_ONE.search(data) is not None

    VALID = (
        Valid("""
            import torch
            y = torch.expm1(x) + (torch.exp(x) - 2) + (2 * torch.exp(x) - 1)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            var = (torch.exp(sigma ** 2) - 1) * torch.exp(2 * mu + sigma ** 2)
            """,
            line=2, column=8, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            var = torch.expm1(sigma ** 2) * torch.exp(2 * mu + sigma ** 2)
            """,
        ),
        Invalid(
            """
            import torch
            out = alpha * (x.exp() - 1.0)
            """,
            line=2, column=16, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            out = alpha * x.expm1()
            """,
        ),
        # over several lines: the prefilter must not skip the file
        Invalid(
            """
            import torch
            rate = torch.exp(
                log_rate * dt
            ) - 1
            """,
            line=2, column=8, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            rate = torch.expm1(
                log_rate * dt
            )
            """,
        ),
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Subtract) or number(node.right) != 1.0:
            return
        call = node.left
        if not isinstance(call, cst.Call) or call.lpar:
            return
        if self.context.is_torch(call.func, "torch.exp") and isinstance(call.func, cst.Attribute):
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                return
            replacement: cst.BaseExpression = call.with_changes(func=call.func.with_changes(attr=cst.Name("expm1")))
        elif is_method_call(call, "exp") and not call.args:
            owner = receiver(call)
            assert owner is not None
            replacement = method_call(owner, "expm1")
        else:
            return
        # the subtraction's parentheses go with it: a call needs none
        self.report(
            node,
            f"`{self.context.code(node)}` cancels the significant digits of small x: `expm1` keeps them",
            replacement=replacement,
        )
