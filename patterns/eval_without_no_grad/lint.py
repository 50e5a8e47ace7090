"""eval-without-no-grad: an evaluation loop that builds autograd graphs for nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import libcst as cst

from repairbot.analysis import (
    LOOPS,
    SCOPES,
    calls_within,
    decorated_no_grad,
    dotted_name,
    is_method_call,
    model_like,
    receiver,
    with_grad_mode,
)
from repairbot.cst_walk import children
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid

_WORDS = r"eval|evaluate|evaluation|validate|validation|valid|val|test|testing|inference|predict"
_PARTS = r"epoch|one_epoch|loop|step|model|fn|func|loader|batch|batches|all|set|data|dataset|once"
# `evaluate`, `validate_one_epoch`, `run_validation`, `test` (not pytest's `test_conv2d`)
EVAL_FUNCTION = re.compile(rf"^_*(?:(?:run|do|model|epoch)_)?(?:{_WORDS})(?:_(?:{_PARTS}))*$")
# `.eval()`, or a def of an evaluation function
_MAY_EVALUATE = re.compile(rf"\beval\b|\bdef\s+_*(?:(?:run|do|model|epoch)_)?(?:{_WORDS})(?:_(?:{_PARTS}))*\s*\(".encode())
_LOOPING = (*LOOPS, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# the LightningModule hooks Lightning's validation, test and predict loops call with gradients off
_LIGHTNING_NO_GRAD = ("validation_step", "test_step", "predict_step", "on_validation_epoch_end",
                      "on_test_epoch_end", "on_validation_batch_end", "on_test_batch_end")


class EvalWithoutNoGrad(LintRule):
    """Finds a model called in an evaluation loop outside ``torch.no_grad()``.

    What it finds:
        In a function named like an evaluation (``evaluate``, ``validate``, ``val_epoch``,
        ``test``, ``run_validation``...), or in the statements that follow ``model.eval()``
        in any body (up to a ``model.train()``), a call of the model (the object ``.eval()``
        was called on, or a ``model``/``net``-like name) inside a loop, not under ``with
        torch.no_grad()`` / ``torch.inference_mode()`` / ``torch.set_grad_enabled(False)``
        and not in a function decorated with one of them. A function whose every call in the
        file is under ``no_grad`` is not reported, nor a loop that calls ``backward()``.

    Why it matters:
        ``model.eval()`` only switches dropout and batch-norm to inference behaviour; autograd
        still records a graph for every batch and keeps the activations it needs. Evaluation
        then takes more memory (often enough to run out of it on the validation set) and
        more time, and the outputs carry ``requires_grad`` into metrics code.

    Fix safety:
        Reported without a fix: wrapping the loop in ``with torch.no_grad():`` re-indents code,
        and a loop that needs gradients (saliency maps, test-time adaptation) must stay as it is.

    Silent in a LightningModule's ``validation_step``, ``test_step``, ``predict_step`` and
    their epoch/batch-end hooks: Lightning's loops run them with gradients off.

    Not handled:
        A no-grad region opened by a caller in another file; models called through helpers;
        evaluation code outside loops (a single forward pass costs little).
    """

    ID = "eval-without-no-grad"
    SEVERITY = Severity.INFORMATION
    TITLE = "An evaluation loop that records autograd graphs (no torch.no_grad())"
    MESSAGE = "the model runs in an evaluation loop without torch.no_grad()"

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        return _MAY_EVALUATE.search(data) is not None

    VALID = (
        Valid("""
            import torch
            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    for x, y in loader:
                        out = model(x)
        """),
        Valid("""
            import torch
            @torch.inference_mode()
            def validate(net, loader):
                for x in loader:
                    net(x)
        """),
        Valid("""
            import torch
            def evaluate(model, loader):
                outputs = []
                for x in loader:
                    outputs.append(model(x))
                return outputs
            with torch.no_grad():
                scores = evaluate(model, loader)
        """),
        Valid("""
            import torch
            def test_forward_shape():
                model = Net()
                for size in (1, 2):
                    assert model(torch.ones(size, 3)).shape[0] == size
        """),
        Valid("""
            import torch
            model.eval()
            for x, y in loader:
                saliency = model(x.requires_grad_()).max().backward()
        """),
        # Lightning runs validation_step under no_grad/inference_mode
        Valid("""
            import torch
            import lightning as L
            class Lit(L.LightningModule):
                def validation_step(self, batch, batch_idx):
                    self.net.eval()
                    for chunk in batch:
                        self.log("val", self.net(chunk).sum())
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def evaluate(model, loader):
                model.eval()
                correct = 0
                for x, y in loader:
                    correct += (model(x).argmax(1) == y).sum().item()
                return correct
            """,
            line=6, column=21, message="model(x)",
        ),
        Invalid(
            """
            import torch
            model.train()
            for x, y in train_loader:
                pass
            model.eval()
            for x, y in val_loader:
                logits = model(x)
            """,
            line=7, column=14,
        ),
        Invalid(
            """
            import torch
            class Trainer:
                def run_validation(self):
                    losses = []
                    for batch in self.val_loader:
                        losses.append(self.loss(self.model(batch), batch))
                    return losses
            """,
            line=6, column=37,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.candidates: list[tuple[str | None, cst.Call]] = []  # (function name, the model call)
        self.calls: dict[str, list[bool]] = {}  # function name -> whether each call of it is under no_grad
        self.grad_off = [False]

    # whether gradients are off where the walk is: a stack pushed by functions and `with` blocks
    def visit_Call(self, node: cst.Call) -> None:
        name = dotted_name(node.func)
        if name is not None:
            self.calls.setdefault(name.rsplit(".", 1)[-1], []).append(self.grad_off[-1])

    def visit_With(self, node: cst.With) -> None:
        mode = with_grad_mode(node, self.context.qualify)  # the innermost switch decides (enable_grad inside)
        self.grad_off.append(self.grad_off[-1] if mode is None else not mode)

    def leave_With(self, node: cst.With) -> None:
        self.grad_off.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.grad_off.append(False)  # its body runs when it is called

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.grad_off.pop()

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.grad_off.pop()

    def _runs_without_grad(self, function: cst.FunctionDef) -> bool:
        """Decorated with no_grad, or a LightningModule hook Lightning's evaluation loop runs
        under no_grad/inference_mode."""
        return decorated_no_grad(self.context, function) or self.context.lightning_hook(*_LIGHTNING_NO_GRAD) is not None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        off = self._runs_without_grad(node)
        self.grad_off.append(off)
        if not off and EVAL_FUNCTION.match(node.name.value) and isinstance(node.body, cst.IndentedBlock):
            self._zone(node.name.value, node.body.body, None)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        function = next((n for n in reversed(self.context.stack) if isinstance(n, cst.FunctionDef)), None)
        if function is not None and self._runs_without_grad(function):
            return
        self._after_eval(function.name.value if function else None, node.body)

    def visit_Module(self, node: cst.Module) -> None:
        self._after_eval(None, node.body)

    def _after_eval(self, function: str | None, body: Sequence[cst.CSTNode]) -> None:
        """The statements after a ``model.eval()`` statement of ``body``."""
        for index, statement in enumerate(body):
            model = _eval_statement(statement)
            if model is not None:
                self._zone(function, body[index + 1:], {model})
                return

    def _zone(self, function: str | None, body: Sequence[cst.CSTNode], models: set[str] | None) -> None:
        """Report the first model call in a loop of ``body`` that runs with gradients on."""
        statements = []
        for statement in body:
            if models is not None and _train_statement(statement) in models:
                break
            eval_model = _eval_statement(statement)
            if eval_model is not None:
                models = {*(models or set()), eval_model}
            statements.append(statement)
        if any(_calls_backward(s) for s in statements):
            return
        for statement in statements:
            for call in self._grad_calls(statement):
                name = dotted_name(call.func) or ""
                if (name in models) if models else model_like(name):
                    if all(call is not seen for _, seen in self.candidates):
                        self.candidates.append((function, call))
                    return

    def _grad_calls(self, statement: cst.CSTNode) -> Iterator[cst.Call]:
        """Calls inside a loop of ``statement`` that run with gradients on (pre-order)."""
        todo: list[tuple[cst.CSTNode, bool]] = [(statement, False)]
        while todo:
            node, in_loop = todo.pop()
            if isinstance(node, SCOPES):
                continue
            if isinstance(node, cst.With) and with_grad_mode(node, self.context.qualify) is False:
                continue
            if isinstance(node, cst.Call) and in_loop:
                yield node
            inner = in_loop or isinstance(node, _LOOPING)
            todo.extend((child, inner) for child in reversed(children(node)))

    def leave_Module(self, node: cst.Module) -> None:
        for function, call in self.candidates:
            sites = self.calls.get(function or "", [])
            if function is not None and sites and all(sites):
                continue  # every caller in this file runs it under no_grad
            self.report(
                call,
                f"`{self.context.code(call)}` runs in an evaluation loop without torch.no_grad(): autograd "
                "records a graph for every batch (memory and time for nothing); wrap the loop in "
                "`with torch.no_grad():`",
            )


def _method_statement(statement: cst.CSTNode, method: str, args_ok: bool) -> str | None:
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    for small in statement.body:
        if isinstance(small, cst.Expr) and is_method_call(small.value, method):
            call = small.value
            assert isinstance(call, cst.Call)
            if call.args and not args_ok:
                continue
            owner = receiver(call)
            return dotted_name(owner) if owner is not None else None
    return None


def _eval_statement(statement: cst.CSTNode) -> str | None:
    """``model`` for a ``model.eval()`` statement."""
    return _method_statement(statement, "eval", args_ok=False)


def _train_statement(statement: cst.CSTNode) -> str | None:
    return _method_statement(statement, "train", args_ok=True)


def _calls_backward(statement: cst.CSTNode) -> bool:
    return any(is_method_call(call, "backward") for call in calls_within(statement))
