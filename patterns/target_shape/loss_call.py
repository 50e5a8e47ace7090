"""The loss call the failing frame was executing: its input and target arguments, their traced
shapes, and whether the call goes straight into torch.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.analysis import (
    ImportTable,
    argument,
    calls_on_line,
    loss_call_at,
    place_in,
)
from repairbot.evidence import Scope
from repairbot.types import Failure, Frame, Span

from .shapes import Shape

# The loss's two parameters and their positions, the same for every torch loss (nn.*Loss
# modules and F.* functions alike).
POSITIONS = {"input": 0, "target": 1}


def loss_call(
    wrapper: MetadataWrapper, imports: ImportTable, scope: Scope, frame: Frame
) -> tuple[cst.Call, Span] | str:
    """The loss call the frame was executing, or why it cannot be told.

    With traced columns the call is exact (a file edited since the run no longer has a call
    there). From a log there is only a line: the one call on it that passes two arguments and
    looks like a loss, else the only call that passes two arguments.
    """
    where = f"{place_in(Path(frame.file), frame.line)}"
    found = loss_call_at(wrapper, imports, scope, frame, accepts=_takes_input_and_target)
    if found is not None and isinstance(found.node, cst.Call):
        return found.node, found.span
    if frame.col is not None:
        return f"no call at the traced position {where}:{frame.col} (the file changed since the run?)"
    if not any(isinstance(c.node, cst.Call) and _takes_input_and_target(c.node) for c in calls_on_line(wrapper, frame.line)):
        return f"no call with a prediction and a target starts at {where}"
    return f"several calls at {where} take two arguments; the loss call among them is not certain"


def _takes_input_and_target(call: cst.Call) -> bool:
    return argument(call, 0, "input") is not None and argument(call, 1, "target") is not None


def traced_shape(scope: Scope, value: cst.BaseExpression) -> Shape | None:
    """The traced shape of an argument that is a plain local name holding a tensor."""
    if not isinstance(value, cst.Name):
        return None
    for names in (scope.locals, scope.globals):
        described = names.get(value.value)
        if described and described.is_tensor and described.shape is not None:
            return described.shape
    return None


def called_directly(failure: Failure, frame: Frame) -> bool:
    """Whether the user's call goes straight into torch: every deeper frame is torch's own.

    A warning printed without a traceback names the user's line itself (``F.mse_loss`` warns
    with ``stacklevel=2``), so there are no deeper frames to check.
    """
    frames = list(failure.frames)
    deeper = frames[frames.index(frame) + 1 :] if frame in frames else []
    if not deeper:
        return failure.warning
    return all(_in_torch(f.file) for f in deeper)


def _in_torch(path: str) -> bool:
    return "torch" in path.replace("\\", "/").split("/")[:-1]


def squeezes(value: cst.BaseExpression, dim: int) -> bool:
    """Whether an expression ends in ``.squeeze(dim)``."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    args = value.args
    return (
        value.func.attr.value == "squeeze" and len(args) == 1
        and isinstance(args[0].value, cst.Integer) and args[0].value.evaluated_value == dim
    )
