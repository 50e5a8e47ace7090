"""The "inplace-ops" probe (runs in the harness, under the user's interpreter: Python 3.8,
standard library and torch only; loaded by path, see repairbot/trace/harness/probe.py).

Records in-place operations on tensors that autograd tracks (or that an in-place op with a
tracked operand starts tracking: ``h += self.ffn(h)`` on an input): op, shape, producer,
where, and the tensor's storage (views and their base share it, and so the version counter).
Used in a rerun that only gathers evidence for ``modified by an inplace operation``: the
failing frame is ``backward()``, while the culprit is an in-place op earlier in the step.
Events are kept since the last ``backward()`` that succeeded.

When ``backward()`` then fails that way, the probe walks the graph for the tensors whose
saved version no longer matches (the saved tensor as autograd holds it, read without the
version check), records their storage and the autograd node that saved them, and the
forward traceback of that node: the rerun runs under
``torch.autograd.set_detect_anomaly(True, check_nan=False)``, which keeps it for every node.
"""

import re
import sys
import types
from typing import Any, Dict, List, Optional, Set

NAME = "inplace-ops"
OPT_IN = True
# A list: one record per in-place op {op, shape, dtype, producer, leaf, requires_grad, version,
# storage (a number per storage), site, module, module_site}, an indexed assignment's also with
# index and value ({dtype, shape} of a tensor, {type} of anything else); after a failing backward(), one last record
# {saved: [{node, shape, version, storage, forward}]}: each tensor saved for backward whose
# version changed, with the user frames (innermost last) of the forward call that saved it.
EVIDENCE_KEY = "inplace_ops"

_INPLACE_DUNDERS = frozenset((
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__",
))
_MODIFIED = "modified by an inplace operation"
_TRACEBACK_LINE = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>[^\n]+)(?:\n\s*(?P<code>[^\n]*))?')
_MAX_NODES = 20000


def _module_in_forward(torch: Any) -> Any:
    """The innermost module whose forward is running and that has an ``inplace`` switch."""
    frame: Optional[types.FrameType] = sys._getframe(2)
    while frame is not None and torch is not None:
        if frame.f_code.co_name == "forward":
            module = frame.f_locals.get("self")
            if isinstance(module, torch.nn.Module) and hasattr(module, "inplace"):
                return module
        frame = frame.f_back
    return None


class Storages(object):
    """Numbers the storages seen since the last backward() (a view and its base share one), in
    the order they are first seen: the same script records the same numbers, never an address."""

    def __init__(self) -> None:
        self.numbers: Dict[int, int] = {}

    def number(self, tensor: Any) -> Optional[int]:
        try:
            storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
            pointer = int(storage.data_ptr())
        except (RuntimeError, TypeError, AttributeError, NotImplementedError):
            return None
        if not pointer:
            return None
        return self.numbers.setdefault(pointer, len(self.numbers) + 1)

    def clear(self) -> None:
        self.numbers.clear()


def _forward_frames(node: Any) -> List[Dict[str, Any]]:
    """The user frames of the forward call that made ``node`` (anomaly mode keeps its stack)."""
    from repairbot_harness.frames import OWNERSHIP

    try:
        stack = node.metadata.get("traceback_")
    except (AttributeError, RuntimeError):
        return []
    if isinstance(stack, (list, tuple)):
        stack = "".join(str(entry) for entry in stack)
    if not isinstance(stack, str):
        return []
    frames = []
    for found in _TRACEBACK_LINE.finditer(stack):
        if OWNERSHIP.is_user_file(found.group("file")):
            frames.append({
                "file": found.group("file"), "line": int(found.group("line")),
                "function": found.group("function").strip(), "code": (found.group("code") or "").strip() or None,
                "user": True,
            })
    return frames[-8:]


def _saved_tensors(node: Any, storages: Storages) -> List[Any]:
    """The tensors ``node`` saved whose version changed: unpacking them raises the error."""
    from repairbot_harness.frames import shape

    found = []
    for attribute in dir(node):
        if not attribute.startswith("_raw_saved_"):
            continue
        try:
            getattr(node, "_saved_" + attribute[len("_raw_saved_"):])
            continue
        except RuntimeError as error:
            if _MODIFIED not in str(error):
                continue  # freed by the part of backward() that ran, or not a tensor
        except Exception:  # an attribute torch cannot give back: proves nothing
            continue
        try:
            raw = getattr(node, attribute)
            raws = list(raw) if isinstance(raw, (list, tuple)) else [raw]
            for saved in raws:
                data = saved.data
                found.append({
                    "node": type(node).__name__, "shape": shape(data), "version": int(data._version),
                    "storage": storages.number(data),
                })
        except Exception:  # a released or undefined saved tensor
            continue
    return found


