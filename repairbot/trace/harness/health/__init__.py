"""Health checks: the silent training bugs a few real steps already show (off with --no-health).

Every check reports only what the run showed, once, with the user's source line (the same
innermost-user-frame rule as failures) and the evidence behind it. They stay cheap: one
finiteness test per module output until the first offender, a pass over the optimizer's
parameters per step, and sample hashes of the few batches the harness lets through.
"""

import hashlib
import sys
import weakref

from ..frames import outside_harness, user_call_site
from ..frames import shape as _shape
from ..frames import short_site as _short_site

NAME = "health"
EVIDENCE_KEY = "health"


def enabled(run):
    return bool(run.config.get("limits", {}).get("health", True))


def install(run):
    probes = HealthProbes(run.state, run.torch, run.hooks)
    probes.install()
    return probes.findings


# Functional losses that broadcast input against target without a word. mse/l1/smooth_l1/huber
# warn ("Using a target size ...": a pattern fixes that), the BCE ones raise.
_SILENT_LOSSES = (
    "kl_div", "soft_margin_loss", "poisson_nll_loss", "hinge_embedding_loss", "multilabel_soft_margin_loss",
)
_HEALTH_MAX_SAMPLES = 4096  # sample hashes kept per pass over a DataLoader


def _numel(shape):
    count = 1
    for size in shape:
        count *= size
    return count


def _health_site(record):
    return (record or {}).get("file"), (record or {}).get("line")


