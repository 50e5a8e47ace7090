"""What several health checks observe, watched once: backward calls, the optimizers (built,
stepped, zero_grad), the forward of every module, the passes over DataLoaders (with hashes
of the samples they yield); and ``HealthCheck``, the base of every check.

A check subscribes to the observations (``on_backward``, ``on_step``, ``on_live_step``,
``on_forward_pre``, ``on_forward``, ``on_pass_end``); it never patches torch for what the
core already watches. Nothing here imports torch at import time: the main process imports
the checks to read their documentation.
"""

import hashlib
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Set, Tuple, Union

from ..frames import FrameRecord, user_call_site
from ..identity import IdentityWeakKeyDict, IdentityWeakSet

if TYPE_CHECKING:  # the main process imports the checks: only what they need at run time
    from ..hooks import TorchHooks
    from ..state import RunState

# A finding as evidence.json holds it (id, file, line, message, evidence, level); what a
# check's findings() gives: one, a list of them, or None
Finding = Dict[str, Any]
Findings = Union[Finding, List[Finding], None]
# What one optimizer's steps or one pass over a DataLoader showed, as plain data
Record = Dict[str, Any]

_HEALTH_MAX_SAMPLES = 4096  # sample hashes kept per pass over a DataLoader


class HealthCheck(object):
    """Base of every health check: one class per module of this package.

    A check declares ``ID`` (the finding's id, the SARIF rule id), ``TITLE`` (one line),
    ``LEVEL`` (its findings' default level: "warning" or "information"), ``LINT_RULE`` (the
    lint rule whose fix its findings offer, or None), ``ORDER`` (its place in the report) and a
    docstring that is its documentation: a first paragraph, then the sections of the lint
    rules ("What it finds", "Why it matters", "Fix safety", "Not handled"). ``__init__``
    subscribes to the core's observations; ``findings()`` says what the run showed.
    """

    ID = ""
    TITLE = ""
    LEVEL = "warning"
    LINT_RULE: Optional[str] = None
    ORDER = 0

    def __init__(self, core: "HealthCore") -> None:
        self.core = core

    def finding(
        self, site: Optional[FrameRecord], message: str, evidence: Dict[str, Any], level: Optional[str] = None,
    ) -> Finding:
        file, line = (site or {}).get("file"), (site or {}).get("line")
        return {"id": self.ID, "file": file, "line": line, "message": message, "evidence": evidence,
                "level": level or self.LEVEL}

    def findings(self) -> Findings:
        """A finding, a list of them, or None."""
        return None


