"""loss-accumulates-graph: a running total of loss tensors that keeps every graph alive."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import (
    LOOPS,
    calls_within,
    dotted_name,
    enclosing_scope,
    innermost,
    is_method_call,
    method_name,
    receiver,
    within,
)
from repairbot.codemod import method_call
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid
from repairbot.types import Applicability

# calls that turn a tensor into a number or a detached tensor
_DETACHING = ("item", "detach", "cpu", "numpy", "tolist", "float", "data")


class LossAccumulatesGraph(LintRule):
    """Finds ``total += loss`` in a training loop, where ``loss`` still carries its autograd graph.

    What it finds:
        In a loop that calls ``backward()``, an accumulation ``total += loss`` (or ``total =
        total + loss``, or ``total += loss * n``) of a variable that is the loop's loss: the
        receiver of ``.backward()`` there, or a name containing ``loss``. Not reported when the
        loop turns the loss into a number first (``loss = loss.item()``), nor when the total
        itself is back-propagated (gradient accumulation through a summed loss is deliberate).

    Why it matters:
        Adding tensors that require grad builds a new graph node each time, and the total keeps
        every iteration's graph (and its saved activations) alive until the total is dropped:
        memory grows with every batch until the epoch ends or the process runs out of it.

    Fix safety:
        The fix accumulates ``loss.item()``, a plain number. Safe when the total is used as a
        number afterwards; unsafe when the code calls tensor methods on it (``total.item()``,
        ``total.cpu()``) or passes it to a torch function, which then get a float.

    Not handled:
        Losses appended to a list (``losses.append(loss)``), or accumulated in a dict.
    """

    ID = "loss-accumulates-graph"
    SEVERITY = Severity.WARNING
    TITLE = "A running total of loss tensors that keeps every autograd graph alive"
    MESSAGE = "the running total keeps every iteration's autograd graph alive"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"backward", b"+")  # `total = total+loss` has no spaces

    VALID = (
        Valid("""
            import torch
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                total += loss.item()
        """),
        Valid("""
            import torch
            total = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                total += loss
            total.backward()
        """),
        Valid("""
            import torch
            running = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                loss = loss.detach()
                running += loss
        """),
        Valid("""
            import torch
            for x, y in loader:
                count += 1
                loss.backward()
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def train(model, loader):
                running_loss = 0.0
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss
                return running_loss / len(loader)
            """,
            line=8, column=9, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            def train(model, loader):
                running_loss = 0.0
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss.item()
                return running_loss / len(loader)
            """,
        ),
        Invalid(
            """
            import torch
            epoch_loss = 0
            for x, y in loader:
                l = model(x, y)
                l.backward()
                epoch_loss = epoch_loss + l * x.size(0)
            print(epoch_loss.item())
            """,
            line=6, column=5, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            epoch_loss = 0
            for x, y in loader:
                l = model(x, y)
                l.backward()
                epoch_loss = epoch_loss + l.item() * x.size(0)
            print(epoch_loss.item())
            """,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        # (the statement, the total's name, the loss Name node, the loop, the enclosing scope)
        self.candidates: list[tuple[cst.CSTNode, str, cst.Name, cst.CSTNode, cst.CSTNode]] = []

    def _candidate(self, statement: cst.CSTNode, total: cst.BaseExpression, added: cst.BaseExpression) -> None:
        name = dotted_name(total)
        loss = _loss_term(added)
        loop = innermost(self.context.stack, LOOPS)
        if name is None or loss is None or loop is None:
            return
        self.candidates.append((statement, name, loss, loop, enclosing_scope(self.context.stack)))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.AddAssign):
            self._candidate(node, node.target, node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if len(node.targets) == 1 and isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
            total = dotted_name(node.targets[0].target)
            if total is not None and dotted_name(value.left) == total:
                self._candidate(node, node.targets[0].target, value.right)

    def leave_Module(self, node: cst.Module) -> None:
        for statement, total, loss, loop, scope in self.candidates:
            backward = [receiver(c) for c in calls_within(loop) if is_method_call(c, "backward")]
            if not backward:
                continue  # not a training loop
            losses = {dotted_name(r) for r in backward if r is not None}
            if loss.value not in losses and "loss" not in loss.value.lower():
                continue
            if _detached_in(loop, loss.value) or total in losses or _backpropagated(scope, total):
                continue
            self.report(
                statement,
                f"`{total}` adds up `{loss.value}` with its autograd graph: every iteration's graph stays "
                f"alive through it and memory grows each step; accumulate `{loss.value}.item()`",
                replacement=method_call(loss, "item"),
                target=loss,
                applicability=Applicability.UNSAFE if _used_as_tensor(self.context, scope, total) else Applicability.SAFE,
            )


def _loss_term(added: cst.BaseExpression) -> cst.Name | None:
    """The loss variable added: ``loss``, or a factor of ``loss * n`` / ``loss / n``."""
    if isinstance(added, cst.Name):
        return added
    if isinstance(added, cst.BinaryOperation) and isinstance(added.operator, cst.Multiply | cst.Divide):
        for side in (added.left, added.right):
            if isinstance(side, cst.Name):
                return side
    return None


def _detached_in(loop: cst.CSTNode, name: str) -> bool:
    """Whether the loop rebinds the loss to a number or a detached tensor (``loss = loss.item()``)."""
    for node in within(loop):
        if isinstance(node, cst.Assign) and any(dotted_name(t.target) == name for t in node.targets):
            value = node.value
            if isinstance(value, cst.Call) and (
                method_name(value) in _DETACHING or dotted_name(value.func) in ("float", "int")
            ):
                return True
    return False


def _backpropagated(scope: cst.CSTNode, total: str) -> bool:
    for call in calls_within(scope):
        if is_method_call(call, "backward"):
            backpropagated = receiver(call)
            if backpropagated is not None and dotted_name(backpropagated) == total:
                return True
    return False


def _used_as_tensor(context: FileContext, scope: cst.CSTNode, total: str) -> bool:
    """Whether code calls methods of the total, or hands it to torch."""
    for node in within(scope):
        if isinstance(node, cst.Attribute) and dotted_name(node.value) == total:
            return True
        if (
            isinstance(node, cst.Call) and (context.qualify(node.func) or "").startswith("torch")
            and any(dotted_name(arg.value) == total for arg in node.args)
        ):
            return True
    return False
