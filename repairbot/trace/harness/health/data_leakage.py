"""data-leakage: an evaluation DataLoader that yields samples a training pass trained on."""

import sys
from typing import Any, List, Optional, Set, Tuple, Union

from ..frames import outside_harness, short_site
from ..identity import IdentityWeakKeyDict
from .core import Finding, HealthCheck, HealthCore, Record

# The indices a loader or sampler can yield: a set, None for any index of its dataset, or
# _UNKNOWN (a sampler that does not say)
Indices = Union[Set[int], None, str]
# How an evaluation pass overlaps training: (how, overlap count, evaluation samples, training pass)
Overlap = Tuple[str, int, Optional[int], Record]

# the layers whose reset_parameters() re-initialises a model (k-fold: a fresh model per fold)
_RESET_LAYERS = ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                 "ConvTranspose3d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm",
                 "Embedding", "RNN", "LSTM", "GRU")


class DataLeakage(HealthCheck):
    """A DataLoader used for evaluation (no optimizer step, no backward during it) shares samples
    with a training one: the same dataset object, Subsets of one dataset with overlapping
    indices, or identical samples seen in both phases. The overlap count is exact for the first
    two.

    What it finds:
        A DataLoader used for evaluation (no optimizer step and no ``backward()`` during its
        pass) can yield samples that an earlier training pass of the same model could (no
        ``reset_parameters()`` between). The finding records the overlap count and how: the
        indices each loader can yield, exact (``Subset``, ``random_split``,
        ``SubsetRandomSampler``, ``WeightedRandomSampler``, a sampler or batch sampler given as
        index lists, custom samplers that keep ``indices``), or, where a sampler does not say,
        identical samples seen in both phases of the run (hashes of the samples the truncated
        run saw). Silent on disjoint samplers or ``Subset`` objects over one dataset object; k-fold
        (each fold's model against its own training folds); the training loader evaluated
        again (training accuracy); the training dataset evaluated beside a separate validation
        set; a pass that calls no trained model (statistics).

    Why it matters:
        The evaluation measures data the model trains on: its accuracy overstates what the
        model does on unseen data, and model selection or early stopping is driven by it.

    Fix safety:
        No fix is offered: the split (``random_split``, disjoint samplers, a held-out file) is
        the user's to make.

    Not handled:
        Samplers that keep no index list (``DistributedSampler``, generators), and index lists
        of more than 2**20 indices, are compared by the hashes of the samples the short run saw
        only.
    """

    ID = "data-leakage"
    TITLE = "Evaluation data overlaps the training data"
    ORDER = 70

    def __init__(self, core: HealthCore) -> None:
        HealthCheck.__init__(self, core)
        self.resets_at: List[int] = []  # pass_clock whenever a layer's reset_parameters() ran (k-fold: weights reset)
        # DataLoader -> (base dataset, its indices)
        self.loader_samples: "IdentityWeakKeyDict[Any, Tuple[Any, Indices]]" = IdentityWeakKeyDict()
        self._wrap_reset_parameters()
        core.on_pass_end(self.pass_end)

    def _wrap_reset_parameters(self) -> None:
        nn = self.core.torch.nn
        check = self
        for name in _RESET_LAYERS:
            cls = getattr(nn, name, None)
            real = getattr(cls, "reset_parameters", None) if cls is not None else None
            if real is None or "reset_parameters" not in cls.__dict__:
                continue

            def reset_parameters(real: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
                # the call of the layer's own __init__ builds it; any other call re-initialises
                caller = outside_harness(sys._getframe(1))
                clock = check.core.pass_clock
                if (caller is None or caller.f_code.co_name != "__init__") and (
                        not check.resets_at or check.resets_at[-1] != clock):
                    check.resets_at.append(clock)
                return real(self, *args, **kwargs)

            self.core.hooks.around(cls, "reset_parameters", reset_parameters)

    def pass_end(self, loader: Any, record: Record) -> None:
        """The pass's base dataset and the indices it can yield: once per loader (a pass per
        epoch must not copy the index set of a big dataset)."""
        known: Optional[Tuple[Any, Indices]] = self.loader_samples.get(loader)
        if known is None:
            try:
                known = self._loader_samples(loader)
            except Exception:
                known = (None, _UNKNOWN)
            try:
                self.loader_samples[loader] = known
            except TypeError:
                pass
        record["base"], record["indices"] = known

    def findings(self) -> Optional[Finding]:
        return self._leakage()

    def _resolve_dataset(self, dataset: Any) -> Tuple[Any, Union[List[int], str, None]]:
        """(base dataset, indices into it, None for all of it, or _UNKNOWN past _MAX_INDICES),
        through nested Subsets (``random_split`` makes Subsets too)."""
        from torch.utils.data import Subset

        indices: Optional[List[int]] = None
        while isinstance(dataset, Subset):
            length = _length(dataset.indices)
            if length is None or length > _MAX_INDICES:
                return dataset.dataset, _UNKNOWN
            own = [int(i) for i in dataset.indices]
            indices = own if indices is None else [own[i] for i in indices]
            dataset = dataset.dataset
        return dataset, indices

    def _sampler_indices(self, sampler: Any, depth: int = 0) -> Indices:
        """The indices ``sampler`` can yield: a set, None for any index of the dataset, or
        _UNKNOWN (a custom sampler that does not say: the sample hashes decide then)."""
        from torch.utils.data import sampler as samplers

        if sampler is None or isinstance(sampler, (samplers.SequentialSampler, samplers.RandomSampler)):
            return None
        if depth > 4:
            return _UNKNOWN
        if isinstance(sampler, samplers.WeightedRandomSampler):
            if sampler.weights.numel() > _MAX_INDICES:
                return _UNKNOWN
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

    def _loader_samples(self, loader: Any) -> Tuple[Any, Indices]:
        """(base dataset, the set of its indices the loader can yield, None for all of it, or
        _UNKNOWN): the loader's Subsets and its sampler composed."""
        from torch.utils.data import sampler as samplers

        base, subset = self._resolve_dataset(getattr(loader, "dataset", None))
        batch_sampler = getattr(loader, "batch_sampler", None)
        if batch_sampler is not None and not isinstance(batch_sampler, samplers.BatchSampler):
            chosen = self._sampler_indices(batch_sampler)  # a custom batch sampler
        else:
            chosen = self._sampler_indices(getattr(loader, "sampler", None))
        if isinstance(chosen, str) or isinstance(subset, str):  # _UNKNOWN, the one string an Indices holds
            return base, _UNKNOWN
        if subset is None:
            return base, chosen
        if chosen is None:
            return base, set(subset)
        return base, set(subset[i] for i in chosen if -len(subset) <= i < len(subset))

    def _leakage(self) -> Optional[Finding]:
        train = [p for p in self.core.passes if p["train"]]
        evals = [p for p in self.core.passes if not p["train"]]
        if not train or not evals:
            return None
        train_loaders = set(p["loader"] for p in train)
        candidates: List[Tuple[Record, Overlap]] = []
        seen_loaders: Set[int] = set()
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
            train_hashes: Set[str] = set()
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
                        "evaluation_loader": short_site(site), "training_loader": short_site(train_site)}
            return self.finding(site, message, evidence)
        return None

    def _overlap(self, evaluation: Record, train: List[Record], train_hashes: Set[str]) -> Optional[Overlap]:
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