def _changed_saved_tensors(torch: Any, roots: Any, storages: Storages) -> List[Dict[str, Any]]:
    """Every tensor saved in the graph of ``roots`` whose version changed, with its node's
    forward frames."""
    if isinstance(roots, torch.Tensor):
        roots = [roots]
    pending = [getattr(t, "grad_fn", None) for t in roots if isinstance(t, torch.Tensor)] if isinstance(
        roots, (list, tuple)) else []
    seen: Set[Any] = set()
    found: List[Dict[str, Any]] = []
    while pending and len(seen) < _MAX_NODES and len(found) < 20:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        saved = _saved_tensors(node, storages)
        if saved:
            frames = _forward_frames(node)
            for record in saved:
                record["forward"] = frames
            found.extend(saved)
        try:
            pending.extend(following for following, _ in node.next_functions)
        except (AttributeError, RuntimeError, TypeError):
            continue
    return found


def _any_tracked(torch: Any, args: Any, kwargs: Any) -> bool:
    """Does an operand of the op (after the modified tensor) require grad?"""
    for value in list(args[1:]) + list(kwargs.values()):
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return True
    return False


def _operand(torch: Any, value: Any) -> Dict[str, Any]:
    """A tensor's dtype and shape; the type of anything else (int, float, tuple, slice...)."""
    from repairbot_harness.frames import shape

    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).replace("torch.", ""), "shape": shape(value)}
    return {"type": type(value).__name__}


def _anomaly_on(torch: Any) -> None:
    """Anomaly mode keeps each node's forward traceback; never its NaN check (which would
    raise where the script does not)."""
    try:
        torch.autograd.set_detect_anomaly(True, check_nan=False)
    except TypeError:
        pass  # before torch 2.0 anomaly mode always checks for NaN: stay without it


def install(run: Any) -> Any:
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    from repairbot_harness.frames import shape, user_call_site

    torch, module_sites = run.torch, run.state.module_sites
    ops: List[Dict[str, Any]] = []
    storages = Storages()

    class InplaceRecorder(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name == "backward":
                try:
                    result = func(*args, **kwargs)
                except RuntimeError as error:
                    if _MODIFIED in str(error):
                        self._failed(args[0] if args else kwargs.get("tensors"))
                    raise
                del ops[:]
                storages.clear()
                return result
            inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS \
                or kwargs.get("inplace") is True
            if inplace and args and isinstance(args[0], torch.Tensor) and torch.is_grad_enabled():
                tensor = args[0]
                if tensor.requires_grad or _any_tracked(torch, args, kwargs):
                    self._record(name, tensor, args)
            return func(*args, **kwargs)

        def _failed(self, roots: Any) -> None:
            try:
                saved = _changed_saved_tensors(torch, roots, storages)
            except Exception:  # the analysis never changes how the script fails
                saved = []
            ops.append({"saved": saved})

        def _record(self, name: Any, tensor: Any, args: Any) -> None:
            module = _module_in_forward(torch)
            grad_fn = tensor.grad_fn
            record: Dict[str, Any] = {
                "op": name,
                "shape": shape(tensor),
                "dtype": str(tensor.dtype).replace("torch.", ""),
                "producer": type(grad_fn).__name__ if grad_fn is not None else None,
                "leaf": bool(tensor.is_leaf),
                "requires_grad": bool(tensor.requires_grad),
                "version": int(tensor._version),
                "storage": storages.number(tensor),
                "site": user_call_site(),
                "module": type(module).__name__ if module is not None else None,
                "module_site": module_sites.get(module) if module is not None else None,
            }
            if name == "__setitem__" and len(args) == 3:
                # what an out-of-place form needs: x[mask] = 0 is x.masked_fill(mask, 0) only for
                # a boolean mask of x's shape and one value
                record["index"] = _operand(torch, args[1])
                record["value"] = _operand(torch, args[2])
            ops.append(record)
            if len(ops) > 500:
                del ops[:100]

    _anomaly_on(torch)
    run.around_script.append(InplaceRecorder())
    return lambda: ops
