"""The DataLoader limits: every DataLoader's batch size forced down to the run's, every pass
cut after ``max_batches`` batches, then the real run's last, partial batch."""

import sys
from typing import Any, Iterator

from ..context import Run
from ..frames import OWNERSHIP, outside_harness, short_site, user_call_site

NAME = "dataloader-limits"


class _CutBatches(object):
    """A cut pass's batches: the first ``max_batches`` at the loader's batch size, then the real
    run's last, partial batch (``last`` samples), taken from the end of the pass's order."""

    def __init__(self, sampler: Any, batch_size: Any, max_batches: Any, last: Any) -> None:
        self.sampler, self.batch_size = sampler, batch_size
        self.max_batches, self.last = max_batches, last

    def __iter__(self) -> Iterator[Any]:
        order = list(self.sampler)
        split = max(0, len(order) - self.last)
        for start in range(0, min(split, self.max_batches * self.batch_size), self.batch_size):
            yield order[start:min(start + self.batch_size, split)]
        if split < len(order):
            yield order[split:]

    def __len__(self) -> Any:
        size = len(self.sampler)
        split = max(0, size - self.last)
        return min(-(-split // self.batch_size), self.max_batches) + (1 if split < size else 0)


def _pass_is_driven(frame: Any, loops: Any) -> Any:
    """Was this batch pulled by a loop's header (or by library code iterating for the user)?"""
    frame = outside_harness(frame)
    if frame is None:
        return True
    if not OWNERSHIP.is_user_file(frame.f_code.co_filename):
        return True  # tqdm, enumerate in a library, a trainer's own loop: bounded by the pass
    return loops.header_at(frame.f_code.co_filename, frame.f_lineno) is not None


def install(run: Run) -> None:
    import inspect

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
        """The real run's last batch (len(dataset) % its batch size) ends every cut pass."""
        if drop_last or not isinstance(own_batch, int) or isinstance(own_batch, bool) or own_batch < 1:
            return
        if not getattr(loader, "_auto_collation", False) or isinstance(loader.dataset, IterableDataset):
            return
        try:
            size = len(loader.dataset)
        except Exception:
            return
        last = size % own_batch
        if not last:
            return
        sampler = _CutBatches(loader.sampler, loader.batch_size, state.max_batches, last)
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
