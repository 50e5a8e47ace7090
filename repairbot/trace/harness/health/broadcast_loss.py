"""broadcast-loss: a loss whose input and target broadcast to a larger shape."""

import json
import os
from typing import Any, Dict, List, Sequence, Tuple

from ..frames import user_call_site
from .core import Finding, HealthCheck, HealthCore

# Functional losses that broadcast input against target without a word (mse/l1/smooth_l1/huber
# warn "Using a target size ...": a pattern fixes that; the BCE ones raise): torch's names are
# written once, in repairbot/torch_semantics.json, read here with the standard library.
_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir, "torch_semantics.json")
with open(_TABLE, encoding="utf-8") as _handle:
    _SILENT_LOSSES = tuple(json.load(_handle)["silent_broadcast_losses"])
_MAX_FINDINGS = 3


class BroadcastLoss(HealthCheck):
    """The loss's input and target have different shapes that broadcast to a larger one ((N, 1)
    against (N,) gives (N, N)): every prediction is compared with every target, with no error and
    no warning.

    What it finds:
        A loss's input and target broadcast to a shape larger than either ((N, 1) against (N,)
        gives (N, N)): user-defined loss modules (``_Loss`` subclasses, modules named
        ``*Loss``) and the functional losses that broadcast without a warning (``kl_div``,
        ``soft_margin_loss``, ``poisson_nll_loss``, ``hinge_embedding_loss``,
        ``multilabel_soft_margin_loss``). The finding records the loss, the three shapes and
        the step (up to three findings, one per pair of shapes). Silent on MSE/L1/Smooth-L1/Huber
        (torch warns "Using a target size ..." and the ``target-shape`` pattern fixes it) and
        on BCE (it raises).

    Why it matters:
        Every prediction is compared with every target: the loss is a number, training runs,
        and the gradient pulls each prediction toward all the targets of its batch instead of
        its own.

    Fix safety:
        No fix is offered: which side to reshape (``squeeze`` the input, ``unsqueeze`` the
        target) depends on the model's output.

    Not handled:
        Losses written as plain expressions outside a loss module.
    """

    ID = "broadcast-loss"
    TITLE = "A loss broadcasts its input against its target"
    ORDER = 50

    def __init__(self, core: HealthCore) -> None:
        HealthCheck.__init__(self, core)
        self.found: List[Finding] = []
        self.custom_losses = 0  # user-defined loss modules whose forward is running
        self._custom_loss_classes: Dict[type, bool] = {}
        self._loss_base = getattr(core.torch.nn.modules.loss, "_Loss", None)
        for name in _SILENT_LOSSES:
            self._wrap_loss(name)
        core.on_forward_pre(self.forward_pre)
        core.on_forward(self.forward)

    def _wrap_loss(self, name: str) -> None:
        functional = self.core.torch.nn.functional
        if getattr(functional, name, None) is None:
            return
        check = self

        def loss(real: Any, input: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            if not check.custom_losses:
                check.check(name, input, target)
            return real(input, target, *args, **kwargs)

        self.core.hooks.around(functional, name, loss)

    def _is_custom_loss(self, module: Any) -> bool:
        """A loss the user wrote: a ``_Loss`` subclass, or a module whose class is named so."""
        cls = type(module)
        known = self._custom_loss_classes.get(cls)
        if known is None:
            known = not (cls.__module__ or "").startswith("torch.") and (
                (self._loss_base is not None and issubclass(cls, self._loss_base))
                or "loss" in cls.__name__.lower()
            )
            self._custom_loss_classes[cls] = known
        return known

    def forward_pre(self, module: Any, args: Any) -> None:
        if self._is_custom_loss(module):
            self.custom_losses += 1

    def forward(self, module: Any, args: Any, output: Any) -> None:
        if self._is_custom_loss(module):
            self.custom_losses = max(0, self.custom_losses - 1)
            if len(args) >= 2:
                self.check(type(module).__name__, args[0], args[1])

    def check(self, name: str, input: Any, target: Any) -> None:
        torch = self.core.torch
        if len(self.found) >= _MAX_FINDINGS or not isinstance(input, torch.Tensor) \
                or not isinstance(target, torch.Tensor):
            return
        a, b = tuple(input.shape), tuple(target.shape)
        if a == b:
            return
        try:
            shape = tuple(torch.broadcast_shapes(a, b))
        except Exception:
            return
        if _numel(shape) <= max(_numel(a), _numel(b)):
            return
        if any(item["evidence"]["input_shape"] == list(a) and item["evidence"]["target_shape"] == list(b)
               for item in self.found):
            return
        message = (
            "%s compares input %s with target %s: they broadcast to %s, so every prediction is "
            "compared with every target (no error, no warning)"
            % (name, _shape_text(a), _shape_text(b), _shape_text(shape))
        )
        evidence = {"loss": name, "input_shape": list(a), "target_shape": list(b),
                    "broadcast_shape": list(shape), "step": self.core.state.steps + 1}
        self.found.append(self.finding(user_call_site(), message, evidence))

    def findings(self) -> List[Finding]:
        return self.found


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _shape_text(shape: Tuple[int, ...]) -> str:
    return "(%s)" % ", ".join(str(s) for s in shape) if len(shape) != 1 else "(%d,)" % shape[0]
