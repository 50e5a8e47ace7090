"""The "inplace-ops" probe (runs in the harness, under the user's interpreter: Python 3.8,
standard library and torch only; loaded by path, see repairbot/trace/harness/probe.py).

Records in-place operations on tensors that autograd tracks: op, shape, producer, where.
Used in a rerun that only gathers evidence for ``modified by an inplace operation``: the
failing frame is ``backward()``, while the culprit is an in-place op earlier in the step.
Events are kept since the last ``backward()`` that succeeded.
"""

import sys
import types
from typing import Any, Dict, List, Optional

NAME = "inplace-ops"
OPT_IN = True
EVIDENCE_KEY = "inplace_ops"  # [{op, shape, dtype, producer, leaf, version, site, module, module_site}]

_INPLACE_DUNDERS = frozenset((
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__",
))


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


def install(run: Any) -> Any:
    try:
        from torch.overrides import TorchFunctionMode
    except ImportError:
        return None
    from repairbot_harness.frames import shape, user_call_site

    torch, module_sites = run.torch, run.state.module_sites
    ops: List[Dict[str, Any]] = []

    class InplaceRecorder(TorchFunctionMode):  # type: ignore[misc]
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name == "backward":
                result = func(*args, **kwargs)
                del ops[:]
                return result
            inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS \
                or kwargs.get("inplace") is True
            if inplace and args and isinstance(args[0], torch.Tensor) and torch.is_grad_enabled():
                tensor = args[0]
                if tensor.requires_grad:
                    self._record(name, tensor)
            return func(*args, **kwargs)

        def _record(self, name: Any, tensor: Any) -> None:
            module = _module_in_forward(torch)
            grad_fn = tensor.grad_fn
            ops.append({
                "op": name,
                "shape": shape(tensor),
                "dtype": str(tensor.dtype).replace("torch.", ""),
                "producer": type(grad_fn).__name__ if grad_fn is not None else None,
                "leaf": bool(tensor.is_leaf),
                "version": int(tensor._version),
                "site": user_call_site(),
                "module": type(module).__name__ if module is not None else None,
                "module_site": module_sites.get(module) if module is not None else None,
            })
            if len(ops) > 500:
                del ops[:100]

    run.around_script.append(InplaceRecorder())
    return lambda: ops