_UNKNOWN = "unknown"  # a sampler whose indices cannot be known without running it
# The most indices a loader's index set is built from: a longer index list (a Subset of a
# dataset of millions, a 1e12-sample sampler's list) is compared by the sample hashes instead.
_MAX_INDICES = 1 << 20


def _length(value: Any) -> Optional[int]:
    """How many items an index list holds, asked without listing it (None: it does not say)."""
    numel = getattr(value, "numel", None)
    if callable(numel) and type(value).__module__.split(".")[0] == "torch":
        return int(numel())
    size = getattr(value, "size", None)
    if isinstance(size, int) and type(value).__module__.split(".")[0] == "numpy":
        return size
    try:
        return len(value)
    except Exception:
        return None


def _index_list(value: Any) -> Indices:
    """A set of ints from an index list (list, tuple, range, numpy array, tensor, or a list of
    batches of them); None when ``value`` is not one; _UNKNOWN when it holds more than
    _MAX_INDICES (the sample hashes decide then)."""
    if value is None or isinstance(value, (str, bytes, dict)):
        return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.split(".")[0] in ("numpy", "torch"):
        if (_length(value) or 0) > _MAX_INDICES:
            return _UNKNOWN
        try:
            value = tolist()
        except Exception:
            return None
    if not isinstance(value, (list, tuple, range)):
        return None
    if len(value) > _MAX_INDICES:
        return _UNKNOWN
    found: Set[int] = set()
    try:
        for item in value:
            if isinstance(item, (list, tuple)):
                found.update(int(i) for i in item)
            else:
                found.add(int(item))
            if len(found) > _MAX_INDICES:
                return _UNKNOWN
    except (TypeError, ValueError):
        return None
    return found