class HealthCore(object):
    """The observations of one run that the checks share."""

    def __init__(self, state: "RunState", torch: Any, hooks: "TorchHooks") -> None:
        self.state = state
        self.torch = torch
        self.hooks = hooks
        self.backwards = 0
        self.resets = 0  # zero_grad() calls of any optimizer or module
        self.depth = 0  # modules whose forward is running
        self.roots: "IdentityWeakSet" = IdentityWeakSet()  # modules called while no other module ran
        self.called: "IdentityWeakSet" = IdentityWeakSet()
        self.called_with_grad: "IdentityWeakSet" = IdentityWeakSet()  # modules whose forward ran with grad mode on
        # what each optimizer's steps showed, as plain data: the script's objects are gone by
        # the time the findings are written (main() has returned)
        self.optimizers: "IdentityWeakKeyDict[Any, Record]" = IdentityWeakKeyDict()  # optimizer -> its record
        self.records: List[Record] = []
        # every optimizer the script built (any Optimizer subclass, wherever it was built),
        # stepped yet or not: a GAN's discriminator optimizer steps after the generator's
        self.created: "IdentityWeakSet" = IdentityWeakSet()
        # root module -> where its output was used
        self.output_sites: "IdentityWeakKeyDict[Any, Optional[FrameRecord]]" = IdentityWeakKeyDict()
        self.serials: "IdentityWeakKeyDict[Any, int]" = IdentityWeakKeyDict()  # root module -> a number that is never reused
        self.serial_count = 0
        self.active_passes: List[Set[int]] = []  # per DataLoader pass running: serials of the root modules it called
        self.pass_clock = 0  # DataLoader passes started so far
        # DataLoader -> (serial, construction site)
        self.loaders: "IdentityWeakKeyDict[Any, Tuple[int, Optional[FrameRecord]]]" = IdentityWeakKeyDict()
        self.passes: List[Record] = []  # finished passes over DataLoaders
        self._backward: List[Callable[[Any], None]] = []
        self._step: List[Callable[[Any, Record], None]] = []
        self._live_step: List[Callable[[Any, Record, List[Any], List[Any]], None]] = []
        self._forward_pre: List[Callable[[Any, Any], None]] = []
        self._forward: List[Callable[[Any, Any, Any], None]] = []
        self._pass_end: List[Callable[[Any, Record], None]] = []

    # subscriptions ---------------------------------------------------------------------------
    def on_backward(self, fn: Callable[[Any], None]) -> None:
        """``fn(tensors)`` before each ``torch.autograd.backward`` (``backwards`` counts it)."""
        self._backward.append(fn)

    def on_step(self, fn: Callable[[Any, Record], None]) -> None:
        """``fn(optimizer, record)`` before every optimizer step."""
        self._step.append(fn)

    def on_live_step(self, fn: Callable[[Any, Record, List[Any], List[Any]], None]) -> None:
        """``fn(optimizer, record, params, holding)`` before a step at which some of the
        optimizer's parameters hold a gradient (``holding``), after the record noted them."""
        self._live_step.append(fn)

    def on_forward_pre(self, fn: Callable[[Any, Any], None]) -> None:
        """``fn(module, args)`` as a module's forward starts."""
        self._forward_pre.append(fn)

    def on_forward(self, fn: Callable[[Any, Any, Any], None]) -> None:
        """``fn(module, args, output)`` as a module's forward ends."""
        self._forward.append(fn)

    def on_pass_end(self, fn: Callable[[Any, Record], None]) -> None:
        """``fn(loader, record)`` when a pass over a DataLoader that yielded a batch ends."""
        self._pass_end.append(fn)

    # installation ----------------------------------------------------------------------------
    def install(self) -> None:
        torch = self.torch
        self._wrap_backward()
        self._wrap_optimizer_init()
        for owner in (torch.optim.Optimizer, torch.nn.Module):
            self._wrap_zero_grad(owner)
        self.hooks.step_pre.add(self.step_pre_hook)
        self.hooks.forward_pre.add(self.forward_pre_hook)
        self.hooks.forward.add(self.forward_hook)
        self._wrap_dataloader()

    def _wrap_backward(self) -> None:
        core = self

        def backward(real_backward: Callable[..., Any], tensors: Any, *args: Any, **kwargs: Any) -> Any:
            core.backwards += 1
            for fn in core._backward:
                fn(tensors)
            return real_backward(tensors, *args, **kwargs)

        self.hooks.around(self.torch.autograd, "backward", backward)

    def _wrap_optimizer_init(self) -> None:
        core = self

        def optimizer_init(real_init: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> None:
            real_init(self, *args, **kwargs)
            try:
                core.created.add(self)
            except TypeError:
                pass

        self.hooks.around(self.torch.optim.Optimizer, "__init__", optimizer_init)

    def _wrap_zero_grad(self, owner: type) -> None:
        core = self

        def zero_grad(real: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> Any:
            core.resets += 1
            return real(self, *args, **kwargs)

        self.hooks.around(owner, "zero_grad", zero_grad)

    def _wrap_dataloader(self) -> None:
        core = self

        def dataloader_init(real_init: Callable[..., Any], self: Any, *args: Any, **kwargs: Any) -> None:
            real_init(self, *args, **kwargs)
            try:
                core.loaders[self] = (len(core.loaders) + len(core.passes), user_call_site())
            except TypeError:
                pass

        def dataloader_iter(real_iter: Callable[[Any], Any], self: Any) -> Iterator[Any]:
            return core.watch_pass(self, real_iter(self))

        self.hooks.dataloader("__init__", dataloader_init)
        self.hooks.dataloader("__iter__", dataloader_iter)

    # hooks -----------------------------------------------------------------------------------
    def forward_pre_hook(self, module: Any, args: Any) -> None:
        if self.depth == 0:
            self.roots.add(module)
            if self.active_passes:
                serial = self.serials.get(module)
                if serial is None:
                    self.serial_count += 1
                    serial = self.serials[module] = self.serial_count
                for called in self.active_passes:
                    called.add(serial)
        self.depth += 1
        self.called.add(module)
        if self.torch.is_grad_enabled():
            self.called_with_grad.add(module)
        for fn in self._forward_pre:
            fn(module, args)
        return None

    def forward_hook(self, module: Any, args: Any, output: Any) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and module not in self.output_sites:
            tensor = first_tensor(output)
            if isinstance(tensor, self.torch.Tensor) and tensor.requires_grad:
                self.output_sites[module] = user_call_site()
        for fn in self._forward:
            fn(module, args, output)
        return None

    def step_pre_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        record = self.optimizers.get(optimizer)
        if record is None:
            record = {"type": type(optimizer).__name__, "steps": 0, "live_steps": 0, "site": None,
                      "params": {}, "devices": set()}
            self.optimizers[optimizer] = record
            self.records.append(record)
        record["steps"] += 1
        params = [p for group in optimizer.param_groups for p in group["params"]]
        holding = [p for p in params if p.grad is not None]
        for fn in self._step:
            fn(optimizer, record)
        if not holding:
            return None
        record["live_steps"] += 1
        if record["site"] is None:
            record["site"] = user_call_site()
        self._note_parameters(record, params)
        for live in self._live_step:
            live(optimizer, record, params, holding)
        return None

    def _note_parameters(self, record: Record, params: List[Any]) -> None:
        """Which parameters have had a gradient at a step, on which devices they are."""
        seen = record["params"]
        for p in params:
            info = seen.get(id(p))
            if info is None:
                info = seen[id(p)] = {"grad": False, "requires_grad": True, "name": None}
                record["devices"].add(p.device.type)
            info["requires_grad"] = bool(p.requires_grad)
            if p.grad is not None:
                info["grad"] = True

    # passes over DataLoaders -------------------------------------------------------------------
    def watch_pass(self, loader: Any, iterator: Any) -> Iterator[Any]:
        steps, backwards = self.state.steps, self.backwards
        hashes: Dict[str, int] = {}
        batches = 0
        called: Set[int] = set()
        self.active_passes.append(called)
        self.pass_clock += 1
        started = self.pass_clock
        try:
            for batch in iterator:
                batches += 1
                if len(hashes) < _HEALTH_MAX_SAMPLES:
                    try:
                        self._hash_samples(batch, hashes)
                    except Exception:
                        pass
                yield batch
        finally:
            if called in self.active_passes:
                self.active_passes.remove(called)
            if batches:
                serial, site = self.loaders.get(loader, (None, None))
                record = {
                    "loader": serial if serial is not None else -len(self.passes) - 1, "site": site,
                    "models": called, "started": started,
                    "train": self.state.steps > steps or self.backwards > backwards,
                    "hashes": hashes, "batches": batches,
                }
                for fn in self._pass_end:
                    fn(loader, record)
                self.passes.append(record)

    def _hash_samples(self, batch: Any, hashes: Dict[str, int]) -> None:
        """Count one hash per sample of ``batch``: its row of every tensor the batch holds."""
        torch = self.torch
        leaves: List[Any] = []

        def collect(value: Any) -> None:
            if isinstance(value, torch.Tensor):
                leaves.append(value)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    collect(item)
            elif isinstance(value, dict):
                for key in sorted(value, key=str):
                    collect(value[key])

        collect(batch)
        if not leaves or leaves[0].dim() == 0:
            return
        rows = leaves[0].shape[0]
        digests = [hashlib.sha1() for _ in range(rows)]
        for tensor in leaves:
            if tensor.dim() == 0 or tensor.shape[0] != rows:
                continue
            flat = tensor.detach().cpu().contiguous()
            try:
                data = flat.numpy().tobytes()
            except Exception:
                data = repr(flat.tolist()).encode()
            size = len(data) // rows if rows else 0
            for i in range(rows):
                digests[i].update(data[i * size:(i + 1) * size])
        for digest in digests:
            key = digest.hexdigest()
            hashes[key] = hashes.get(key, 0) + 1

    # the modules of the run ------------------------------------------------------------------
    def root_modules(self) -> List[Any]:
        """The outermost modules called, without those inside another one."""
        roots = list(self.roots)
        inner: Set[int] = set()
        for root in roots:
            for child in root.modules():
                if child is not root:
                    inner.add(id(child))
        return [r for r in roots if id(r) not in inner]

    def parameter_names(self) -> Dict[int, Tuple[Any, str]]:
        """id(parameter) -> (root module, its qualified name there)."""
        names: Dict[int, Tuple[Any, str]] = {}
        for root in self.root_modules():
            for name, p in root.named_parameters():
                names.setdefault(id(p), (root, name))
        return names

    def module_name(self, module: Any) -> Optional[str]:
        """``Net.encoder.0``: the module's qualified name under its root module."""
        for root in self.root_modules():
            if root is module:
                return type(root).__name__
            for name, child in root.named_modules():
                if child is module:
                    return "%s.%s" % (type(root).__name__, name)
        return None


def first_tensor(output: Any) -> Any:
    """A module's output, or the first item of a tuple or list it returns."""
    return output[0] if isinstance(output, (tuple, list)) and output else output
