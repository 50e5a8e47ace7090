"""softmax-before-cross-entropy: probabilities where the loss expects logits."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.codemod import argument, dotted_name, remove_arg
from repairbot.lint.analysis import assigned_targets, enclosing_scope, is_method_call, within
from repairbot.lint.rule import FileContext, Invalid, LintRule, Valid
from repairbot.types import Applicability

_SOFTMAX_FUNCTIONS = ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax")
_CROSS_ENTROPY = ("torch.nn.functional.cross_entropy",)
_CROSS_ENTROPY_MODULE = ("torch.nn.CrossEntropyLoss",)
_SOFTMAX_MODULE = ("torch.nn.Softmax",)


# where logits came out of a softmax: (the softmax, its replacement, the node it replaces, the fix's label)
_Source = tuple[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel, cst.CSTNode, Applicability]


@dataclass
class _Binding:
    """``name = value`` at its place in the walk (the walk visits statements in source order)."""

    name: str
    value: cst.BaseExpression
    order: int
    scope: cst.CSTNode


class SoftmaxBeforeCrossEntropy(LintRule):
    """Finds ``softmax`` applied to the logits that ``cross_entropy`` / ``CrossEntropyLoss`` receives.

    What it finds:
        The input of ``F.cross_entropy(...)``, of a ``nn.CrossEntropyLoss()`` criterion or of
        ``nn.CrossEntropyLoss()(...)`` that comes from a softmax: written in the call
        (``criterion(F.softmax(out, 1), y)``), assigned just before it in the same function
        (``probs = out.softmax(1)``), returned by the ``forward`` of a model class of the same
        file (``return F.softmax(x, dim=1)``, ``return self.softmax(x)``), or the last layer of
        an ``nn.Sequential`` model.

    Why it matters:
        ``cross_entropy`` applies ``log_softmax`` to its input itself. Fed probabilities, it
        computes the log-softmax of values in [0, 1]: the loss barely moves, the gradients
        nearly vanish, and the model trains slowly or not at all, without an error.

    Fix safety:
        The fix removes the softmax (keeping its input). Safe when the softmax is written in the
        loss call, or assigned to a variable that nothing else reads. Unsafe when its output is
        used elsewhere (accuracy, logging), when it is the model's ``forward`` (every caller,
        inference included, gets logits from then on), or a layer of an ``nn.Sequential``.

    Not handled:
        A model built in another file; a softmax reached through other helpers or containers;
        ``log_softmax`` before ``nll_loss`` (correct) or before ``cross_entropy`` (harmless:
        log-softmax is idempotent).
    """

    ID = "softmax-before-cross-entropy"
    TITLE = "Softmax applied to the logits that cross-entropy receives"
    MESSAGE = "cross_entropy receives softmax probabilities, not logits"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = ((b"softmax", b"Softmax"), (b"cross_entropy", b"CrossEntropyLoss"))

    VALID = (
        Valid("""
            import torch.nn.functional as F
            loss = F.cross_entropy(model(x), y)
            probs = F.softmax(model(x), dim=1)
        """),
        Valid("""
            import torch
            from torch import nn
            criterion = nn.NLLLoss()
            loss = criterion(torch.log_softmax(out, dim=1), y)
        """),
        Valid("""
            import torch
            import torch.nn.functional as F
            def step(out, y):
                probs = F.softmax(out, 1)
                probs = out
                return F.cross_entropy(probs, y)
        """),
        Valid("""
            import torch.nn as nn
            model = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))
            criterion = nn.CrossEntropyLoss()
            loss = criterion(other(x), y)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch.nn.functional as F
            loss = F.cross_entropy(F.softmax(logits, dim=1), labels)
            """,
            line=2, column=24, fix="safe",
            expected_fix="""
            import torch.nn.functional as F
            loss = F.cross_entropy(logits, labels)
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            criterion = nn.CrossEntropyLoss()
            def train_step(model, x, y):
                out = model(x).softmax(dim=-1)
                return criterion(out, y)
            """,
            line=5, column=11, fix="safe",
            expected_fix="""
            import torch
            from torch import nn
            criterion = nn.CrossEntropyLoss()
            def train_step(model, x, y):
                out = model(x)
                return criterion(out, y)
            """,
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            probs = torch.softmax(net(x), 1)
            loss = F.cross_entropy(probs, y)
            accuracy = (probs.argmax(1) == y).float().mean()
            """,
            line=3, column=9, fix="unsafe",
            expected_fix="""
            import torch
            import torch.nn.functional as F
            probs = net(x)
            loss = F.cross_entropy(probs, y)
            accuracy = (probs.argmax(1) == y).float().mean()
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)

                def forward(self, x):
                    return F.softmax(self.fc(x), dim=1)

            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(model(x), y)
            """,
            line=11, column=16, fix="unsafe",
            expected_fix="""
            import torch
            from torch import nn
            import torch.nn.functional as F

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)

                def forward(self, x):
                    return self.fc(x)

            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(model(x), y)
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            model = nn.Sequential(
                nn.Linear(4, 3),
                nn.Softmax(dim=1),
            )
            loss_fn = nn.CrossEntropyLoss()
            for x, y in loader:
                out = model(x)
                loss = loss_fn(out, y)
            """,
            line=4, column=5, fix="unsafe",
            expected_fix="""
            import torch.nn as nn
            model = nn.Sequential(
                nn.Linear(4, 3),
            )
            loss_fn = nn.CrossEntropyLoss()
            for x, y in loader:
                out = model(x)
                loss = loss_fn(out, y)
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(16, 4)
                    self.softmax = nn.Softmax(dim=-1)
                def forward(self, x):
                    return self.softmax(self.head(x))
            class Trainer:
                def __init__(self):
                    self.model = Classifier()
                    self.criterion = nn.CrossEntropyLoss()
                def step(self, x, y):
                    return self.criterion(self.model(x), y)
            """,
            line=9, column=16, fix="unsafe",
            expected_fix="""
            import torch
            from torch import nn
            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(16, 4)
                    self.softmax = nn.Softmax(dim=-1)
                def forward(self, x):
                    return self.head(x)
            class Trainer:
                def __init__(self):
                    self.model = Classifier()
                    self.criterion = nn.CrossEntropyLoss()
                def step(self, x, y):
                    return self.criterion(self.model(x), y)
            """,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.order = 0
        self.bindings: list[_Binding] = []
        self.by_name: dict[str, list[_Binding]] = {}
        self.losses: list[tuple[cst.Call, int, cst.CSTNode]] = []  # (loss call, order, scope)
        self.forward_returns: dict[str, list[cst.BaseExpression]] = {}  # class name -> returned values

    def _softmax_input(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The input of a softmax expression, else None."""
        if not isinstance(node, cst.Call):
            return None
        if self.context.is_torch(node.func, *_SOFTMAX_FUNCTIONS):
            arg = argument(node, 0, "input")
            return arg.value if arg is not None else None
        module = node.func
        if isinstance(module, cst.Call) and self.context.is_torch(module.func, *_SOFTMAX_MODULE):
            return node.args[0].value if node.args else None  # nn.Softmax(dim=1)(x)
        name = dotted_name(module)
        if name and any(self._bound_to(b, _SOFTMAX_MODULE) for b in self._bindings_of(name)):
            return node.args[0].value if node.args else None  # self.softmax(x)
        if is_method_call(node, "softmax") and isinstance(node.func, cst.Attribute):
            head = self.context.qualify(node.func.value)
            return None if head and head.startswith("torch") else node.func.value  # x.softmax(...)
        return None

    def _bindings_of(self, name: str) -> list[_Binding]:
        return self.by_name.get(name, [])

    def _bound_to(self, binding: _Binding, classes: tuple[str, ...]) -> bool:
        return isinstance(binding.value, cst.Call) and self.context.is_torch(binding.value.func, *classes)

    def _visit_assignment(self, node: cst.Assign | cst.AnnAssign) -> None:
        if node.value is None:
            return
        self.order += 1
        scope = enclosing_scope(self.context.stack)
        for target in assigned_targets(node):
            name = dotted_name(target)
            if name:
                binding = _Binding(name, node.value, self.order, scope)
                self.bindings.append(binding)
                self.by_name.setdefault(name, []).append(binding)

    # bindings are recorded on leaving: the calls in the value come before them
    def leave_Assign(self, node: cst.Assign) -> None:
        self._visit_assignment(node)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._visit_assignment(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.order += 1
        self.losses.append((node, self.order, enclosing_scope(self.context.stack)))

    def visit_Return(self, node: cst.Return) -> None:
        stack = self.context.stack
        if node.value is None or len(stack) < 4:
            return
        function = next((n for n in reversed(stack) if isinstance(n, cst.FunctionDef)), None)
        if function is None or function.name.value != "forward":
            return
        owner = stack[stack.index(function) - 2] if stack.index(function) >= 2 else None  # ClassDef > IndentedBlock > def
        if isinstance(owner, cst.ClassDef):
            self.forward_returns.setdefault(owner.name.value, []).append(node.value)

    def _is_loss(self, call: cst.Call) -> bool:
        if self.context.is_torch(call.func, *_CROSS_ENTROPY):
            return True
        if isinstance(call.func, cst.Call) and self.context.is_torch(call.func.func, *_CROSS_ENTROPY_MODULE):
            return True
        name = dotted_name(call.func)
        return bool(name) and any(self._bound_to(b, _CROSS_ENTROPY_MODULE) for b in self._bindings_of(name or ""))

    def _last_binding(self, name: str, order: int, scope: cst.CSTNode) -> _Binding | None:
        earlier = [b for b in self._bindings_of(name) if b.scope is scope and b.order < order]
        return earlier[-1] if earlier else None

    def leave_Module(self, node: cst.Module) -> None:
        reported: set[cst.CSTNode] = set()
        for call, order, scope in self.losses:
            if not self._is_loss(call):
                continue
            logits = argument(call, 0, "input")
            if logits is None:
                continue
            for softmax, replacement, target, applicability in self._sources(logits.value, order, scope):
                if softmax in reported:
                    continue
                reported.add(softmax)
                self.report(
                    softmax,
                    f"`{self.context.code(softmax)}` feeds probabilities to `{self.context.code(call.func)}`, "
                    "which applies log_softmax itself: the loss sees softmax twice and its gradients nearly "
                    "vanish; pass the logits",
                    replacement=replacement, target=target, applicability=applicability,
                )

    def _sources(
        self, value: cst.BaseExpression, order: int, scope: cst.CSTNode
    ) -> list[_Source]:
        """Where the logits came out of a softmax: (the softmax, its replacement, the node it
        replaces, the fix's applicability)."""
        direct = self._softmax_input(value)
        if direct is not None:
            return [(value, direct, value, Applicability.SAFE)]
        if isinstance(value, cst.Name):
            binding = self._last_binding(value.value, order, scope)
            if binding is None:
                return []
            source = self._softmax_input(binding.value)
            if source is not None:
                reads = sum(
                    isinstance(n, cst.Name) and n.value == value.value for n in within(scope)
                ) - len([b for b in self._bindings_of(value.value) if b.scope is scope])
                safe = reads <= 1
                return [(binding.value, source, binding.value, Applicability.SAFE if safe else Applicability.UNSAFE)]
            value = binding.value
        if isinstance(value, cst.Call):
            return self._model_sources(value)
        return []

    def _model_sources(
        self, call: cst.Call
    ) -> list[_Source]:
        """A model called on the input: its class's ``forward`` returns, or its Sequential's last layer."""
        name = dotted_name(call.func)
        if name is None:
            return []
        found: list[_Source] = []
        for binding in self._bindings_of(name):
            built = binding.value
            if not isinstance(built, cst.Call):
                continue
            class_name = dotted_name(built.func)
            if class_name in self.forward_returns:
                for returned in self.forward_returns[class_name or ""]:
                    source = self._softmax_input(returned)
                    if source is not None:
                        found.append((returned, source, returned, Applicability.UNSAFE))
            elif self.context.is_torch(built.func, "torch.nn.Sequential") and built.args:
                last = built.args[-1]
                if isinstance(last.value, cst.Call) and self.context.is_torch(last.value.func, *_SOFTMAX_MODULE):
                    found.append((last.value, remove_arg(built, last), built, Applicability.UNSAFE))
        return found
