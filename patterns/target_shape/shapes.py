"""The two shapes the loss was given: whether they differ by exactly one unit dimension (and
where), what the mismatch did (broadcast or refused), in words for the report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from repairbot.pattern import phrase, type_matches
from repairbot.types import Failure

Shape = tuple[int, ...]


def size(group: str) -> str:
    """``(torch.Size([2, 1]))`` with the numbers in ``group``; wraps and Python 2's ``2L`` too."""
    return rf"\(\s*(?:torch\.)?Size\(\s*\[(?P<{group}>[\d\sL,]*)\]\s*\)\s*\)"


# BCELoss's error and the broadcasting warning of the element-wise losses start alike.
USING = (
    phrase("Using a target size") + r"\s*" + size("target_size") + r"\s*"
    + phrase("that is different to the input size") + r"\s*" + size("input_size")
)


@dataclass(frozen=True)
class Squeeze:
    role: str  # "input" or "target": the side with the extra unit dimension
    dim: int

    @property
    def role_word(self) -> str:
        return role_of(self.role)


@dataclass(frozen=True)
class Mismatch:
    reason: str
    diagnosis: str | None = None


def role_of(role: str) -> str:
    return "prediction" if role == "input" else "target"


def parse_shape(text: str | None) -> Shape:
    return tuple(int(n) for n in re.findall(r"\d+", text or ""))


def fmt(shape: Sequence[int]) -> str:
    """``(2, 1)``, ``(2,)``, ``()``: the shape as Python prints the tuple."""
    return str(tuple(shape))


def _unit_axis(longer: Shape, shorter: Shape) -> int | None:
    """The first axis after the batch axis where inserting a 1 into ``shorter`` gives ``longer``."""
    for axis in range(1, len(longer)):
        if longer[axis] == 1 and longer[:axis] + longer[axis + 1 :] == shorter:
            return axis
    return None


def compare(input_shape: Shape, target_shape: Shape, classification: bool) -> Squeeze | Mismatch:
    """Whether the two sizes differ by exactly one unit dimension (and where), or why not."""
    sides = {"input": input_shape, "target": target_shape}
    if input_shape == target_shape:
        return Mismatch("the message gives the same size for the prediction and the target; there is nothing to squeeze")
    if not input_shape or not target_shape:
        empty = "input" if not input_shape else "target"
        other = "target" if empty == "input" else "input"
        return Mismatch(
            f"the {role_of(empty)} is a 0-d tensor (shape ()) and the {role_of(other)} "
            f"{fmt(sides[other])}: a bare .squeeze() on a batch of one drops the batch dimension together "
            "with the unit one, and no .squeeze(1) at the loss can give it back",
            diagnosis=(
                f"where the {role_of(empty)} is made, replace the bare .squeeze() with .squeeze(1) "
                "(or .squeeze(-1)) so that a batch of one keeps its batch dimension"
            ),
        )
    for longer, shorter in (("input", "target"), ("target", "input")):
        if len(sides[longer]) == len(sides[shorter]) + 1:
            axis = _unit_axis(sides[longer], sides[shorter])
            if axis is not None:
                return Squeeze(longer, axis)
    if input_shape[0] != target_shape[0]:
        return Mismatch(
            f"the prediction {fmt(input_shape)} and the target {fmt(target_shape)} differ in their first "
            f"(batch) dimension ({input_shape[0]} vs {target_shape[0]}): they do not come from the same "
            "batch, or one side is laid out differently, which no squeeze can fix",
            diagnosis="compute the prediction and the target from the same batch (look for a hard-coded batch size or a transposed output)",
        )
    if len(input_shape) == len(target_shape):
        axis = next(k for k in range(len(input_shape)) if input_shape[k] != target_shape[k])
        have, want = input_shape[axis], target_shape[axis]
        unit = "values per sample" if len(input_shape) == 2 else "channels"
        return Mismatch(
            f"the prediction {fmt(input_shape)} and the target {fmt(target_shape)} differ in dimension "
            f"{axis} ({have} vs {want} {unit}): a channel or class-count mismatch between the model's "
            "output and the target, not a missing or extra dimension of size 1",
            diagnosis=(
                f"make the model's last layer output {want} {unit}, as the target has, "
                f"or build the target with {have}"
            ),
        )
    if len(input_shape) == len(target_shape) + 1 and input_shape[:-1] == target_shape:
        width = input_shape[-1]
        if classification:
            remedy = (
                f"for one class index per sample among {width} classes use nn.CrossEntropyLoss with integer "
                "targets (labels.long()); for one binary label per sample make the last layer output one value "
                f"(nn.Linear(..., 1)); for multi-label targets give each sample {width} target values"
            )
        else:
            remedy = f"make the last layer output one value per sample, or give each sample {width} target values"
        return Mismatch(
            f"the prediction {fmt(input_shape)} has {width} values per sample and the target "
            f"{fmt(target_shape)} one: the model's output width and the labels disagree, and .squeeze(1) "
            "only removes a dimension of size 1",
            diagnosis=remedy,
        )
    if len(target_shape) == len(input_shape) + 1 and target_shape[:-1] == input_shape:
        width = target_shape[-1]
        return Mismatch(
            f"the target {fmt(target_shape)} has {width} values per sample and the prediction "
            f"{fmt(input_shape)} one: the model's output width and the labels disagree, and .squeeze(1) "
            "only removes a dimension of size 1",
            diagnosis=f"make the model output {width} values per sample (its last layer), or give each sample one target value",
        )
    return Mismatch(
        f"the prediction {fmt(input_shape)} and the target {fmt(target_shape)} differ by more than one "
        "dimension of size 1 (or by a larger dimension); which axes belong together cannot be told from the shapes",
        diagnosis="reshape the prediction or the target so that both have the same shape before the loss",
    )


def broadcast_shape(left: Shape, right: Shape) -> Shape | None:
    """The broadcast shape of two tensors (as the element-wise loss computes it), None if none."""
    width = max(len(left), len(right))
    a = (1,) * (width - len(left)) + left
    b = (1,) * (width - len(right)) + right
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(out)


def mismatch_effect(loss: str, refused: bool, broadcast: Shape | None) -> tuple[str, str]:
    """What the mismatch did, for the summary and for the evidence line."""
    if refused:
        return f"which {loss} refuses", f"{loss} requires equal shapes"
    if broadcast is None:
        return "which do not even broadcast", f"{loss} cannot broadcast them"
    return (
        f"which broadcast to {fmt(broadcast)}",
        f"{loss} broadcast them to {fmt(broadcast)}, pairing every prediction with every target",
    )


def refusing_loss(failure: Failure) -> str | None:
    """The BCE loss that raises on different sizes, when the failure is its error (not a warning)."""
    if re.search(r"Target\s+size", failure.message):
        return "BCEWithLogitsLoss"
    if re.search(r"is\s+deprecated", failure.message) or not type_matches(failure.exc_type, "UserWarning"):
        return "BCELoss"
    return None
