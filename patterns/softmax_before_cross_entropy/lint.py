"""softmax-before-cross-entropy: probabilities where the loss expects logits."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    argument,
    assigned_targets,
    dotted_name,
    enclosing_scope,
    is_method_call,
    receiver,
    within,
)
from repairbot.codemod import remove_arg
from repairbot.cst_walk import children, descendants
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid
from repairbot.types import Applicability

_SOFTMAX_FUNCTIONS = ("torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax")
_CROSS_ENTROPY = ("torch.nn.functional.cross_entropy",)
_CROSS_ENTROPY_MODULE = ("torch.nn.CrossEntropyLoss",)
_NLL = ("torch.nn.functional.nll_loss",)
_NLL_MODULE = ("torch.nn.NLLLoss",)
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
    statement: cst.CSTNode | None = None  # the statement line, when the assignment is all of it


class SoftmaxBeforeCrossEntropy(LintRule):
    """Finds ``softmax`` applied to the logits that ``cross_entropy`` / ``CrossEntropyLoss`` receives.

    What it finds:
        The input of ``F.cross_entropy(...)``, of a ``nn.CrossEntropyLoss()`` criterion or of
        ``nn.CrossEntropyLoss()(...)`` that comes from a softmax: written in the call
        (``criterion(F.softmax(out, 1), y)``), assigned just before it in the same function
        (``probs = out.softmax(1)``), returned by the ``forward`` of a model class of the same
        file (``return F.softmax(x, dim=1)``, ``return self.softmax(x)``, or ``x = F.softmax(x,
        dim=1)`` then ``return x``), or the last layer of an ``nn.Sequential`` model or of an
        ``nn.Sequential`` attribute that ``forward`` returns; the model may be built as
        ``Net().to(device)``, called as ``model(x)`` or ``model.forward(x)``, and called in a
        training function that receives it. Also a
        model's softmax fed to ``nll_loss`` / ``NLLLoss`` through ``torch.log``.

    Why it matters:
        ``cross_entropy`` applies ``log_softmax`` to its input itself. Fed probabilities, it
        computes the log-softmax of values in [0, 1]: the loss barely moves, the gradients
        nearly vanish, and the model trains slowly or not at all, without an error.

    Fix safety:
        The fix removes the softmax (keeping its input; ``x = F.softmax(x, dim=1)`` before
        ``return x`` goes whole). Safe when the softmax is written in the loss call, assigned
        to a variable that nothing else reads, or ends a model of this script whose every call
        goes straight to the loss (nothing else sees the probabilities). Unsafe when its output
        is used elsewhere (accuracy, predictions, logging) or the file is a module of a package
        (other files may call the model for probabilities). After ``log`` and ``nll_loss``
        (cross-entropy computed unstably) it is reported without a fix.

    Not handled:
        A model built in another file; a softmax reached through other helpers or containers;
        ``log_softmax`` before ``nll_loss`` (correct) or before ``cross_entropy`` (harmless:
        log-softmax is idempotent).
    """

    ID = "softmax-before-cross-entropy"
    SEVERITY = Severity.WARNING
    TITLE = "Softmax applied to the logits that cross-entropy receives"
    MESSAGE = "cross_entropy receives softmax probabilities, not logits"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = ((b"softmax", b"Softmax"), (b"cross_entropy", b"CrossEntropyLoss", b"nll_loss", b"NLLLoss"))

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
        # a model that returns log-probabilities, trained with NLLLoss: right
        Valid("""
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return F.log_softmax(self.fc(x), dim=1)
            model = Net()
            criterion = nn.NLLLoss()
            for x, y in loader:
                loss = criterion(model(x), y)
        """),
        # softmax for predictions only: the loss gets the logits
        Valid("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return self.fc(x)
                def predict(self, x):
                    return torch.softmax(self(x), dim=1)
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                logits = model(x)
                loss = criterion(logits, y)
                probs = torch.softmax(logits, dim=1)
        """),
        # forward called by name returns the logits; the softmax is the prediction's
        Valid("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return self.fc(x)
                def predict(self, x):
                    return torch.softmax(self.forward(x), dim=1)
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(model.forward(x), y)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch.nn.functional as F
            loss = F.cross_entropy(F.softmax(logits, dim=1), labels)
            """,
            line=2, column=24, fix=Applicability.SAFE,
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
            line=5, column=11, fix=Applicability.SAFE,
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
            line=3, column=9, fix=Applicability.UNSAFE,
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
            line=11, column=16, fix=Applicability.SAFE,
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
            confidence = model(x_test).max(1).values
            """,
            line=4, column=5, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch.nn as nn
            model = nn.Sequential(
                nn.Linear(4, 3),
            )
            loss_fn = nn.CrossEntropyLoss()
            for x, y in loader:
                out = model(x)
                loss = loss_fn(out, y)
            confidence = model(x_test).max(1).values
            """,
        ),
        # the tutorial form: forward's last operation, the model moved to its device, the
        # training loop in a function that receives the model
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    x = self.fc(x)
                    x = F.softmax(x, dim=1)
                    return x
            def train(model, loader, optimizer):
                criterion = nn.CrossEntropyLoss()
                for data, target in loader:
                    output = model(data)
                    loss = criterion(output, target)
                    loss.backward()
            model = Net().to(device)
            train(model, loader, optimizer)
            """,
            line=10, column=13, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    x = self.fc(x)
                    return x
            def train(model, loader, optimizer):
                criterion = nn.CrossEntropyLoss()
                for data, target in loader:
                    output = model(data)
                    loss = criterion(output, target)
                    loss.backward()
            model = Net().to(device)
            train(model, loader, optimizer)
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Linear(8, 3), nn.Softmax(dim=1))
                def forward(self, x):
                    return self.layers(x)
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                predicted = out.argmax(dim=1)
            """,
            line=5, column=54, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = nn.Sequential(nn.Linear(8, 3))
                def forward(self, x):
                    return self.layers(x)
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                predicted = out.argmax(dim=1)
            """,
        ),
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return F.softmax(self.fc(x), dim=1)
            model = Net()
            for x, y in loader:
                loss = F.nll_loss(torch.log(model(x)), y)
            """,
            line=9, column=16, message="log_softmax",
        ),
        # a second instance of the class serves predictions: removing the softmax changes them
        Invalid(
            """
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return F.softmax(self.fc(x), dim=1)
            model = Net()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
            served = Net()
            print(served(sample))
            """,
            line=8, column=16, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return self.fc(x)
            model = Net()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
            served = Net()
            print(served(sample))
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
            line=9, column=16, fix=Applicability.SAFE,
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
        # forward called by name, `model.forward(x)`: the same forward as `model(x)`
        Invalid(
            """
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    x = self.fc(x)
                    return torch.softmax(x, dim=1)
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(model.forward(x), y)
            """,
            line=9, column=16, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    x = self.fc(x)
                    return x
            model = Net()
            criterion = nn.CrossEntropyLoss()
            for x, y in loader:
                loss = criterion(model.forward(x), y)
            """,
        ),
        # the loss's call is model(x), and forward called by name serves predictions: the
        # probabilities are used
        Invalid(
            """
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return F.softmax(self.fc(x), dim=1)
            model = Net()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
            predicted = model.forward(x_test).argmax(1)
            """,
            line=8, column=16, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch.nn as nn
            import torch.nn.functional as F
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 3)
                def forward(self, x):
                    return self.fc(x)
            model = Net()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
            predicted = model.forward(x_test).argmax(1)
            """,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.order = 0
        self.bindings: list[_Binding] = []
        self.by_name: dict[str, list[_Binding]] = {}
        self.bound: dict[tuple[int, tuple[str, ...]], bool] = {}  # _bound_to, by binding and classes
        self.losses: list[tuple[cst.Call, int, cst.CSTNode]] = []  # (loss call, order, scope)
        # class name -> what its forward returns (a value, or the assignment of the returned name)
        self.forward_returns: dict[str, list[cst.BaseExpression | _Binding]] = {}
        self._parents: dict[cst.CSTNode, cst.CSTNode] | None = None

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
        # asked for every call of a name bound many times (`model` in each function): once each
        key = (id(binding), classes)
        if key not in self.bound:
            self.bound[key] = isinstance(binding.value, cst.Call) and self.context.is_torch(binding.value.func, *classes)
        return self.bound[key]

    def _visit_assignment(self, node: cst.Assign | cst.AnnAssign) -> None:
        if node.value is None:
            return
        self.order += 1
        scope = enclosing_scope(self.context.stack)
        line = self.context.parent()
        whole = line if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
        for target in assigned_targets(node):
            name = dotted_name(target)
            if name:
                binding = _Binding(name, node.value, self.order, scope, whole)
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
            returned: cst.BaseExpression | _Binding = node.value
            if isinstance(node.value, cst.Name):
                # `x = F.softmax(x, dim=1)` then `return x`: the last operation is the assignment
                binding = self._last_binding(node.value.value, self.order + 1, function)
                if binding is not None:
                    returned = binding
            self.forward_returns.setdefault(owner.name.value, []).append(returned)

    def _is_loss(self, call: cst.Call, functions: tuple[str, ...] = _CROSS_ENTROPY,
                 modules: tuple[str, ...] = _CROSS_ENTROPY_MODULE) -> bool:
        if self.context.is_torch(call.func, *functions):
            return True
        if isinstance(call.func, cst.Call) and self.context.is_torch(call.func.func, *modules):
            return True
        name = dotted_name(call.func)
        return bool(name) and any(self._bound_to(b, modules) for b in self._bindings_of(name or ""))

    def _log_input(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """``x`` of ``torch.log(x)`` / ``x.log()``."""
        if isinstance(value, cst.Call) and self.context.is_torch(value.func, "torch.log") and value.args:
            return value.args[0].value
        if is_method_call(value, "log") and isinstance(value, cst.Call) and not value.args:
            return receiver(value)
        return None

    def _last_binding(self, name: str, order: int, scope: cst.CSTNode) -> _Binding | None:
        earlier = [b for b in self._bindings_of(name) if b.scope is scope and b.order < order]
        return earlier[-1] if earlier else None

    def leave_Module(self, node: cst.Module) -> None:
        reported: set[cst.CSTNode] = set()
        for call, order, scope in self.losses:
            nll = False
            if not self._is_loss(call):
                if not self._is_loss(call, _NLL, _NLL_MODULE):
                    continue
                nll = True
            logits = argument(call, 0, "input")
            if logits is None:
                continue
            value = logits.value
            if nll:
                # nll_loss(torch.log(probs)): softmax, log and NLL, cross-entropy done unstably
                inner = self._log_input(value)
                if inner is None:
                    continue
                value = inner
            for softmax, replacement, target, applicability in self._sources(value, order, scope):
                if softmax in reported:
                    continue
                reported.add(softmax)
                if nll:
                    self.report(
                        softmax,
                        f"`{self.context.code(softmax)}` is followed by `log` and `{self.context.code(call.func)}`: "
                        "log of a softmax underflows to -inf for confident outputs (NaN losses); return the "
                        "logits and use `cross_entropy`, or `log_softmax` with `nll_loss`",
                    )
                    continue
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
        """A model called on the input: its class's ``forward`` returns (the value returned,
        or the assignment of the returned name), or its Sequential's last layer; the fix is safe
        only in a script whose every call of the model feeds a loss and nothing else."""
        name = _called_model(call)
        if name is None:
            return []
        found: list[_Source] = []
        models = {name}  # every name the same model class is bound to: all must feed losses only
        for binding in self._bindings_of(name):
            built = _built(binding.value)
            if built is None:
                continue
            class_name = dotted_name(built.func)
            if class_name in self.forward_returns:
                for returned in self.forward_returns[class_name or ""]:
                    found.extend(self._returned_sources(returned))
                models |= {b.name for b in self.bindings if (other := _built(b.value)) is not None
                           and dotted_name(other.func) == class_name}
            else:
                found.extend(self._sequential_source(built))
        if not found:
            return []
        label = Applicability.SAFE if all(self._only_losses_read(model) for model in models) else Applicability.UNSAFE
        return [(softmax, replacement, target, label) for softmax, replacement, target, _ in found]

    def _returned_sources(self, returned: cst.BaseExpression | _Binding) -> list[_Source]:
        if isinstance(returned, _Binding):
            source = self._softmax_input(returned.value)
            if source is None:
                return self._attribute_sequential(returned.value)
            statement = returned.statement
            if isinstance(source, cst.Name) and source.value == returned.name and statement is not None:
                # `x = F.softmax(x, dim=1)` then `return x`: the statement goes
                return [(returned.value, cst.RemovalSentinel.REMOVE, statement, Applicability.UNSAFE)]
            return [(returned.value, source, returned.value, Applicability.UNSAFE)]
        source = self._softmax_input(returned)
        if source is not None:
            return [(returned, source, returned, Applicability.UNSAFE)]
        return self._attribute_sequential(returned)

    def _attribute_sequential(self, value: cst.BaseExpression) -> list[_Source]:
        """``self.net(x)`` where ``self.net = nn.Sequential(..., nn.Softmax(dim=1))``."""
        if not isinstance(value, cst.Call):
            return []
        name = dotted_name(value.func)
        if not name:
            return []
        found: list[_Source] = []
        for binding in self._bindings_of(name):
            if isinstance(binding.value, cst.Call):
                found.extend(self._sequential_source(binding.value))
        return found

    def _sequential_source(self, built: cst.Call) -> list[_Source]:
        if self.context.is_torch(built.func, "torch.nn.Sequential") and built.args and len(built.args) > 1:
            last = built.args[-1]
            if isinstance(last.value, cst.Call) and self.context.is_torch(last.value.func, *_SOFTMAX_MODULE):
                return [(last.value, remove_arg(built, last), built, Applicability.UNSAFE)]
        return []

    def _parent_map(self) -> dict[cst.CSTNode, cst.CSTNode]:
        if self._parents is None:
            self._parents = {}
            for node in descendants(self.context.module):
                for child in children(node):
                    self._parents[child] = node
        return self._parents

    def _only_losses_read(self, model: str) -> bool:
        """Whether, in a script, every call of ``model`` goes straight to a cross-entropy loss
        (as its input, or through a name that only such losses read): the model's probabilities
        are then used nowhere else, and removing its softmax changes nothing but the loss."""
        if self.context.package is not None:
            return False  # a module of a package: other files may call the model
        parents = self._parent_map()
        calls = [n for n in parents if isinstance(n, cst.Call) and _called_model(n) == model]
        for call in calls:
            parent = parents.get(call)
            if isinstance(parent, cst.Arg) and self._feeds_loss(parent, parents):
                continue
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                name = parent.targets[0].target.value
                reads = [n for n in parents if isinstance(n, cst.Name) and n.value == name and n is not parent.targets[0].target]
                if reads and all(isinstance(parents.get(r), cst.Arg) and self._feeds_loss(parents[r], parents) for r in reads):
                    continue
            return False
        return bool(calls)

    def _feeds_loss(self, arg: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> bool:
        call = parents.get(arg)
        return (isinstance(call, cst.Call) and isinstance(arg, cst.Arg) and argument(call, 0, "input") is arg
                and self._is_loss(call))


def _called_model(call: cst.Call) -> str | None:
    """The name of the model a call runs: ``model`` of ``model(x)`` and of ``model.forward(x)``
    (the same forward, without the hooks)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    return dotted_name(func)


def _built(value: cst.BaseExpression) -> cst.Call | None:
    """The constructor call of ``Net()``, ``Net().to(device)``, ``Net().cuda()``."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
        value = value.func.value
    return value if isinstance(value, cst.Call) else None
