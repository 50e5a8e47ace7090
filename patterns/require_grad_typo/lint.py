"""require-grad-typo: ``x.require_grad = ...`` sets an attribute nobody reads."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import assigned_targets
from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid
from repairbot.types import Applicability


class RequireGradTypo(LintRule):
    """Finds assignments to ``.require_grad`` (missing ``s``), meant for ``.requires_grad``.

    What it finds:
        ``p.require_grad = False`` (or any assignment whose target is a ``require_grad``
        attribute), in a file that uses torch.

    Why it matters:
        Python creates the new attribute without a word, and ``requires_grad`` is unchanged:
        the layers meant to be frozen keep training (or the tensor meant to be optimised gets
        no gradient), and the run looks normal.

    Fix safety:
        The fix renames the attribute to ``requires_grad``: safe, it is what the line means.

    Not handled:
        ``setattr(p, "require_grad", ...)``; a class of the project that defines a
        ``require_grad`` attribute on purpose (rename it, or suppress the finding).
    """

    ID = "require-grad-typo"
    SEVERITY = Severity.WARNING
    TITLE = "An assignment to .require_grad (typo of requires_grad)"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "`require_grad` is a typo of `requires_grad`: this changes nothing"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"require_grad",)

    VALID = (
        Valid("""
            import torch
            for p in model.backbone.parameters():
                p.requires_grad = False
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            for p in model.backbone.parameters():
                p.require_grad = False
            """,
            line=3, column=5, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            for p in model.backbone.parameters():
                p.requires_grad = False
            """,
        ),
    )

    def _check(self, node: cst.CSTNode) -> None:
        for target in assigned_targets(node):
            if isinstance(target, cst.Attribute) and target.attr.value == "require_grad":
                self.report(
                    target,
                    f"`{self.context.code(target)}` sets a new attribute (a typo of `requires_grad`): "
                    "the tensor's requires_grad does not change",
                    replacement=target.with_changes(attr=cst.Name("requires_grad")),
                )

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._check(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(node)
