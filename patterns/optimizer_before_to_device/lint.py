"""optimizer-before-to-device: an optimizer built before its model moves to the device."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import dotted_name, enclosing_scope, is_method_call, receiver
from repairbot.cst_walk import descendants
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid

_MOVES = ("to", "cuda", "xpu", "mps", "to_empty")


class OptimizerBeforeToDevice(LintRule):
    """Finds an optimizer built from ``model.parameters()`` before ``model.to(device)`` / ``.cuda()``.

    What it finds:
        A ``torch.optim`` optimizer constructed from ``model.parameters()`` (anywhere in its
        arguments), followed later in the same function (or at module level) by a call that
        moves that same model: ``model.to(...)``, ``model.cuda()``, ``model.xpu()``,
        ``model.to_empty(...)``. Not when the model was already moved before the optimizer
        (``model = Net().to(device)``) or the later move follows a ``model.cpu()`` (a round
        trip around a save).

    Why it matters:
        The ``torch.optim`` documentation asks for the other order: "If you need to move a
        model to GPU via ``.cuda()``, please do so before constructing optimizers for it".
        Parameters are moved in place today, so the plain case still trains, but optimizer
        state loaded or created before the move stays on the old device (``Expected all
        tensors to be on the same device`` at the first ``step()`` after loading a checkpoint),
        and a module whose conversion replaces its parameters (``torch.__future__``'s
        ``set_overwrite_module_params_on_conversion``, some wrappers) leaves the optimizer
        updating tensors the model no longer uses, silently.

    Fix safety:
        Reported without a fix: the safe order is to move the model first (``model.to(device)``
        on the line before), then build the optimizer; moving statements across other code is
        left to the author.

    Silent in a LightningModule's ``configure_optimizers`` (the base imported from Lightning
    under any name, or a class of this file derived from one): Lightning moves the module to
    its device before it calls that hook.

    Not handled:
        Models moved in another function than the one that builds the optimizer; parameters
        passed through a variable (``params = model.parameters()``).
    """

    ID = "optimizer-before-to-device"
    SEVERITY = Severity.INFORMATION
    TITLE = "An optimizer built from model.parameters() before the model moves to its device"
    MESSAGE = "the optimizer is built before the model moves to its device"
    REQUIRES = (b"optim", b"parameters", (b"to", b"cuda", b"xpu"))

    VALID = (
        Valid("""
            import torch
            model = Net().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """),
        Valid("""
            import torch
            def build():
                optimizer = torch.optim.Adam(model.parameters())
                return optimizer
            def place():
                model.cuda()
        """),
        Valid("""
            import torch
            optimizer = torch.optim.SGD(encoder.parameters(), lr=0.1)
            decoder.to(device)
        """),
        # a round trip: on the device when the optimizer was built, back on it after the save
        Valid("""
            import torch
            model = Net().to(device)
            opt = torch.optim.Adam(model.parameters())
            model.cpu()
            torch.save(model.state_dict(), "model.pt")
            model.to(device)
        """),
        Valid("""
            import torch
            model = Net()
            model.to(device)
            opt = torch.optim.Adam(model.parameters())
            for epoch in range(3):
                model.cpu()
                torch.save(model.state_dict(), "model.pt")
                model.to(device)
        """),
        # Lightning moves the module before it calls configure_optimizers
        Valid("""
            import torch
            import lightning as L
            class Lit(L.LightningModule):
                def configure_optimizers(self):
                    optimizer = torch.optim.Adam(self.parameters())
                    self.to("cuda")
                    return optimizer
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            model = Net()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            model.to(device)
            """,
            line=3, column=13, message="model.to(device)",
        ),
        Invalid(
            """
            from torch import optim
            class Trainer:
                def __init__(self, net):
                    self.net = net
                    self.opt = optim.SGD([{"params": self.net.parameters()}], lr=0.1)
                    if use_gpu:
                        self.net = self.net.cuda()
            """,
            line=5, column=20,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.order = 0
        self.optimizers: list[tuple[cst.Call, set[str], cst.CSTNode, int]] = []  # (call, models, scope, order)
        self.moves: list[tuple[cst.Call, str, cst.CSTNode, int]] = []  # (call, model, scope, order)

    def visit_Call(self, node: cst.Call) -> None:
        self.order += 1
        scope = enclosing_scope(self.context.stack)
        if is_method_call(node, *_MOVES, "cpu"):
            owner = dotted_name(receiver(node) or cst.Name("_"))
            if owner:
                self.moves.append((node, owner, scope, self.order))
            else:
                # `model = Net().to(device)`: the model is on its device from the start
                parent = self.context.parent()
                if isinstance(parent, cst.Assign) and parent.value is node:
                    for target in parent.targets:
                        name = dotted_name(target.target)
                        if name:
                            self.moves.append((node, name, scope, self.order))
            return
        qualified = self.context.qualify(node.func) or ""
        if not qualified.startswith("torch.optim.") or not qualified.rsplit(".", 1)[-1][:1].isupper():
            return
        models = {
            name for item in descendants(node)
            if is_method_call(item, "parameters") and isinstance(item, cst.Call)
            and (name := dotted_name(receiver(item) or cst.Name("_")))
        }
        if models == {"self"} and self.context.lightning_hook("configure_optimizers"):
            return  # Lightning moves the module to its device before it calls configure_optimizers
        if models:
            self.optimizers.append((node, models, scope, self.order))

    def leave_Module(self, node: cst.Module) -> None:
        for call, models, scope, order in self.optimizers:
            moves = [m for m in self.moves if m[1] in models and m[2] is scope]
            if any(m[3] < order and m[0].func.attr.value != "cpu" for m in moves if isinstance(m[0].func, cst.Attribute)):
                continue  # already on its device when the optimizer was built: later moves are round trips
            move = next((m for m in moves if m[3] > order), None)
            if move is None or (isinstance(move[0].func, cst.Attribute) and move[0].func.attr.value == "cpu"):
                continue  # `model.cpu(); save; model.to(device)`: a round trip, not the first placement
            moved = self.context.code(move[0])
            self.report(
                call,
                f"`{self.context.code(call.func)}(...)` is built from `{move[1]}.parameters()` before "
                f"`{moved}` moves the model: move the model first, then build the optimizer "
                "(the order the torch.optim documentation asks for)",
            )
