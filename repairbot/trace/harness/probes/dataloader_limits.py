"""The DataLoader limits: every DataLoader's batch size forced down to the run's, every pass
cut after ``max_batches`` batches, then the real run's last, partial batch.

Nothing the script iterates is materialised or measured where it may be unbounded: a cut pass
takes its indices from the sampler's own iterator as it goes (O(batches) memory, whatever the
sampler's length), and a last batch is planned only where the pass's sampler has a length.
"""

import collections
import inspect
import itertools
import sys
from typing import Any, Iterator, List, Optional

from ..context import Run
from ..frames import OWNERSHIP, outside_harness, short_site, user_call_site

NAME = "dataloader-limits"

# A pass of this many samples or more is one the real run never finishes in practice (an
# endless loader: ``RandomSampler(ds, replacement=True, num_samples=int(1e10))``): no last
# batch is planned for it, the real run never reaches one.
ENDLESS_PASS = 10 ** 9
# A custom sampler of at most this many indices is run to its end for its true last indices
# (the order may matter: a length-sorted sampler's last batch holds the longest samples), at
# most as many as its length says (an endless one whose __len__ is the dataset's ends there);
# a longer one gives the indices that follow the cut batches (the right size, any samples).
DRAIN_LIMIT = 1 << 16


def _tail_kind(sampler: Any) -> str:
    """How a pass's last indices are taken: "sequential" (``range(n - last, n)``, exact),
    "sequence" (a list, tuple, range or tensor given as the sampler: its own last items),
    "random" (a random order: the indices that follow the cut batches are as good as any),
    "drain" (another sampler: run to its end, or, past DRAIN_LIMIT, the indices that follow)."""
    from torch.utils.data import sampler as samplers

    own_iter = getattr(type(sampler), "__iter__", None)
    if own_iter is samplers.SequentialSampler.__iter__:
        return "sequential"
    if own_iter in (samplers.RandomSampler.__iter__, samplers.SubsetRandomSampler.__iter__,
                    samplers.WeightedRandomSampler.__iter__):
        return "random"
    if isinstance(sampler, (list, tuple, range)) or (
            type(sampler).__module__.split(".")[0] in ("torch", "numpy") and hasattr(sampler, "__getitem__")
            and not isinstance(sampler, samplers.Sampler)):
        return "sequence"
    return "drain"


