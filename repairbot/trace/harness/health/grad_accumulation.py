"""grad-accumulation: optimizer steps whose gradients are never reset in between."""

from typing import Any, Dict, List, Optional

from ..frames import user_call_site
from ..identity import IdentityWeakKeyDict
from .core import Finding, HealthCheck, HealthCore, Record


class GradAccumulation(HealthCheck):
    """optimizer.step() ran twice with no zero_grad() (nor set_to_none, nor p.grad = None) in
    between while the same gradient tensors kept growing: each step applies the sum of every
    batch so far. The missing-zero-grad lint rule's fix is offered.

    What it finds:
        ``optimizer.step()`` ran twice with no ``zero_grad()`` of any optimizer or module, no
        ``set_to_none``, no ``p.grad = None`` in between, while the same gradient tensors kept
        growing (changed only by the backward passes between the steps). The finding points to
        the ``step()`` call and records the optimizer, the step, the gradient norm before and
        after, and the backward calls between. Silent on accumulation on purpose (step and
        ``zero_grad`` every k batches) and on gradients reset any way (a new grad tensor, an
        in-place reset or clipping between the steps).

    Why it matters:
        ``backward()`` adds to ``.grad``: without a reset each step applies the sum of the
        gradients of every batch so far, and training diverges without an error.

    Fix safety:
        Offers the ``missing-zero-grad`` lint rule's fix for the loop that holds the ``step()``
        call (``optimizer.zero_grad()`` as the loop's first statement, with that rule's
        safety), never applied: ``repairbot lint --fix`` does.

    Not handled:
        Sparse gradients; steps at which a different set of parameters holds a gradient
        (only the same tensors growing are compared). One finding per run: the first.
    """

    ID = "grad-accumulation"
    TITLE = "Gradients are never reset between optimizer steps"
    LINT_RULE = "missing-zero-grad"
    ORDER = 20

    def __init__(self, core: HealthCore) -> None:
        HealthCheck.__init__(self, core)
        self.found: Optional[Finding] = None
        # optimizer -> its gradients at its last live step
        self.last: "IdentityWeakKeyDict[Any, Dict[str, Any]]" = IdentityWeakKeyDict()
        core.on_live_step(self.step)

    def step(self, optimizer: Any, record: Record, params: List[Any], holding: List[Any]) -> None:
        if self.found is None:
            self.check(optimizer, record, holding)

    def check(self, optimizer: Any, record: Record, holding: List[Any]) -> None:
        core = self.core
        torch = core.torch
        grads = [p.grad for p in holding]
        if any(g.is_sparse for g in grads):
            return
        try:
            norms = torch._foreach_norm(grads) if hasattr(torch, "_foreach_norm") else [g.norm() for g in grads]
            norm = float(torch.stack([n.float() for n in norms]).norm())
        except Exception:
            return
        snapshot: Dict[str, Any] = {"resets": core.resets, "backwards": core.backwards, "norm": norm,
                    "grads": dict((id(p), (p.grad, p.grad._version)) for p in holding)}
        last = self.last.get(optimizer)
        self.last[optimizer] = snapshot
        if last is None or snapshot["resets"] != last["resets"]:
            return
        ran = snapshot["backwards"] - last["backwards"]
        if ran < 1 or set(snapshot["grads"]) != set(last["grads"]):
            return
        for key, (grad, version) in snapshot["grads"].items():
            old_grad, old_version = last["grads"][key]
            # the same tensors, changed only by the backward passes adding to them (a reset
            # in place, clipping or p.grad = None would show as more changes or new tensors)
            if grad is not old_grad or not 1 <= version - old_version <= ran:
                return
        if not norm > last["norm"] * (1.0 + 1e-6):
            return
        message = (
            "optimizer.step() ran twice with no zero_grad() in between: the gradients of %d "
            "parameter tensors kept accumulating (gradient norm %.4g -> %.4g over %d backward "
            "call%s)" % (len(holding), last["norm"], norm, ran, "" if ran == 1 else "s")
        )
        evidence = {"optimizer": type(optimizer).__name__, "step": record["steps"],
                    "grad_norm_before": float("%.4g" % last["norm"]), "grad_norm_after": float("%.4g" % norm),
                    "backward_calls_between": ran, "parameters": len(holding)}
        self.found = self.finding(user_call_site(), message, evidence)

    def findings(self) -> Optional[Finding]:
        return self.found
