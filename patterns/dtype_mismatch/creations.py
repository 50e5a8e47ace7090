"""Where a tensor gets its dtype, for the shared value walk (repairbot/provenance.py): the calls
that make a float64 tensor from data or on purpose (``at_call``), those that make float32 by
torch's default, the casts, and the calls and methods that keep a dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from repairbot.analysis import (
    argument,
    dtype_name,
    is_torch_name,
    keyword_arg,
    walk,
)
from repairbot.provenance import (
    Context,
    KeyPath,
    Lost,
    Made,
    ProjectFile,
    Result,
    ValueWalk,
)

from .message import FLOAT32

# Calls that make a tensor from existing data and keep its dtype (a numpy array's float64).
CREATIONS = ("torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.asarray")


# Their dtype parameter, where it may be given by position.
_DTYPE_POSITION = {"as_tensor": 1}


_FLOAT64_NAMES = ("torch.float64", "torch.double")


_EXPLICIT_FACTORIES = ("torch.DoubleTensor", "torch.cuda.DoubleTensor")


# Tensor methods that return a tensor of the same dtype (``to``/``type`` only without a dtype).
_KEEPS_DTYPE = frozenset({
    "to", "type", "cuda", "cpu", "view", "view_as", "reshape", "reshape_as", "unsqueeze", "squeeze",
    "permute", "transpose", "t", "contiguous", "clone", "detach", "flatten", "requires_grad_",
    "pin_memory", "expand", "expand_as", "repeat", "narrow", "share_memory_",
})


_CASTS = frozenset({"float", "half", "bfloat16", "int", "long", "short", "byte", "bool", "char"})


# torch functions of one tensor that keep its dtype.
# Factories that make a tensor of torch's default dtype (float32) when no dtype is given.
_DEFAULT_DTYPE_FACTORIES = (
    "torch.rand", "torch.randn", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.linspace",
    "torch.logspace", "torch.normal", "torch.eye",
)


_TORCH_KEEPS_DTYPE = (
    "torch.flatten", "torch.squeeze", "torch.unsqueeze", "torch.reshape", "torch.permute",
    "torch.transpose", "torch.clone", "torch.t", "torch.narrow",
)


# What the walk ends at: where a float64 tensor is made from data, or made float64 on purpose.
CREATION = "creation"


_EXPLICIT = "explicit"


def float32_keyword(file: ProjectFile, call: cst.Call) -> str | None:
    """``dtype=`` in the code's own words for a ``torch.tensor``/``torch.as_tensor`` call that
    already takes keywords (``requires_grad=True``, after which ``.float()`` would give a
    non-leaf copy) or in a file that writes ``torch.tensor(..., dtype=torch.float32)``: the
    float32 dtype as the file spells it (``torch.float``), else ``<torch>.float32``. None for
    ``.float()`` (``torch.from_numpy`` takes no dtype)."""
    imports = file.src.imports
    if not is_torch_name(imports.qualify(call.func), "torch.tensor", "torch.as_tensor", "torch.asarray") \
            or not isinstance(call.func, cst.Attribute):
        return None
    written = [
        keyword.value for node in walk(file.src.module) if isinstance(node, cst.Call)
        and is_torch_name(imports.qualify(node.func), *CREATIONS)
        and (keyword := keyword_arg(node, "dtype")) is not None
        and dtype_name(imports.qualify(keyword.value)) == FLOAT32
    ]
    if not written and not any(arg.keyword is not None for arg in call.args):
        return None
    if written:
        return file.code(written[0])
    return f"{file.code(call.func.value)}.{FLOAT32}"


def at_call(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """Where a float64 tensor is made (a creation from numpy data), made float64 on purpose, or
    passed through with its dtype kept; None for the walk's own rules."""
    file = ctx.file
    code = file.code(call)
    if is_torch_name(qualified, *CREATIONS):
        short = (qualified or "").rsplit(".", 1)[-1]
        dtype = argument(call, _DTYPE_POSITION[short], "dtype") if short in _DTYPE_POSITION else keyword_arg(call, "dtype")
        if dtype is not None:
            if _names_float64(file, dtype.value):
                return Made(call, file, trail, _EXPLICIT)
            return Lost(f"`{code}` gives a dtype of its own", file, call, trail=trail)
        if any(key.kind in ("attr", "key") for key in path):
            return Lost(f"`{code}` is a tensor, not an object with fields", file, call, trail=trail)
        return Made(call, file, trail, CREATION)
    if is_torch_name(qualified, *_EXPLICIT_FACTORIES):
        return Made(call, file, trail, _EXPLICIT)
    if is_torch_name(qualified, *_TORCH_KEEPS_DTYPE) and call.args:
        return walk.resolve(call.args[0].value, ctx, path, trail)
    if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _KEEPS_DTYPE | _CASTS | {"double"}:
        return _method(walk, call, call.func, ctx, path, trail)
    return None