class _CutBatches(object):
    """A cut pass's batches: the first ``max_batches`` at the loader's batch size, then the real
    run's last, partial batch (``last`` of the pass's ``size`` samples; see _tail_kind for which
    indices). Indices are taken from the sampler's iterator as the batches are asked for."""

    def __init__(self, sampler: Any, batch_size: int, max_batches: int, last: int, size: int) -> None:
        self.sampler, self.batch_size = sampler, batch_size
        self.max_batches, self.last, self.size = max_batches, last, size
        self.tail = _tail_kind(sampler)

    def _split(self) -> int:
        """How many of the pass's first indices the cut batches take."""
        return min(max(0, self.size - self.last), self.max_batches * self.batch_size)

    def __iter__(self) -> Iterator[List[Any]]:
        order = iter(self.sampler)
        taken = 0
        split = self._split()
        while taken < split:
            batch = list(itertools.islice(order, min(self.batch_size, split - taken)))
            if not batch:
                return  # the sampler gave fewer indices than its length says
            taken += len(batch)
            yield batch
        tail = self._tail(order, taken)
        if tail:
            yield tail

    def _tail(self, order: Iterator[Any], taken: int) -> List[Any]:
        last, size = self.last, self.size
        if self.tail == "sequential":
            return list(range(size - last, size))
        if self.tail == "sequence":
            return [self.sampler[i] for i in range(size - last, size)]
        if self.tail == "drain" and size - taken <= DRAIN_LIMIT:
            return list(collections.deque(itertools.islice(order, size - taken), maxlen=last))
        return list(itertools.islice(order, last))

    def __len__(self) -> int:
        return -(-self._split() // self.batch_size) + 1


def _pass_size(sampler: Any) -> Optional[int]:
    """The samples of one pass (``len(sampler)``), None where the sampler has no length (a
    generator, ``itertools.cycle``, an infinite sampler) or it is an endless one."""
    try:
        size = len(sampler)
    except Exception:
        return None
    if not isinstance(size, int) or size < 1 or size >= ENDLESS_PASS:
        return None
    return size


def _pass_is_driven(frame: Any, loops: Any) -> Any:
    """Was this batch pulled by a loop's header (or by library code iterating for the user)?

    A loop of the user's generator bounds the pass only if the generator iterates the loader
    once (``def batches(loader): for b in loader: yield b``) and what pulls the generator is a
    loop's header too. One that iterates it again and again (``while True: for b in loader:
    yield b``, BiT's ``recycle``), or one pulled by ``next(gen)`` in a loop's body, is endless:
    the step budget's to bound."""
    frame = outside_harness(frame)
    while frame is not None:
        code = frame.f_code
        if not OWNERSHIP.is_user_file(code.co_filename):
            return True  # tqdm, enumerate in a library, a trainer's own loop: bounded by the pass
        if loops.header_at(code.co_filename, frame.f_lineno) is None:
            return False
        if not code.co_flags & inspect.CO_GENERATOR:
            return True
        if len(loops.loops_at(code.co_filename, frame.f_lineno)) > 1:
            return False  # the generator's pass is inside another of its loops
        frame = outside_harness(frame.f_back)  # the frame that resumed the generator
    return True


def install(run: Run) -> None:
    from torch.utils.data import DataLoader, IterableDataset

    state = run.state
    init_signature = inspect.signature(run.torch_hooks().real(DataLoader, "__init__"))

    def dataloader_init(real_init: Any, self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = init_signature.bind(self, *args, **kwargs)
        except TypeError:
            bound = None
        own_batch = bound.arguments.get("batch_size", 1) if bound is not None else None
        if state.force_batch and bound is not None:
            batch_size = own_batch
            if (bound.arguments.get("batch_sampler") is None and isinstance(batch_size, int)
                    and not isinstance(batch_size, bool) and batch_size > state.batch_size):
                bound.arguments["batch_size"] = state.batch_size
                state.forced.append({
                    "what": "DataLoader batch_size %d -> %d" % (batch_size, state.batch_size),
                    "site": short_site(user_call_site()),
                })
                args, kwargs = bound.args[1:], bound.kwargs
        real_init(self, *args, **kwargs)
        if state.cut_batches and bound is not None and bound.arguments.get("batch_sampler") is None:
            _plan_last_batch(self, own_batch, bool(bound.arguments.get("drop_last", False)))

    def _plan_last_batch(loader: Any, own_batch: Any, drop_last: Any) -> None:
        """The real run's last batch (len(sampler) % its batch size) ends every cut pass."""
        if drop_last or not isinstance(own_batch, int) or isinstance(own_batch, bool) or own_batch < 1:
            return
        if not getattr(loader, "_auto_collation", False) or isinstance(loader.dataset, IterableDataset):
            return
        size = _pass_size(loader.sampler)
        if size is None:
            return
        last = size % own_batch
        if not last:
            return
        sampler = _CutBatches(loader.sampler, loader.batch_size, state.max_batches, last, size)
        object.__setattr__(loader, "batch_sampler", sampler)  # DataLoader refuses a plain setattr
        state.last_batches.append({"size": last, "dataset": size, "batch_size": own_batch,
                                   "site": short_site(user_call_site())})

    def cut(iterator: Any, limit: Any) -> Iterator[Any]:
        state.active_loaders += 1
        current = {"driven": False}
        state.passes.append(current)
        try:
            taken = 0
            while limit is None or taken < limit:
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                taken += 1
                state.batches += 1
                state.heartbeat()
                current["driven"] = _pass_is_driven(sys._getframe(1), run.loops)
                yield batch
            state.loaders_cut += 1
        finally:
            state.active_loaders -= 1
            state.passes.remove(current)

    def dataloader_iter(real_iter: Any, self: Any) -> Any:
        if isinstance(self.batch_sampler, _CutBatches):
            return cut(real_iter(self), None)  # its batch sampler ends the pass
        return cut(real_iter(self), state.max_batches if state.cut_batches else None)

    def dataloader_len(real_len: Any, self: Any) -> Any:
        length = real_len(self)
        if state.cut_batches and not isinstance(self.batch_sampler, _CutBatches):
            return min(length, state.max_batches)
        return length

    run.torch_hooks().dataloader("__init__", dataloader_init)
    run.torch_hooks().dataloader("__iter__", dataloader_iter)
    run.torch_hooks().dataloader("__len__", dataloader_len)
