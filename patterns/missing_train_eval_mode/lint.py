"""missing-train-eval-mode: ``model.eval()`` in a training loop that never returns to ``train()``."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from repairbot.codemod import dotted_name
from repairbot.lint.analysis import LOOPS, SCOPES, is_false, is_method_call
from repairbot.lint.rule import FileContext, Invalid, LintRule, Valid


@dataclass
class _Summary:
    """What a function, or a loop, calls (nested functions aside)."""

    evals: list[cst.Call] = field(default_factory=list)  # x.eval(), x.train(False)
    trains: list[cst.Call] = field(default_factory=list)  # x.train(), x.train(True)
    backward: bool = False
    calls: list[cst.Call] = field(default_factory=list)  # calls of plain or self. functions


def _callee(call: cst.Call) -> str | None:
    """The function a call names: ``validate`` for ``validate(...)`` and ``self.validate(...)``."""
    name = dotted_name(call.func)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    if not rest:
        return head
    return rest if head == "self" and "." not in rest else None


class MissingTrainEvalMode(LintRule):
    """Finds a training loop that switches the model to ``eval()`` and never back to ``train()``.

    What it finds:
        A loop (an epoch loop) that trains (calls ``backward()``, or a function of this file
        that does) and evaluates (calls ``model.eval()``, or a function of this file that calls
        ``.eval()`` without calling ``.train()`` afterwards) but never calls ``model.train()``
        (itself or through a function of this file) anywhere in the loop.

    Why it matters:
        ``model.eval()`` stays in effect until ``model.train()``. From the second epoch on, the
        model trains in evaluation mode: dropout is off and batch-norm layers use (and stop
        updating) their running statistics. Training continues without an error and ends
        worse, or diverges.

    Fix safety:
        Reported without a fix: ``model.train()`` belongs at the top of the training part of
        the loop (or at the start of the training function), which is for the author to place.

    Not handled:
        Training or evaluation functions defined in other files (their mode switches are not
        visible here); a loop that calls ``.train()`` on a different model than the one it
        evaluates counts as switching back.
    """

    ID = "missing-train-eval-mode"
    TITLE = "model.eval() in a training loop that never switches back to train()"
    MESSAGE = "the model stays in eval mode for the rest of training"
    REQUIRES = (b".eval()",)

    VALID = (
        Valid("""
            import torch
            for epoch in range(10):
                model.train()
                for x, y in loader:
                    loss = model(x).sum()
                    loss.backward()
                model.eval()
                evaluate(model)
        """),
        Valid("""
            import torch
            def train_one_epoch(model, loader):
                model.train()
                for x in loader:
                    model(x).sum().backward()
            def validate(model, loader):
                model.eval()
                return [model(x) for x in loader]
            for epoch in range(5):
                train_one_epoch(model, loader)
                validate(model, val_loader)
        """),
        Valid("""
            import torch
            def validate(model):
                model.eval()
                score = compute(model)
                model.train()
                return score
            model.train()
            for epoch in range(5):
                for x in loader:
                    model(x).sum().backward()
                validate(model)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            model.train()
            for epoch in range(10):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    val = sum(criterion(model(x), y) for x, y in val_loader)
            """,
            line=8, column=5, message="model.eval()",
        ),
        Invalid(
            """
            import torch
            class Trainer:
                def train_epoch(self):
                    for x in self.loader:
                        self.model(x).sum().backward()
                def validate(self):
                    self.model.eval()
                    return [self.model(x) for x in self.val_loader]
                def fit(self):
                    self.model.train()
                    for epoch in range(3):
                        self.train_epoch()
                        self.validate()
            """,
            line=13, column=13, message="self.validate()",
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.functions: dict[str, _Summary] = {}
        self.loops: dict[cst.CSTNode, _Summary] = {}

    def visit_Call(self, node: cst.Call) -> None:
        summaries = []
        for ancestor in reversed(self.context.stack[:-1]):
            if isinstance(ancestor, LOOPS):
                summaries.append(self.loops.setdefault(ancestor, _Summary()))
            elif isinstance(ancestor, cst.FunctionDef):
                summaries.append(self.functions.setdefault(ancestor.name.value, _Summary()))
                break
            elif isinstance(ancestor, SCOPES):
                break
        if not summaries:
            return
        for summary in summaries:
            if is_method_call(node, "eval") and not node.args:
                summary.evals.append(node)
            elif is_method_call(node, "train"):
                (summary.evals if node.args and is_false(node.args[0].value) else summary.trains).append(node)
            elif is_method_call(node, "backward"):
                summary.backward = True
            elif _callee(node) is not None:
                summary.calls.append(node)

    def _function(self, call: cst.Call) -> _Summary | None:
        name = _callee(call)
        return self.functions.get(name) if name else None

    def leave_Module(self, node: cst.Module) -> None:
        reported: set[cst.CSTNode] = set()
        for summary in self.loops.values():
            called = [(c, f) for c in summary.calls if (f := self._function(c)) is not None]
            trains = summary.backward or any(f.backward for _, f in called)
            switches_back = summary.trains or any(f.trains for _, f in called)
            if not trains or switches_back:
                continue
            evaluation = summary.evals[:1] or [c for c, f in called if f.evals and not f.trains][:1]
            if not evaluation or evaluation[0] in reported:
                continue
            site = evaluation[0]
            reported.add(site)
            code = self.context.code(site)
            how = "" if is_method_call(site, "eval", "train") else " (it calls `.eval()` and never `.train()`)"
            self.report(
                site,
                f"`{code}` leaves the model in eval mode{how} and nothing in this training loop calls "
                "`.train()` again: from the next epoch on it trains with dropout off and batch-norm "
                "statistics frozen; call `model.train()` at the start of each epoch's training",
            )
