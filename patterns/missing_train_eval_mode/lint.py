"""missing-train-eval-mode: ``model.eval()`` in a training loop that never returns to ``train()``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from repairbot.analysis import (
    LOOPS,
    SCOPES,
    dotted_name,
    is_false,
    is_method_call,
    last_name,
    receiver,
)
from repairbot.cst_walk import descendants
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid


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
        (itself or through a function of this file) anywhere in the loop. Silent when the
        model is built from a class of this file that has no layer the mode changes (no
        dropout, no batch or instance norm, nothing built by code of another file).

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
    SEVERITY = Severity.WARNING
    TITLE = "model.eval() in a training loop that never switches back to train()"
    MESSAGE = "the model stays in eval mode for the rest of training"
    REQUIRES = ((b"eval", b"train"),)  # `.eval( )` and `.train(False)` switch to eval mode too

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
        # the model's class has no dropout or batch norm: eval() changes nothing
        Valid("""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)
                def forward(self, x):
                    return torch.relu(self.fc(x.view(-1, 4)))
            model = Net().to(device)
            for epoch in range(10):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                model.eval()
                evaluate(model)
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
        Invalid(
            """
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
            model = Net()
            for epoch in range(10):
                for x, y in loader:
                    criterion(model(x), y).backward()
                model.eval()
            """,
            line=11, column=5, message="dropout off",
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
            evaluated = summary.evals or [e for _, f in called for e in f.evals]
            if evaluated and all(self._mode_free(e) for e in evaluated):
                continue  # the model's own class has no layer that train() and eval() tell apart
            reported.add(site)
            code = self.context.code(site)
            how = "" if is_method_call(site, "eval", "train") else " (it calls `.eval()` and never `.train()`)"
            self.report(
                site,
                f"`{code}` leaves the model in eval mode{how} and nothing in this training loop calls "
                "`.train()` again: from the next epoch on it trains with dropout off and batch-norm "
                "statistics frozen; call `model.train()` at the start of each epoch's training",
            )

    def _mode_free(self, evaluation: cst.Call) -> bool:
        """Whether the module ``evaluation`` switches (``model`` of ``model.eval()``) is built,
        in this file, from a class of this file whose layers behave the same in both modes (no
        dropout, no batch norm, nothing built elsewhere)."""
        owner = last_name(receiver(evaluation) or cst.Name("_"))
        classes = _classes(self.context.module)
        built = {_built_class(value) for name, value in _assignments(self.context.module) if name == owner}
        if not built or None in built or not built <= classes.keys():
            return False
        return all(_class_mode_free(name, classes, set()) for name in built if name is not None)


# layers whose output differs between train() and eval(), and code that reads the mode
_MODE_WORDS = re.compile(r"dropout|batchnorm|instancenorm|rrelu|\.training\b|alpha_?dropout", re.IGNORECASE)
_BUILTINS = frozenset({"super", "range", "len", "int", "float", "list", "tuple", "dict", "zip", "enumerate",
                       "isinstance", "getattr", "setattr", "print", "min", "max", "sum", "abs", "round"})


def _classes(module: cst.Module) -> dict[str, cst.ClassDef]:
    return {node.name.value: node for node in descendants(module) if isinstance(node, cst.ClassDef)}


def _assignments(module: cst.Module) -> list[tuple[str | None, cst.BaseExpression]]:
    """(the last name of each assignment target, the value assigned) across the file."""
    found: list[tuple[str | None, cst.BaseExpression]] = []
    for node in descendants(module):
        if isinstance(node, cst.Assign):
            found.extend((last_name(target.target), node.value) for target in node.targets)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            found.append((last_name(node.target), node.value))
    return found


def _built_class(value: cst.BaseExpression) -> str | None:
    """``Net`` for ``Net(...)``, ``Net(...).to(device)``, ``Net().cuda().eval()``."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
        value = value.func.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        return value.func.value
    return None


def _class_mode_free(name: str, classes: dict[str, cst.ClassDef], seen: set[str]) -> bool:
    if name in seen:
        return True
    seen.add(name)
    node = classes[name]
    if _MODE_WORDS.search(cst.Module(body=[node]).code):
        return False
    for base in node.bases:
        base_name = dotted_name(base.value) or ""
        if base_name in classes:
            if not _class_mode_free(base_name, classes, seen):
                return False
        elif base_name.rsplit(".", 1)[-1] != "Module":
            return False  # a base built elsewhere: its layers are not visible here
    parameters = {p.name.value for f in descendants(node) if isinstance(f, cst.FunctionDef)
                  for p in f.params.params if p.name.value != "self"}
    for item in descendants(node):
        if isinstance(item, cst.Call):
            callee = dotted_name(item.func) or ""
            head = callee.split(".")[0]
            if callee in classes:
                if not _class_mode_free(callee, classes, seen):
                    return False
            elif head in ("nn", "torch", "F", "self") or callee in _BUILTINS or not callee:
                continue
            elif head in parameters:
                continue  # a tensor argument's methods (`x.view(...)`)
            else:
                return False  # a module built by code of another file (a backbone, timm...)
        elif (isinstance(item, cst.Assign) and isinstance(item.value, cst.Name) and item.value.value in parameters
              and any(isinstance(t.target, cst.Attribute) for t in item.targets)):
            return False  # `self.encoder = encoder`: a module handed in, of any kind
    return True