class HealthProbes:
    """Watches the run for silent bugs; ``findings()`` says what it saw."""

    def __init__(self, state, torch, hooks):
        self.state = state
        self.torch = torch
        self.hooks = hooks
        self.backwards = 0
        self.resets = 0  # zero_grad() calls of any optimizer or module
        self.depth = 0  # modules whose forward is running
        self.roots = weakref.WeakSet()  # modules called while no other module ran
        self.called = weakref.WeakSet()
        self.called_with_grad = weakref.WeakSet()  # modules whose forward ran with grad mode on
        self.custom_losses = 0  # user-defined loss modules whose forward is running
        self._custom_loss_classes = {}
        self.nan = None
        self.nonfinite_output = None
        # what each optimizer's steps showed, as plain data: the script's objects are gone by
        # the time the findings are written (main() has returned)
        self.optimizers = weakref.WeakKeyDictionary()  # optimizer -> its record
        self.records = []
        # every optimizer the script built (any Optimizer subclass, wherever it was built),
        # stepped yet or not: a GAN's discriminator optimizer steps after the generator's
        self.created = weakref.WeakSet()
        self.accumulation = None
        self.frozen_candidates = weakref.WeakKeyDictionary()  # module -> what its steps showed
        self.frozen_records = []
        self.output_sites = weakref.WeakKeyDictionary()  # root module -> where its output was used
        self.serials = weakref.WeakKeyDictionary()  # root module -> a number that is never reused
        self.serial_count = 0
        self.active_passes = []  # per DataLoader pass running: serials of the root modules it called
        self.pass_clock = 0  # DataLoader passes started so far
        self.resets_at = []  # pass_clock whenever a layer's reset_parameters() ran (k-fold: weights reset)
        self.broadcasts = []
        self.loaders = weakref.WeakKeyDictionary()  # DataLoader -> (serial, construction site)
        self.loader_samples = weakref.WeakKeyDictionary()  # DataLoader -> (base dataset, its indices)
        self.passes = []  # finished passes over DataLoaders

    # installation ---------------------------------------------------------------------------
    def install(self):
        torch = self.torch
        nn = torch.nn
        self._wrap_backward()
        self._wrap_optimizer_init()
        for owner in (torch.optim.Optimizer, nn.Module):
            self._wrap_zero_grad(owner)
        self.hooks.step_pre.add(self.step_pre_hook)
        self.hooks.forward_pre.add(self.forward_pre_hook)
        self.hooks.forward.add(self.forward_hook)
        self._loss_base = getattr(nn.modules.loss, "_Loss", None)
        for name in _SILENT_LOSSES:
            self._wrap_loss(name)
        self._wrap_dataloader()
        self._wrap_reset_parameters()

    def _wrap_reset_parameters(self):
        nn = self.torch.nn
        probes = self
        for name in ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                     "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm",
                     "Embedding", "RNN", "LSTM", "GRU"):
            cls = getattr(nn, name, None)
            real = getattr(cls, "reset_parameters", None) if cls is not None else None
            if real is None or "reset_parameters" not in cls.__dict__:
                continue

            def reset_parameters(real, self, *args, **kwargs):
                # the call of the layer's own __init__ builds it; any other call re-initialises
                caller = outside_harness(sys._getframe(1))
                if (caller is None or caller.f_code.co_name != "__init__") and (
                        not probes.resets_at or probes.resets_at[-1] != probes.pass_clock):
                    probes.resets_at.append(probes.pass_clock)
                return real(self, *args, **kwargs)

            self.hooks.around(cls, "reset_parameters", reset_parameters)

    def _wrap_backward(self):
        probes = self

        def backward(real_backward, tensors, *args, **kwargs):
            probes.backwards += 1
            if probes.nan is None and isinstance(tensors, probes.torch.Tensor):
                probes.check_loss(tensors)
            return real_backward(tensors, *args, **kwargs)

        self.hooks.around(self.torch.autograd, "backward", backward)

    def _wrap_optimizer_init(self):
        probes = self

        def optimizer_init(real_init, self, *args, **kwargs):
            real_init(self, *args, **kwargs)
            try:
                probes.created.add(self)
            except TypeError:
                pass

        self.hooks.around(self.torch.optim.Optimizer, "__init__", optimizer_init)

    def _wrap_zero_grad(self, owner):
        probes = self

        def zero_grad(real, self, *args, **kwargs):
            probes.resets += 1
            return real(self, *args, **kwargs)

        self.hooks.around(owner, "zero_grad", zero_grad)

    def _wrap_loss(self, name):
        functional = self.torch.nn.functional
        if getattr(functional, name, None) is None:
            return
        probes = self

        def loss(real, input, target, *args, **kwargs):
            if not probes.custom_losses:
                probes.check_broadcast(name, input, target)
            return real(input, target, *args, **kwargs)

        self.hooks.around(functional, name, loss)

    def _wrap_dataloader(self):
        probes = self

        def dataloader_init(real_init, self, *args, **kwargs):
            real_init(self, *args, **kwargs)
            try:
                probes.loaders[self] = (len(probes.loaders) + len(probes.passes), user_call_site())
            except TypeError:
                pass

        def dataloader_iter(real_iter, self):
            return probes.watch_pass(self, real_iter(self))

        self.hooks.dataloader("__init__", dataloader_init)
        self.hooks.dataloader("__iter__", dataloader_iter)

    # hooks ---------------------------------------------------------------------------------
    def _is_custom_loss(self, module):
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

    def forward_pre_hook(self, module, args):
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
        if self._is_custom_loss(module):
            self.custom_losses += 1
        return None

    def forward_hook(self, module, args, output):
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and module not in self.output_sites:
            tensor = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(tensor, self.torch.Tensor) and tensor.requires_grad:
                self.output_sites[module] = user_call_site()
        if self._is_custom_loss(module):
            self.custom_losses = max(0, self.custom_losses - 1)
            if len(args) >= 2:
                self.check_broadcast(type(module).__name__, args[0], args[1])
        if self.nonfinite_output is None and self.nan is None:
            tensor = output[0] if isinstance(output, (tuple, list)) and output else output
            if isinstance(tensor, self.torch.Tensor) and tensor.is_floating_point() and tensor.numel() \
                    and not bool(self.torch.isfinite(tensor.detach()).all()):
                self.nonfinite_output = {"module": module, "step": self.state.steps, "shape": _shape(tensor)}
        return None

    def step_pre_hook(self, optimizer, args, kwargs):
        record = self.optimizers.get(optimizer)
        if record is None:
            record = {"type": type(optimizer).__name__, "steps": 0, "live_steps": 0, "site": None,
                      "last": None, "params": {}, "devices": set()}
            self.optimizers[optimizer] = record
            self.records.append(record)
        record["steps"] += 1
        params = [p for group in optimizer.param_groups for p in group["params"]]
        holding = [p for p in params if p.grad is not None]
        if self.state.steps < 10 and len(self.frozen_records) < 8:
            self._check_frozen()
        if not holding:
            return None
        record["live_steps"] += 1
        if record["site"] is None:
            record["site"] = user_call_site()
        self._note_parameters(record, params)
        if self.accumulation is None:
            self._check_accumulation(optimizer, record, holding)
        return None

    # checks --------------------------------------------------------------------------------
    def check_loss(self, loss):
        torch = self.torch
        try:
            if not loss.is_floating_point() or bool(torch.isfinite(loss.detach()).all()):
                return
        except Exception:
            return
        value = float(loss.detach().reshape(-1)[0]) if loss.numel() else None
        evidence = {"step": self.state.steps + 1, "backward_calls": self.backwards,
                    "value": str(value), "shape": _shape(loss), "dtype": str(loss.dtype).replace("torch.", "")}
        culprit = None
        names = self._parameter_names()
        for root in self._root_modules():
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
            described = self._module_name(module, names) or type(module).__name__
            evidence["first_nonfinite_output"] = {
                "module": described, "type": type(module).__name__, "step": seen["step"] + 1,
                "shape": seen["shape"], "built_at": _short_site(self.state.module_sites.get(module)),
            }
            culprit = culprit or "the output of %s (%s)" % (described, type(module).__name__)
        site = user_call_site()
        message = "the loss passed to backward() is %s at optimizer step %d" % (value, self.state.steps + 1)
        if culprit:
            message += "; the first non-finite value seen: %s" % culprit
        else:
            message += " while every module output and parameter was finite: the loss computation made it"
        self.nan = self._finding("nan-loss", site, message, evidence)

    def _note_parameters(self, record, params):
        """Which parameters have had a gradient at a step; those that never had one are
        described (module, where it was built) while the objects are alive."""
        seen = record["params"]
        unnamed = []
        for p in params:
            info = seen.get(id(p))
            if info is None:
                info = seen[id(p)] = {"grad": False, "requires_grad": True, "name": None}
                record["devices"].add(p.device.type)
            info["requires_grad"] = bool(p.requires_grad)
            if p.grad is not None:
                info["grad"] = True
            elif info["requires_grad"]:
                unnamed.append((p, info))
        if not unnamed:
            return
        names = self._parameter_names()
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
            info["site"] = self.state.module_sites.get(module) if module is not None else None
            info["called"] = module in self.called if module is not None else None
            # a forward run only under no_grad (an evaluation pass) could not have routed a gradient
            info["called_with_grad"] = module in self.called_with_grad if module is not None else None
            info["branch_of"] = (
                self._selecting_container(root, owner) if info["called_with_grad"] is False else None
            )

    def _selecting_container(self, root, owner):
        """The ModuleList/ModuleDict among the ancestors of the never-called module ``owner``
        of which another child ran while the child holding ``owner`` never did: the forward
        selects among those children (a supernet's choice block, an MoE expert, a branch
        indexed by a value), and a short run routes to only some. None otherwise."""
        nn = self.torch.nn
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
            if any(m in self.called_with_grad for m in branch.modules()):
                return None  # its own branch ran: the module was skipped inside it
            if any(m in self.called_with_grad for key, child in container._modules.items()
                   if key != parts[depth] and child is not None for m in child.modules()):
                return "%s.%s" % (type(root).__name__, prefix) if prefix else type(root).__name__
        return None

    def _check_accumulation(self, optimizer, record, holding):
        torch = self.torch
        grads = [p.grad for p in holding]
        if any(g.is_sparse for g in grads):
            return
        try:
            norms = torch._foreach_norm(grads) if hasattr(torch, "_foreach_norm") else [g.norm() for g in grads]
            norm = float(torch.stack([n.float() for n in norms]).norm())
        except Exception:
            return
        snapshot = {"resets": self.resets, "backwards": self.backwards, "norm": norm,
                    "grads": dict((id(p), (p.grad, p.grad._version)) for p in holding)}
        last, record["last"] = record["last"], snapshot
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
        self.accumulation = self._finding("grad-accumulation", user_call_site(), message, evidence)

    def _optimizer_parameters(self):
        """ids of the parameters held by every optimizer the script built, stepped or not: their
        param groups, and the inner optimizer of a wrapper that keeps one (Lookahead,
        ZeroRedundancyOptimizer, SAM-style ``base_optimizer``)."""
        held = set()
        seen = set()
        stack = list(self.created) + list(self.optimizers.keys())
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

    def _fingerprint(self, params):
        try:
            return tuple(float(p.detach().double().sum()) for p in params[:3])
        except Exception:
            return None

    def _check_frozen(self):
        """Root modules that hold gradients while no optimizer the script built holds any of
        their parameters; whether their weights change between steps all the same (updated
        by hand, or by an EMA) is followed over the next steps."""
        held = self._optimizer_parameters()
        if not held:
            return  # no optimizer (or only empty ones): nothing to compare with
        roots = self._root_modules()
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
            record = self.frozen_candidates.get(root)
            if record is not None:
                if fingerprint != record["fingerprint"]:
                    record["changed"] = True
                continue
            everywhere = set(id(p) for ps in root_params.values() for p in ps)
            shapes = [tuple(p.shape) for p in params]
            # a copy of a trained model (the same parameter shapes): a target network, an EMA teacher
            twins = [type(r).__name__ for r in trained_roots if [tuple(p.shape) for p in root_params[id(r)]] == shapes]
            record = {
                "module": type(root).__name__, "site": self.state.module_sites.get(root),
                "output_site": self.output_sites.get(root), "trained": len(trained), "params": len(params),
                # optimizer parameters that belong to no module the run called: the optimizer
                # was built for another instance of the model
                "orphans": len(held - everywhere), "trained_modules": [type(r).__name__ for r in trained_roots],
                "twins": twins, "fingerprint": fingerprint, "changed": False,
                "optimizers": sorted(type(o).__name__ for o in list(self.created)),
                "optimizer_parameters": len(held),
            }
            self.frozen_candidates[root] = record
            self.frozen_records.append(record)

    def _frozen(self):
        for record in self.frozen_records:
            if record["changed"] and not record["twins"]:
                continue  # its weights change without an optimizer: updated by hand
            evidence = {"module": record["module"], "built_at": _short_site(record["site"]),
                        "parameters_with_grad": record["trained"], "parameters": record["params"],
                        "optimizers": record["optimizers"], "optimizer_parameters": record["optimizer_parameters"]}
            if record["trained_modules"] and not record["orphans"]:
                # the optimizers train other models of the run; this one is only on the way of
                # their loss: its output should have been detached (a target network, a teacher)
                used = record["output_site"]
                evidence.update({"output_used_at": _short_site(used), "trained_modules": record["trained_modules"],
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
                return self._finding("frozen-optimizer", used or record["site"], message, evidence)
            message = (
                "%s gets gradients for %d parameter tensors, but no optimizer holds any of its "
                "parameters: optimizer.step() never updates it (was the optimizer built for another "
                "instance of the model?)" % (record["module"], record["trained"])
            )
            evidence["parameters_in_no_called_module"] = record["orphans"]
            return self._finding("frozen-optimizer", record["site"], message, evidence)
        return None

    def check_broadcast(self, name, input, target):
        torch = self.torch
        if len(self.broadcasts) >= 3 or not isinstance(input, torch.Tensor) or not isinstance(target, torch.Tensor):
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
               for item in self.broadcasts):
            return
        message = (
            "%s compares input %s with target %s: they broadcast to %s, so every prediction is "
            "compared with every target (no error, no warning)"
            % (name, _shape_text(a), _shape_text(b), _shape_text(shape))
        )
        evidence = {"loss": name, "input_shape": list(a), "target_shape": list(b),
                    "broadcast_shape": list(shape), "step": self.state.steps + 1}
        self.broadcasts.append(self._finding("broadcast-loss", user_call_site(), message, evidence))

    # data leakage ----------------------------------------------------------------------------
    def watch_pass(self, loader, iterator):
        steps, backwards = self.state.steps, self.backwards
        hashes = {}
        batches = 0
        called = set()
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
                # once per loader: a pass per epoch must not copy the index set of a big dataset
                known = self.loader_samples.get(loader)
                if known is None:
                    try:
                        known = self._loader_samples(loader)
                    except Exception:
                        known = (None, _UNKNOWN)
                    try:
                        self.loader_samples[loader] = known
                    except TypeError:
                        pass
                base, indices = known
                self.passes.append({
                    "loader": serial if serial is not None else -len(self.passes) - 1, "site": site,
                    "base": base, "indices": indices, "models": called, "started": started,
                    "train": self.state.steps > steps or self.backwards > backwards,
                    "hashes": hashes, "batches": batches,
                })

    def _hash_samples(self, batch, hashes):
        torch = self.torch
        leaves = []

        def collect(value):
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

    def _resolve_dataset(self, dataset):
        """(base dataset, indices into it or None for all of it), through nested Subsets
        (``random_split`` makes Subsets too)."""
        from torch.utils.data import Subset

        indices = None
        while isinstance(dataset, Subset):
            own = [int(i) for i in dataset.indices]
            indices = own if indices is None else [own[i] for i in indices]
            dataset = dataset.dataset
        return dataset, indices

    def _sampler_indices(self, sampler, depth=0):
        """The indices ``sampler`` can yield: a set, None for any index of the dataset, or
        _UNKNOWN (a custom sampler that does not say: the sample hashes decide then)."""
        from torch.utils.data import sampler as samplers

        if sampler is None or isinstance(sampler, (samplers.SequentialSampler, samplers.RandomSampler)):
            return None
        if depth > 4:
            return _UNKNOWN
        if isinstance(sampler, samplers.WeightedRandomSampler):
            return set(i for i, w in enumerate(sampler.weights.tolist()) if w > 0)
        if isinstance(sampler, samplers.BatchSampler):
            return self._sampler_indices(sampler.sampler, depth + 1)
        listed = _index_list(sampler)  # an index list given as the sampler, or batches of them
        if listed is not None:
            return listed
        # SubsetRandomSampler, and the custom samplers that keep their indices (SubsetSampler)
        for name in ("indices", "idx", "index", "ids"):
            listed = _index_list(getattr(sampler, name, None))
            if listed is not None:
                return listed
        inner = getattr(sampler, "sampler", None)
        if isinstance(inner, samplers.Sampler):
            return self._sampler_indices(inner, depth + 1)
        return _UNKNOWN

    def _loader_samples(self, loader):
        """(base dataset, the set of its indices the loader can yield, None for all of it, or
        _UNKNOWN): the loader's Subsets and its sampler composed."""
        from torch.utils.data import sampler as samplers

        base, subset = self._resolve_dataset(getattr(loader, "dataset", None))
        batch_sampler = getattr(loader, "batch_sampler", None)
        if batch_sampler is not None and not isinstance(batch_sampler, samplers.BatchSampler):
            chosen = self._sampler_indices(batch_sampler)  # a custom batch sampler
        else:
            chosen = self._sampler_indices(getattr(loader, "sampler", None))
        if chosen is _UNKNOWN:
            return base, _UNKNOWN
        if subset is None:
            return base, chosen
        if chosen is None:
            return base, set(subset)
        return base, set(subset[i] for i in chosen if -len(subset) <= i < len(subset))

    def _leakage(self):
        train = [p for p in self.passes if p["train"]]
        evals = [p for p in self.passes if not p["train"]]
        if not train or not evals:
            return None
        train_loaders = set(p["loader"] for p in train)
        candidates = []
        seen_loaders = set()
        for p in evals:
            loader = p["loader"]
            if loader in train_loaders or loader in seen_loaders:
                continue  # a training loader evaluated again (training accuracy): not a leak
            # only the passes that trained, before it, a model this pass evaluates, with no
            # weights reset between (k-fold: each fold's model against its own training folds;
            # a pass computing statistics evaluates no model)
            related = [t for t in train if t["models"] & p["models"] and t["started"] < p["started"]
                       and not any(t["started"] <= r < p["started"] for r in self.resets_at)]
            if not related:
                continue
            seen_loaders.add(loader)
            train_hashes = set()
            for t in related:
                train_hashes.update(h for h, n in t["hashes"].items() if n == 1)
            found = self._overlap(p, related, train_hashes)
            if found is not None:
                candidates.append((p, found))
        if not candidates:
            return None
        # evaluating on the very training dataset beside a separate validation set is most
        # likely a training-accuracy measurement: only a split that overlaps is reported then
        clean = len(seen_loaders) > len(candidates)
        for evaluation, (how, overlap, total, training) in candidates:
            if how == "the same dataset object" and clean:
                continue
            site, train_site = evaluation["site"], training["site"]
            message = (
                "the evaluation DataLoader shares %d samples with the training one (%s): the "
                "evaluation measures data the model trains on" % (overlap, how)
            )
            evidence = {"overlap": overlap, "how": how, "evaluation_samples": total,
                        "evaluation_loader": _short_site(site), "training_loader": _short_site(train_site)}
            return self._finding("data-leakage", site, message, evidence)
        return None

    def _overlap(self, evaluation, train, train_hashes):
        """(how, overlap count, evaluation samples, training loader) or None: the index sets
        where both loaders' samplers say which samples they yield, the hashes of the samples
        this run saw otherwise."""
        eval_base, eval_indices = evaluation["base"], evaluation["indices"]
        structural = False
        for p in train:
            base, indices = p["base"], p["indices"]
            if base is None or base is not eval_base or indices is _UNKNOWN or eval_indices is _UNKNOWN:
                continue
            structural = True
            try:
                size = len(base)
            except Exception:
                size = None
            if indices is None and eval_indices is None:
                if size:
                    return "the same dataset object", size, size, p
                continue
            if indices is None or eval_indices is None:
                shared = len(eval_indices if indices is None else indices)
                total = len(eval_indices) if eval_indices is not None else size
                how = "one loader yields all of the dataset the other samples from"
            else:
                shared = len(indices & eval_indices)
                total = len(eval_indices)
                how = "subsets or samplers of one dataset with overlapping indices"
            if shared:
                return how, shared, total, p
        if structural:
            return None  # split from one dataset, disjoint: its indices say so exactly
        eval_hashes = set(h for h, n in evaluation["hashes"].items() if n == 1)
        shared = len(eval_hashes & train_hashes)
        if not shared:
            return None
        return "identical samples seen in both phases of this run", shared, len(eval_hashes), train[0]

    # findings ----------------------------------------------------------------------------------
    def _root_modules(self):
        """The outermost modules called, without those inside another one."""
        roots = list(self.roots)
        inner = set()
        for root in roots:
            for child in root.modules():
                if child is not root:
                    inner.add(id(child))
        return [r for r in roots if id(r) not in inner]

    def _parameter_names(self):
        names = {}
        for root in self._root_modules():
            for name, p in root.named_parameters():
                names.setdefault(id(p), (root, name))
        return names

    def _module_name(self, module, names):
        for root in self._root_modules():
            if root is module:
                return type(root).__name__
            for name, child in root.named_modules():
                if child is module:
                    return "%s.%s" % (type(root).__name__, name)
        return None

    def _dead_parameters(self):
        dead = {}  # module -> its parameters that never had a gradient, in order
        steps = 0
        optimizers = []
        # a parameter two optimizers hold (InfoGAN's info optimizer and the discriminator's) is
        # alive when it had a gradient at the steps of either
        alive = set(key for record in self.records for key, info in record["params"].items() if info["grad"])
        for record in self.records:
            if not record["live_steps"]:
                continue
            steps = max(steps, record["live_steps"])
            for key, info in record["params"].items():
                if info["grad"] or key in alive or not info["requires_grad"] or not info["name"]:
                    continue
                entry = dead.setdefault(info["module"], {
                    "module": info["module"], "type": info["type"], "parameters": [],
                    "built_at": _short_site(info["site"]), "forward_called": info["called"], "site": info["site"],
                    "forward_called_with_grad": info.get("called_with_grad"), "branch_of": info.get("branch_of"),
                })
                if info["name"] not in entry["parameters"]:
                    entry["parameters"].append(info["name"])
                if record["type"] not in optimizers:
                    optimizers.append(record["type"])
        if not dead:
            return None
        findings = []
        unsampled = [d for d in dead.values() if d["branch_of"]]
        described = [d for d in dead.values() if not d["branch_of"]]
        fallback = next((r["site"] for r in self.records if r["site"]), None)
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
            findings.append(self._finding("dead-parameters", site or fallback, message, evidence))
        if unsampled:
            site = next((d["site"] for d in unsampled if d["site"]), None)
            count = sum(len(d["parameters"]) for d in unsampled)
            containers = []
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
            findings.append(self._finding("dead-parameters", site or fallback, message, evidence,
                                          level="information"))
        return findings

    def _device_idle(self):
        torch = self.torch
        try:
            if not torch.cuda.is_available():
                return None
            count = torch.cuda.device_count()
        except Exception:
            return None
        live = [r for r in self.records if r["live_steps"]]
        devices = set()
        params = 0
        for record in live:
            devices.update(record["devices"])
            params += len(record["params"])
        if not params or devices != set(["cpu"]):
            return None
        message = (
            "CUDA is available (%d device%s) but every parameter the optimizer steps is on the CPU: "
            "the model trains on the CPU" % (count, "" if count == 1 else "s")
        )
        evidence = {"cuda_devices": count, "parameter_tensors": params, "parameter_devices": sorted(devices),
                    "optimizers": [r["type"] for r in live]}
        return self._finding("device-idle", live[0]["site"], message, evidence)

    def _finding(self, check, site, message, evidence, level="warning"):
        file, line = _health_site(site)
        return {"id": check, "file": file, "line": line, "message": message, "evidence": evidence,
                "level": level}

    def findings(self):
        found = []
        for check in (lambda: self.nan, lambda: self.accumulation, self._dead_parameters,
                      self._frozen, lambda: self.broadcasts, self._device_idle, self._leakage):
            try:
                result = check()
            except Exception:  # a check's own failure must never cost the run its evidence
                continue
            if isinstance(result, list):
                found.extend(result)
            elif result is not None:
                found.append(result)
        return found


_UNKNOWN = "unknown"  # a sampler whose indices cannot be known without running it


def _index_list(value):
    """A set of ints from an index list (list, tuple, range, numpy array, tensor, or a list of
    batches of them); None when ``value`` is not one."""
    if value is None or isinstance(value, (str, bytes, dict)):
        return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.split(".")[0] in ("numpy", "torch"):
        try:
            value = tolist()
        except Exception:
            return None
    if not isinstance(value, (list, tuple, range)):
        return None
    found = set()
    try:
        for item in value:
            if isinstance(item, (list, tuple)):
                found.update(int(i) for i in item)
            else:
                found.add(int(item))
    except (TypeError, ValueError):
        return None
    return found


def _shape_text(shape):
    return "(%s)" % ", ".join(str(s) for s in shape) if len(shape) != 1 else "(%d,)" % shape[0]
