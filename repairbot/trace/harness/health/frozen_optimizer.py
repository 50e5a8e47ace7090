"""frozen-optimizer: a model gets gradients but no optimizer holds its parameters."""

from typing import Any, Dict, List, Optional, Set, Tuple

from ..frames import short_site
from ..identity import IdentityWeakKeyDict
from .core import Finding, HealthCheck, HealthCore, Record


class FrozenOptimizer(HealthCheck):
    """The model the loss is computed with is not the one the optimizer was built for (the model
    was rebuilt or replaced after the optimizer): optimizer.step() never updates it.

    What it finds:
        A model gets gradients but no optimizer the script built holds any of its parameters:
        the optimizer was built for a model that was then replaced, or (when the optimizers
        train the other models of the run) the model is a target network or teacher whose
        output enters the loss with its graph attached, reported at the line that computes
        that output. The finding records the model, where it was built, where its output was
        used, the models the optimizers train and whether its weights change anyway (EMA).
        Silent when no optimizer exists; when any optimizer built (any
        ``torch.optim.Optimizer`` subclass, before or after the model, inside functions or
        classes, param groups, the inner optimizer of a ``Lookahead``-style wrapper, stepped
        yet or not) holds some of its parameters; and when its weights change with no
        optimizer and no trained copy of it (updated by hand).

    Why it matters:
        ``optimizer.step()`` never updates that model: the loss is computed with weights that
        stay as they were built. A target network or teacher whose output keeps its graph
        also spends a backward pass through a model nobody trains.

    Fix safety:
        No fix is offered: build the optimizer after the model is final (or from the model
        the loss uses), or run the target network or teacher under ``torch.no_grad()``, or
        ``.detach()`` its output.

    Not handled:
        A model that first holds gradients after the run's tenth optimizer step (the check
        looks at the first ten), and more than eight such models.
    """

    ID = "frozen-optimizer"
    TITLE = "A model gets gradients but no optimizer holds its parameters"
    ORDER = 40

    def __init__(self, core: HealthCore) -> None:
        HealthCheck.__init__(self, core)
        self.candidates: "IdentityWeakKeyDict[Any, Record]" = IdentityWeakKeyDict()  # module -> what its steps showed
        self.records: List[Record] = []
        core.on_step(self.step)

    def step(self, optimizer: Any, record: Record) -> None:
        if self.core.state.steps < 10 and len(self.records) < 8:
            self.check()

    def _optimizer_parameters(self) -> Set[int]:
        """ids of the parameters held by every optimizer the script built, stepped or not: their
        param groups, and the inner optimizer of a wrapper that keeps one (Lookahead,
        ZeroRedundancyOptimizer, SAM-style ``base_optimizer``)."""
        held: Set[int] = set()
        seen: Set[int] = set()
        stack = list(self.core.created) + list(self.core.optimizers.keys())
        while stack:
            optimizer = stack.pop()
            if id(optimizer) in seen:
                continue
            seen.add(id(optimizer))
            try:
                for group in optimizer.param_groups:
                    held.update(id(p) for p in group["params"])
            except Exception:
                pass
            for name in ("optimizer", "base_optimizer", "optim", "inner_optimizer", "_optimizer"):
                try:
                    inner = getattr(optimizer, name, None)
                except Exception:
                    inner = None
                if inner is not None and hasattr(inner, "param_groups"):
                    stack.append(inner)
        return held

    def _fingerprint(self, params: List[Any]) -> Optional[Tuple[float, ...]]:
        try:
            return tuple(float(p.detach().double().sum()) for p in params[:3])
        except Exception:
            return None

    def check(self) -> None:
        """Root modules that hold gradients while no optimizer the script built holds any of
        their parameters; whether their weights change between steps all the same (updated
        by hand, or by an EMA) is followed over the next steps."""
        core = self.core
        held = self._optimizer_parameters()
        if not held:
            return  # no optimizer (or only empty ones): nothing to compare with
        roots = core.root_modules()
        root_params = dict((id(r), [p for p in r.parameters()]) for r in roots)
        trained_roots = [r for r in roots if any(id(p) in held for p in root_params[id(r)])]
        for root in roots:
            params = root_params[id(root)]
            if not params or any(id(p) in held for p in params):
                continue
            trained = [p for p in params if p.requires_grad and p.grad is not None]
            if not trained:
                continue
            fingerprint = self._fingerprint(trained)
            record = self.candidates.get(root)
            if record is not None:
                if fingerprint != record["fingerprint"]:
                    record["changed"] = True
                continue
            everywhere = set(id(p) for ps in root_params.values() for p in ps)
            shapes = [tuple(p.shape) for p in params]
            # a copy of a trained model (the same parameter shapes): a target network, an EMA teacher
            twins = [type(r).__name__ for r in trained_roots if [tuple(p.shape) for p in root_params[id(r)]] == shapes]
            record = {
                "module": type(root).__name__, "site": core.state.module_sites.get(root),
                "output_site": core.output_sites.get(root), "trained": len(trained), "params": len(params),
                # optimizer parameters that belong to no module the run called: the optimizer
                # was built for another instance of the model
                "orphans": len(held - everywhere), "trained_modules": [type(r).__name__ for r in trained_roots],
                "twins": twins, "fingerprint": fingerprint, "changed": False,
                "optimizers": sorted(type(o).__name__ for o in list(core.created)),
                "optimizer_parameters": len(held),
            }
            self.candidates[root] = record
            self.records.append(record)

    def findings(self) -> Optional[Finding]:
        for record in self.records:
            if record["changed"] and not record["twins"]:
                continue  # its weights change without an optimizer: updated by hand
            evidence: Dict[str, Any] = {"module": record["module"], "built_at": short_site(record["site"]),
                        "parameters_with_grad": record["trained"], "parameters": record["params"],
                        "optimizers": record["optimizers"], "optimizer_parameters": record["optimizer_parameters"]}
            if record["trained_modules"] and not record["orphans"]:
                # the optimizers train other models of the run; this one is only on the way of
                # their loss: its output should have been detached (a target network, a teacher)
                used = record["output_site"]
                evidence.update({"output_used_at": short_site(used), "trained_modules": record["trained_modules"],
                                 "weights_change": record["changed"]})
                others = sorted(set(record["trained_modules"]))
                trained = ", ".join(("another " + name) if name == record["module"] else name for name in others)
                message = (
                    "%s gets gradients for %d parameter tensors only through its output, computed %s "
                    "and entering the loss with its graph attached, while no optimizer holds its "
                    "parameters (the optimizers train %s): a target network or teacher is run under "
                    "torch.no_grad() or its output .detach()ed" % (
                        record["module"], record["trained"], "here" if used else "outside the user's code",
                        trained)
                )
                return self.finding(used or record["site"], message, evidence)
            message = (
                "%s gets gradients for %d parameter tensors, but no optimizer holds any of its "
                "parameters: optimizer.step() never updates it (was the optimizer built for another "
                "instance of the model?)" % (record["module"], record["trained"])
            )
            evidence["parameters_in_no_called_module"] = record["orphans"]
            return self.finding(record["site"], message, evidence)
        return None
