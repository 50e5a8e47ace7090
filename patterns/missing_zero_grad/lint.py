"""missing-zero-grad: an optimizer loop whose gradients are never reset."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import (
    LOOPS,
    assigned_targets,
    calls_within,
    dotted_name,
    innermost,
    is_method_call,
    method_name,
    receiver,
    within,
)
from repairbot.codemod import method_call
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid
from repairbot.types import Applicability


def optimizer_like(name: str, optimizers: set[str]) -> bool:
    """An optimizer by its binding (``opt = torch.optim.SGD(...)``) or by its name."""
    if name in optimizers:
        return True
    last = name.rsplit(".", 1)[-1].lower()
    if "sched" in last:
        return False
    return "optim" in last or last == "opt" or last.startswith("opt_") or last.endswith("_opt")


def resets_gradients(node: cst.CSTNode) -> bool:
    """``x.zero_grad()`` (any receiver, ``set_to_none`` or not), a helper named like it,
    ``p.grad = None`` or ``p.grad.zero_()``."""
    if isinstance(node, cst.Call):
        name = method_name(node) or (node.func.value if isinstance(node.func, cst.Name) else "")
        if "zero_grad" in name:
            return True
        if name == "zero_" and "grad" in (dotted_name(receiver(node) or cst.Name("_")) or ""):
            return True
    if isinstance(node, cst.Assign):
        return any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets
        ) and isinstance(node.value, cst.Name) and node.value.value == "None"
    return False


class MissingZeroGrad(LintRule):
    """Finds a training loop that calls ``backward()`` and ``step()`` but never resets the gradients.

    What it finds:
        A loop whose body (at any depth, nested functions aside) calls ``loss.backward()`` and
        ``optimizer.step()`` (or ``scaler.step(optimizer)``) with no ``zero_grad()`` call (on
        the optimizer or the model, ``set_to_none`` or not), no ``p.grad = None`` and no
        ``p.grad.zero_()`` anywhere in that loop. The optimizer is recognised by its
        construction (``torch.optim.*``) or by its name (``opt``, ``optimizer``...).

    Why it matters:
        ``backward()`` adds to ``.grad``; it never overwrites it. Without a reset, each step
        applies the sum of the gradients of every batch so far: the loss goes down for a
        while, then diverges, and nothing crashes.

    Fix safety:
        The fix inserts ``optimizer.zero_grad()`` as the first statement of the loop body. Safe
        when ``step()`` runs on every iteration; unsafe when it runs under a condition (a step
        every k batches is gradient accumulation, which needs the reset after the step
        instead). A loop written on one line is reported without a fix.

    Not handled:
        Gradients reset in a helper function whose name does not contain ``zero_grad``; a
        reset before the loop (it still accumulates across iterations, so it is reported);
        optimizers hidden behind other names (``self.opt_g``... are recognised by name only).
    """

    ID = "missing-zero-grad"
    SEVERITY = Severity.WARNING
    TITLE = "A training loop that never resets the gradients it accumulates"
    MESSAGE = "gradients are never reset in this loop"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"backward", b"step")

    VALID = (
        Valid("""
            import torch.distributed.autograd as dist_autograd
            from torch.distributed.optim import DistributedOptimizer
            opt = DistributedOptimizer(torch.optim.SGD, params, lr=0.03)
            for x, y in loader:
                with dist_autograd.context() as context_id:
                    loss = criterion(model(x), y)
                    dist_autograd.backward(context_id, [loss])
                    opt.step(context_id)
        """),
        Valid("""
            import torch
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        """),
        Valid("""
            import torch
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        """),
        Valid("""
            import torch
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / accumulation
                loss.backward()
                if (step + 1) % accumulation == 0:
                    optimizer.step()
                    model.zero_grad()
        """),
        Valid("""
            import torch
            for epoch in range(10):
                for x, y in loader:
                    for p in model.parameters():
                        p.grad = None
                    criterion(model(x), y).backward()
                    opt.step()
                scheduler.step()
        """),
        Valid("""
            import torch
            for x, y in loader:
                scaler.scale(criterion(model(x), y)).backward()
                scheduler.step()
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
            line=2, column=1, fix=Applicability.SAFE, message="optimizer.zero_grad()",
            expected_fix="""
            import torch
            for x, y in loader:
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
        ),
        Invalid(
            """
            import torch
            opt = torch.optim.Adam(model.parameters())
            for epoch in range(3):
                opt.zero_grad()
                for batch in loader:
                    # forward
                    loss = model(batch).mean()
                    loss.backward()
                    opt.step()
            """,
            line=5, column=5, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            opt = torch.optim.Adam(model.parameters())
            for epoch in range(3):
                opt.zero_grad()
                for batch in loader:
                    opt.zero_grad()
                    # forward
                    loss = model(batch).mean()
                    loss.backward()
                    opt.step()
            """,
        ),
        Invalid(
            """
            import torch
            for i, (x, y) in enumerate(loader):
                scaler.scale(loss_fn(net(x), y)).backward()
                if i % 4 == 3:
                    scaler.step(self.optimizer)
                    scaler.update()
            """,
            line=2, column=1, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            for i, (x, y) in enumerate(loader):
                self.optimizer.zero_grad()
                scaler.scale(loss_fn(net(x), y)).backward()
                if i % 4 == 3:
                    scaler.step(self.optimizer)
                    scaler.update()
            """,
        ),
        Invalid(
            """
            import torch
            while True:
                x = next(it); loss = model(x).sum(); loss.backward(); optim.step()
            """,
            line=2, column=1, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            while True:
                optim.zero_grad()
                x = next(it); loss = model(x).sum(); loss.backward(); optim.step()
            """,
        ),
        Invalid(
            """
            import torch
            for x in data: loss = model(x).sum(); loss.backward(); optimizer.step()
            """,
            line=2, column=1,
        ),
        # the loop builds the optimizer: at the top of its first iteration it does not exist yet
        Invalid(
            """
            import torch
            for i in range(3):
                model(x).sum().backward()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                opt.step()
            """,
            line=2, column=1,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.optimizers: set[str] = set()
        # (the step call, the optimizer expression, its loop, whether it runs under a condition)
        self.steps: list[tuple[cst.Call, cst.BaseExpression, cst.CSTNode, bool]] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call):
            qualified = self.context.qualify(node.value.func) or ""
            if qualified.startswith("torch.optim.") and qualified.rsplit(".", 1)[-1][:1].isupper():
                self.optimizers.update(d for t in node.targets if (d := dotted_name(t.target)))

    def visit_Call(self, node: cst.Call) -> None:
        if not is_method_call(node, "step"):
            return
        owner = receiver(node)
        assert owner is not None
        owner_name = dotted_name(owner) or ""
        optimizer: cst.BaseExpression = owner
        if "scaler" in owner_name.rsplit(".", 1)[-1].lower() and node.args:
            optimizer = node.args[0].value  # GradScaler.step(optimizer)
        loop = innermost(self.context.stack, LOOPS)
        if loop is None:
            return
        between = self.context.stack[self.context.stack.index(loop) + 1:-1]
        conditional = any(isinstance(n, cst.If | cst.IfExp | cst.Try | cst.Match) for n in between)
        self.steps.append((node, optimizer, loop, conditional))

    def _accumulates(self, call: cst.Call) -> bool:
        """A backward pass that adds to ``.grad`` (distributed autograd's keeps its gradients
        in the context of each ``with dist_autograd.context()``, nothing to reset)."""
        if self.context.is_torch(call.func, "torch.distributed.autograd.backward"):
            return False
        return is_method_call(call, "backward") or self.context.is_torch(call.func, "torch.autograd.backward")

    def leave_Module(self, node: cst.Module) -> None:
        reported: set[cst.CSTNode] = set()
        for _step, optimizer, loop, conditional in self.steps:
            name = dotted_name(optimizer)
            if loop in reported or name is None or not optimizer_like(name, self.optimizers):
                continue
            if not any(self._accumulates(c) for c in calls_within(loop)):
                continue
            if any(resets_gradients(n) for n in within(loop)):
                continue
            reported.add(loop)
            assert isinstance(loop, cst.For | cst.While)
            message = (
                f"`{name}.step()` runs in this loop but nothing resets the gradients that `backward()` "
                f"adds to: each step applies the sum of every batch so far; call `{name}.zero_grad()` "
                "at the top of the loop"
            )
            if not isinstance(loop.body, cst.IndentedBlock) or _bound_in(loop, name):
                # a one-line body has no top to insert at; an optimizer the loop itself builds
                # does not exist yet at the top of its first iteration
                self.report(loop, message)
                continue
            reset = cst.SimpleStatementLine(
                body=[cst.Expr(method_call(cst.parse_expression(name), "zero_grad"))]
            )
            body = loop.body.with_changes(body=[reset, *loop.body.body])
            self.report(
                loop, message, replacement=body, target=loop.body,
                applicability=Applicability.UNSAFE if conditional else Applicability.SAFE,
            )


def _bound_in(loop: cst.For | cst.While, name: str) -> bool:
    """Whether the loop (its target included) assigns ``name`` or the name it starts from."""
    heads = {name, name.split(".")[0]}
    if isinstance(loop, cst.For) and any(
        isinstance(n, cst.Name | cst.Attribute) and dotted_name(n) in heads for n in within(loop.target)
    ):
        return True
    for node in within(loop.body):
        if isinstance(node, cst.Assign | cst.AnnAssign | cst.AugAssign | cst.NamedExpr | cst.WithItem):
            targets = assigned_targets(node) if not isinstance(node, cst.NamedExpr | cst.WithItem) else (
                [node.target] if isinstance(node, cst.NamedExpr) else [node.asname.name] if node.asname else [])
            if any(dotted_name(t) in heads for t in targets if isinstance(t, cst.BaseExpression)):
                return True
    return False