def _method(
    walk: ValueWalk, call: cst.Call, method: cst.Attribute, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result:
    file = ctx.file
    name = method.attr.value
    if name == "double":
        return Made(call, file, trail, _EXPLICIT)
    if name in _CASTS:
        return Lost(f"`{file.code(call)}` converts it already (the source changed since the run?)", file, call, trail=trail)
    if name in ("to", "type"):
        given = [arg.value for arg in call.args if arg.keyword is None or arg.keyword.value in ("dtype", "dtype_or_device")]
        if any(_names_float64(file, value) for value in given):
            return Made(call, file, trail, _EXPLICIT)
        if any(_names_dtype(file, value) for value in given):
            return Lost(f"`{file.code(call)}` converts it to a dtype of its own", file, call, trail=trail)
    return walk.resolve(method.value, ctx, path, trail)


def at_float32_call(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """Where a float32 tensor is made by torch's default dtype (a factory without ``dtype=``, a
    tensor of Python numbers), made float32 on purpose, or passed through with its dtype kept."""
    file = ctx.file
    if is_torch_name(qualified, *_DEFAULT_DTYPE_FACTORIES, "torch.tensor"):
        if keyword_arg(call, "dtype") is not None:
            return Made(call, file, trail, _EXPLICIT)
        if is_torch_name(qualified, "torch.tensor") and not (
            call.args and isinstance(call.args[0].value, cst.List | cst.Tuple | cst.Float | cst.Integer)
        ):
            return Lost(f"`{file.code(call)}` keeps the dtype of data made float32 before it", file, call, trail=trail)
        return Made(call, file, trail, CREATION)
    if is_torch_name(qualified, *CREATIONS):
        return Lost(f"`{file.code(call)}` keeps the dtype of data made float32 before it", file, call, trail=trail)
    if is_torch_name(qualified, "torch.FloatTensor", "torch.cuda.FloatTensor"):
        return Made(call, file, trail, _EXPLICIT)
    if is_torch_name(qualified, *_TORCH_KEEPS_DTYPE) and call.args:
        return walk.resolve(call.args[0].value, ctx, path, trail)
    if qualified is None and isinstance(call.func, cst.Attribute):
        name = call.func.attr.value
        if name == "float" or (name in ("to", "type") and any(
            is_torch_name(file.src.imports.qualify(a.value), "torch.float32", "torch.float") for a in call.args
        )):
            return Made(call, file, trail, _EXPLICIT)
        if name in _KEEPS_DTYPE:
            return walk.resolve(call.func.value, ctx, path, trail)
        if name in _CASTS | {"double"}:
            return Lost(f"`{file.code(call)}` converts it to another dtype", file, call, trail=trail)
    return None


def casts_to_float64(file: ProjectFile, call: cst.Call) -> bool:
    """``.double()``, ``.to(torch.float64)``, ``.type(torch.DoubleTensor)`` (a dtype keyword too)."""
    if not isinstance(call.func, cst.Attribute):
        return False
    if call.func.attr.value == "double":
        return not call.args
    return call.func.attr.value in ("to", "type") and any(_names_float64(file, arg.value) for arg in call.args)


def _names_dtype(file: ProjectFile, node: cst.BaseExpression) -> bool:
    qualified = file.src.imports.qualify(node)
    return qualified is not None and qualified.startswith("torch.") and dtype_name(qualified) is not None


def _names_float64(file: ProjectFile, node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value in ("torch.DoubleTensor", "torch.cuda.DoubleTensor")
    return is_torch_name(file.src.imports.qualify(node), *_FLOAT64_NAMES)


def distinct_places(trail: Sequence[str]) -> list[str]:
    """The walk's steps, one per place (a statement and the call in it are one step for people)."""
    kept: list[str] = []
    for step in trail:
        if kept and step.split(" ", 1)[0] == kept[-1].split(" ", 1)[0]:
            continue
        kept.append(step)
    return kept
