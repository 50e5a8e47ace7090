"""nan-loss: the loss passed to backward() is NaN or Inf."""

from typing import Any, Dict, Optional

from ..frames import shape, short_site, user_call_site
from .core import Finding, HealthCheck, HealthCore, first_tensor


class NanLoss(HealthCheck):
    """The tensor backward() was called on is not finite: every gradient of that step is NaN and
    the optimizer writes NaN into the weights. The finding names the step and the first module
    output or parameter that went non-finite.

    What it finds:
        The tensor ``backward()`` is called on is NaN or Inf. The finding records the step, the
        value, and the first parameter or module output that went non-finite (global forward
        hooks, one ``isfinite`` test per output until the first offender), reported at the
        ``backward()`` call. Silent while the loss is finite.

    Why it matters:
        Every gradient of that step is NaN, and the optimizer writes NaN into the weights:
        from then on the model computes nothing but NaN, and nothing crashes.

    Fix safety:
        No fix is offered: the cause (a learning rate, a ``log`` of zero, a division, bad
        input data) is for the user to find, and the first non-finite value points to it.

    Not handled:
        A NaN produced outside ``backward()`` (``torch.autograd.grad``).
    """

    ID = "nan-loss"
    TITLE = "The loss is NaN or Inf"
    ORDER = 10

    def __init__(self, core: HealthCore) -> None:
        HealthCheck.__init__(self, core)
        self.found: Optional[Finding] = None
        self.nonfinite_output: Optional[Dict[str, Any]] = None
        core.on_backward(self.backward)
        core.on_forward(self.forward)

    def forward(self, module: Any, args: Any, output: Any) -> None:
        if self.nonfinite_output is not None or self.found is not None:
            return
        torch = self.core.torch
        tensor = first_tensor(output)
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.numel() \
                and not bool(torch.isfinite(tensor.detach()).all()):
            self.nonfinite_output = {"module": module, "step": self.core.state.steps, "shape": shape(tensor)}

    def backward(self, tensors: Any) -> None:
        if self.found is None and isinstance(tensors, self.core.torch.Tensor):
            self.check_loss(tensors)

    def check_loss(self, loss: Any) -> None:
        core = self.core
        torch = core.torch
        try:
            if not loss.is_floating_point() or bool(torch.isfinite(loss.detach()).all()):
                return
        except Exception:
            return
        value = float(loss.detach().reshape(-1)[0]) if loss.numel() else None
        evidence: Dict[str, Any] = {"step": core.state.steps + 1, "backward_calls": core.backwards,
                    "value": str(value), "shape": shape(loss), "dtype": str(loss.dtype).replace("torch.", "")}
        culprit: Optional[str] = None
        for root in core.root_modules():
            for name, p in root.named_parameters():
                if p.is_floating_point() and not bool(torch.isfinite(p.detach()).all()):
                    evidence["first_nonfinite_parameter"] = "%s.%s" % (type(root).__name__, name)
                    culprit = culprit or "parameter %s.%s" % (type(root).__name__, name)
                    break
            if "first_nonfinite_parameter" in evidence:
                break
        seen = self.nonfinite_output
        if seen is not None and seen["module"] is not None:
            module = seen["module"]
            described = core.module_name(module) or type(module).__name__
            evidence["first_nonfinite_output"] = {
                "module": described, "type": type(module).__name__, "step": seen["step"] + 1,
                "shape": seen["shape"], "built_at": short_site(core.state.module_sites.get(module)),
            }
            culprit = culprit or "the output of %s (%s)" % (described, type(module).__name__)
        site = user_call_site()
        message = "the loss passed to backward() is %s at optimizer step %d" % (value, core.state.steps + 1)
        if culprit:
            message += "; the first non-finite value seen: %s" % culprit
        else:
            message += " while every module output and parameter was finite: the loss computation made it"
        self.found = self.finding(site, message, evidence)

    def findings(self) -> Optional[Finding]:
        return self.found
