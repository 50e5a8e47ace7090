"""dead-parameters: parameters in the optimizer that never get a gradient."""

from typing import Any, Dict, List, Optional, Set

from ..frames import short_site
from .core import Finding, HealthCheck, HealthCore, Record


class DeadParameters(HealthCheck):
    """Parameters that require grad and are stepped by an optimizer got no gradient in any step
    of the run (a detached path, a layer never used in forward): that part of the model never
    learns.

    What it finds:
        Parameters that require grad and are in the optimizer being stepped never got a
        gradient at the steps of any optimizer holding them (a ``.detach()`` in ``forward``, a
        layer never called). The finding records the modules by qualified name
        (``Net.encoder.0``), their parameters, where each was built and whether its
        ``forward`` ran (or ran only under ``no_grad``). A never-called branch of a module that
        selects among its children (a ``ModuleList``/``ModuleDict`` indexed by a value, of which
        another child ran: a supernet's candidates, MoE experts) is information, "not sampled in
        N steps", with the selecting module. Silent on parameters frozen on purpose
        (``requires_grad_(False)``), a GAN's two optimizers with ``fake.detach()``, and a
        parameter two optimizers share that gets its gradient at the other's steps (InfoGAN).

    Why it matters:
        A parameter with no gradient is never updated: that part of the model keeps its
        initial weights while the rest trains around it, and the run shows no error.

    Fix safety:
        No fix is offered: whether the path should carry a gradient (a stray ``.detach()``) or
        the layer should leave the model is the user's decision.

    Not handled:
        Branches chosen among modules that are not children of one ``ModuleList``/``ModuleDict``
        (``getattr(self, name)``, an ``if`` in ``forward``) still show as warnings when a short
        run skips them.
    """

    ID = "dead-parameters"
    TITLE = "Parameters in the optimizer never get a gradient"
    ORDER = 30

    def __init__(self, core: HealthCore) -> None:
        HealthCheck.__init__(self, core)
        core.on_live_step(self.step)

    def step(self, optimizer: Any, record: Record, params: List[Any], holding: List[Any]) -> None:
        """The parameters that have had no gradient yet are described (module, where it was
        built) while the objects are alive."""
        core = self.core
        seen = record["params"]
        unnamed = [(p, seen[id(p)]) for p in params if p.grad is None and seen[id(p)]["requires_grad"]]
        if not unnamed:
            return
        names = core.parameter_names()
        for p, info in unnamed:
            if id(p) not in names:
                continue
            root, name = names[id(p)]
            owner = name.rpartition(".")[0]
            try:
                module = root.get_submodule(owner) if owner else root
            except Exception:
                module = None
            info["name"] = name
            info["module"] = "%s.%s" % (type(root).__name__, owner) if owner else type(root).__name__
            info["type"] = type(module).__name__ if module is not None else None
            info["site"] = core.state.module_sites.get(module) if module is not None else None
            info["called"] = module in core.called if module is not None else None
            # a forward run only under no_grad (an evaluation pass) could not have routed a gradient
            info["called_with_grad"] = module in core.called_with_grad if module is not None else None
            info["branch_of"] = (
                self._selecting_container(root, owner) if info["called_with_grad"] is False else None
            )

    def _selecting_container(self, root: Any, owner: str) -> Optional[str]:
        """The ModuleList/ModuleDict among the ancestors of the never-called module ``owner``
        of which another child ran while the child holding ``owner`` never did: the forward
        selects among those children (a supernet's choice block, an MoE expert, a branch
        indexed by a value), and a short run routes to only some. None otherwise."""
        nn = self.core.torch.nn
        called_with_grad = self.core.called_with_grad
        parts = owner.split(".") if owner else []
        for depth in range(len(parts) - 1, -1, -1):
            prefix = ".".join(parts[:depth])
            try:
                container = root.get_submodule(prefix) if prefix else root
            except Exception:
                continue
            if not isinstance(container, (nn.ModuleList, nn.ModuleDict)):
                continue
            branch = container._modules.get(parts[depth])
            if branch is None:
                continue
            if any(m in called_with_grad for m in branch.modules()):
                return None  # its own branch ran: the module was skipped inside it
            if any(m in called_with_grad for key, child in container._modules.items()
                   if key != parts[depth] and child is not None for m in child.modules()):
                return "%s.%s" % (type(root).__name__, prefix) if prefix else type(root).__name__
        return None

    def findings(self) -> Optional[List[Finding]]:
        records = self.core.records
        dead: Dict[str, Dict[str, Any]] = {}  # module -> its parameters that never had a gradient, in order
        steps = 0
        optimizers: List[str] = []
        # a parameter two optimizers hold (InfoGAN's info optimizer and the discriminator's) is
        # alive when it had a gradient at the steps of either
        alive: Set[int] = set(key for record in records for key, info in record["params"].items() if info["grad"])
        for record in records:
            if not record["live_steps"]:
                continue
            steps = max(steps, record["live_steps"])
            for key, info in record["params"].items():
                if info["grad"] or key in alive or not info["requires_grad"] or not info["name"]:
                    continue
                entry = dead.setdefault(info["module"], {
                    "module": info["module"], "type": info["type"], "parameters": [],
                    "built_at": short_site(info["site"]), "forward_called": info["called"], "site": info["site"],
                    "forward_called_with_grad": info.get("called_with_grad"), "branch_of": info.get("branch_of"),
                })
                if info["name"] not in entry["parameters"]:
                    entry["parameters"].append(info["name"])
                if record["type"] not in optimizers:
                    optimizers.append(record["type"])
        if not dead:
            return None
        findings: List[Finding] = []
        unsampled = [d for d in dead.values() if d["branch_of"]]
        described = [d for d in dead.values() if not d["branch_of"]]
        fallback = next((r["site"] for r in records if r["site"]), None)
        plural = "" if steps == 1 else "s"
        if described:
            site = next((d["site"] for d in described if d["site"]), None)
            count = sum(len(d["parameters"]) for d in described)
            listed = ", ".join(
                "%s (%s%s)" % (d["module"], d["type"], "" if d["forward_called_with_grad"] else
                               ", called only under no_grad" if d["forward_called"] else ", never called")
                for d in described[:5]
            )
            message = (
                "%d parameter tensor%s that require grad and are in the optimizer got no gradient in "
                "%d optimizer step%s: %s" % (count, "" if count == 1 else "s", steps, plural, listed)
            )
            modules = [dict((k, v) for k, v in d.items() if k not in ("site", "branch_of")) for d in described]
            evidence = {"modules": modules, "steps": steps, "optimizers": optimizers}
            findings.append(self.finding(site or fallback, message, evidence))
        if unsampled:
            site = next((d["site"] for d in unsampled if d["site"]), None)
            count = sum(len(d["parameters"]) for d in unsampled)
            containers: List[str] = []
            for d in unsampled:
                if d["branch_of"] not in containers:
                    containers.append(d["branch_of"])
            shown = ", ".join(containers[:3]) + (" and %d more" % (len(containers) - 3) if len(containers) > 3 else "")
            message = (
                "%d branch module%s (%d parameter tensor%s) %s not sampled in %d optimizer step%s: the "
                "forward picks among the children of %s, and a short run routes to only some (by design "
                "in a supernet or a mixture of experts)" % (
                    len(unsampled), "" if len(unsampled) == 1 else "s", count, "" if count == 1 else "s",
                    "was" if len(unsampled) == 1 else "were", steps, plural, shown)
            )
            modules = [{"module": d["module"], "type": d["type"], "parameters": len(d["parameters"]),
                        "branch_of": d["branch_of"], "built_at": d["built_at"]} for d in unsampled[:20]]
            evidence = {"branches": len(unsampled), "parameters": count, "selecting_modules": containers,
                        "modules": modules, "steps": steps}
            findings.append(self.finding(site or fallback, message, evidence, level="information"))
        return findings
