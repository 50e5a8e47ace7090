"""forward-call: ``model.forward(x)`` instead of ``model(x)``."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import (
    assigned_targets,
    dotted_name,
    is_method_call,
    model_like,
    positional_args,
)
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid
from repairbot.types import Applicability


class ForwardCall(LintRule):
    """Finds ``model.forward(x)`` where ``model(x)`` is meant.

    What it finds:
        A call of ``.forward(...)`` on a model: an object built in this file from an
        ``nn.Module`` subclass or a ``torch.nn`` class, or one named like a model (``model``,
        ``net``, ``self.encoder``, ``backbone``...). Not ``super().forward(...)``,
        ``self.forward(...)``, an explicit base-class call (``Base.forward(self, x)``), nor
        objects of unknown kind that merely have a ``forward`` (an FX ``GraphModule``, an RPC
        proxy's ``rpc_sync().forward(...)``), whose callers often skip hooks on purpose.

    Why it matters:
        ``nn.Module.__call__`` runs the forward pre-hooks and hooks and the backward hooks around
        ``forward``. Calling ``forward`` directly skips them: pruning masks, weight norm and
        spectral norm parametrisations of older code, DDP's and FSDP's hooks, activation
        checkpointing wrappers, profilers and feature extractors all silently stop applying.

    Fix safety:
        The fix calls the object itself: ``model(x)``. Safe when the object is known to be a
        module (built in this file from an ``nn.Module`` subclass or a ``torch.nn`` class);
        unsafe otherwise, since an object that merely has a ``forward`` method may not be
        callable, and a module's hooks then start running (the point of the fix).

    Not handled:
        ``self.forward(x)`` inside a module (it may be the body of ``__call__``); ``forward``
        looked up through ``getattr``; modules held in variables named otherwise and built in
        another file.
    """

    ID = "forward-call"
    SEVERITY = Severity.WARNING
    TITLE = "model.forward(x) called directly, skipping the module's hooks"
    MESSAGE = "calling forward directly skips the module's hooks"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"forward",)  # not `.forward(`: `model.forward (x)` and `model\n.forward(x)` call it too

    VALID = (
        Valid("""
            import torch
            out = model(x)
        """),
        Valid("""
            import torch
            from torch import nn
            class Child(nn.Linear):
                def forward(self, x):
                    return super().forward(x) * 2
            class Other(nn.Module):
                def forward(self, x):
                    return nn.Linear.forward(self.lin, x) + Base.forward(self, x)
                def __call__(self, x):
                    return self.forward(x)
        """),
        Valid("""
            import torch
            out = gm.forward(*args)
            y = rref.rpc_sync().forward(x)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            model = nn.Linear(4, 2)
            out = model.forward(torch.ones(1, 4))
            """,
            line=4, column=7, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            from torch import nn
            model = nn.Linear(4, 2)
            out = model(torch.ones(1, 4))
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Encoder(nn.Module):
                def forward(self, x):
                    return x
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = Encoder()
                def forward(self, x):
                    return self.encoder.forward(x)
            """,
            line=11, column=16, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            from torch import nn
            class Encoder(nn.Module):
                def forward(self, x):
                    return x
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = Encoder()
                def forward(self, x):
                    return self.encoder(x)
            """,
        ),
        Invalid(
            """
            import torch
            def predict(student_net, batch):
                return student_net.forward(batch, mask=None)
            """,
            line=3, column=12, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            def predict(student_net, batch):
                return student_net(batch, mask=None)
            """,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.calls: list[tuple[cst.Call, cst.BaseExpression]] = []
        self.modules: set[str] = set()  # classes of this file that derive from a module
        self.instances: dict[str, list[cst.Call]] = {}  # name -> the calls that built what it holds

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            qualified = self.context.qualify(base.value) or ""
            if qualified.startswith("torch.nn.") or dotted_name(base.value) in self.modules:
                self.modules.add(node.name.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call):
            for target in assigned_targets(node):
                name = dotted_name(target)
                if name:
                    self.instances.setdefault(name, []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        if not is_method_call(node, "forward") or not isinstance(node.func, cst.Attribute):
            return
        owner = node.func.value
        name = dotted_name(owner)
        if name is None or name in ("self", "cls"):
            return  # super().forward(x), a proxy's rpc_sync().forward(x): not a module being called

        if name and name.rsplit(".", 1)[-1][:1].isupper():
            return  # Base.forward(self, x): an unbound call through a class
        first = positional_args(node)[:1]
        if first and isinstance(first[0].value, cst.Name) and first[0].value.value == "self":
            return
        self.calls.append((node, owner))

    def _known_module(self, owner: cst.BaseExpression) -> bool:
        name = dotted_name(owner)
        for built in self.instances.get(name or "", []):
            qualified = self.context.qualify(built.func) or ""
            if dotted_name(built.func) in self.modules:
                return True
            if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1][:1].isupper():
                return True
        return False

    def leave_Module(self, node: cst.Module) -> None:
        for call, owner in self.calls:
            known = self._known_module(owner)
            if not known and not model_like(dotted_name(owner) or ""):
                continue  # an object of unknown kind with a forward method: a GraphModule, a proxy...
            code = self.context.code(owner)
            self.report(
                call,
                f"`{code}.forward(...)` skips the hooks that `{code}(...)` runs (forward and backward "
                "hooks, DDP/FSDP, pruning, parametrisations): call the module",
                replacement=call.with_changes(func=owner),
                applicability=Applicability.SAFE if known else Applicability.UNSAFE,
            )
