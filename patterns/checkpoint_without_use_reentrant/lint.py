"""checkpoint-without-use-reentrant: activation checkpointing that leaves its variant to a
default PyTorch is about to remove."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import argument, keyword_arg
from repairbot.codemod import append_keyword
from repairbot.lint.rule import Invalid, LintRule, Scope, Severity, Valid
from repairbot.types import Applicability

_CHECKPOINTS = {"torch.utils.checkpoint.checkpoint": None, "torch.utils.checkpoint.checkpoint_sequential": 3}


class CheckpointWithoutUseReentrant(LintRule):
    """Finds ``torch.utils.checkpoint.checkpoint(...)`` calls that do not pass ``use_reentrant``.

    What it finds:
        Calls of ``torch.utils.checkpoint.checkpoint`` and ``checkpoint_sequential`` (under any
        import alias, ``from torch.utils.checkpoint import checkpoint as ckpt`` included)
        without a ``use_reentrant`` argument.

    Why it matters:
        The two variants differ (the reentrant one ignores inputs that do not require grad,
        does not support ``torch.autograd.grad`` or keyword arguments, and can silently compute
        no gradient for the parameters inside when no input requires grad). PyTorch warns on
        every call that leaves the choice to the default and has announced it will raise
        instead; the documentation recommends ``use_reentrant=False``.

    Fix safety:
        The fix writes ``use_reentrant=True``: today's default made explicit, so the behaviour
        stays exactly as it is and the warning (and the future error) goes. Safe. Moving to
        the recommended ``use_reentrant=False`` is a behaviour change left to the author.

    Not handled:
        Calls that forward ``**kwargs``; checkpoint wrappers of other libraries.

    Differs from TorchFix:
        The fix writes ``use_reentrant=True`` where TorchFix's writes ``use_reentrant=False``,
        because ``False`` switches to the other implementation (different gradients when no
        input requires grad, different RNG and hook behaviour): a fix that changes what the
        code computes is not one to apply unasked. The message recommends ``False``.
    """

    ID = "checkpoint-without-use-reentrant"
    SEVERITY = Severity.WARNING
    TITLE = "torch.utils.checkpoint without an explicit use_reentrant"
    SCOPE = Scope.STATEMENT  # each finding reads its own statement and the imports alone
    MESSAGE = "checkpoint without use_reentrant"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"checkpoint",)  # not `checkpoint(`: `from ... import checkpoint as ckpt; ckpt(f, x)`

    VALID = (
        Valid("""
            import torch.utils.checkpoint as cp
            y = cp.checkpoint(block, x, use_reentrant=False)
            z = cp.checkpoint_sequential(blocks, 2, x, False)
            w = cp.checkpoint(block, x, **options)
        """),
    )
    INVALID = (
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint as ckpt
            h = ckpt(block, h)
            """,
            line=2, column=5, fix=Applicability.SAFE,
            expected_fix="""
            from torch.utils.checkpoint import checkpoint as ckpt
            h = ckpt(block, h, use_reentrant=True)
            """,
        ),
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint
            h = checkpoint(self.layer, h)
            """,
            line=2, column=5, fix=Applicability.SAFE, message="use_reentrant=False",
            expected_fix="""
            from torch.utils.checkpoint import checkpoint
            h = checkpoint(self.layer, h, use_reentrant=True)
            """,
        ),
        Invalid(
            """
            import torch
            out = torch.utils.checkpoint.checkpoint_sequential(
                model.layers,
                4,
                x,
            )
            """,
            line=2, column=7, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            out = torch.utils.checkpoint.checkpoint_sequential(
                model.layers,
                4,
                x,
                use_reentrant=True,
            )
            """,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualify(node.func)
        if qualified not in _CHECKPOINTS or any(arg.star == "**" for arg in node.args):
            return
        position = _CHECKPOINTS[qualified]
        given = argument(node, position, "use_reentrant") if position is not None else keyword_arg(node, "use_reentrant")
        if given is not None:
            return
        self.report(
            node,
            f"`{self.context.code(node.func)}(...)` leaves `use_reentrant` to a default that PyTorch warns "
            "about and will stop accepting: pass it (use_reentrant=False is recommended; True keeps "
            "today's behaviour)",
            replacement=append_keyword(node, "use_reentrant", cst.Name("True")),
        )
