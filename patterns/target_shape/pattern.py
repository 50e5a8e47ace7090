"""target-shape: a loss given a prediction and a target that differ by a unit dimension."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.analysis import (
    ImportTable,
    argument,
    calls_on_line,
    has_star_args,
    loss_call_at,
    loss_name,
    one_line,
    place_in,
)
from repairbot.codemod import method_call, replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, SiteNodes
from repairbot.evidence import Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature, type_matches
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame, Site, Span

from . import probe

Shape = tuple[int, ...]

# The loss's two parameters and their positions, the same for every torch loss (nn.*Loss
# modules and F.* functions alike).
_POSITIONS = {"input": 0, "target": 1}


def _size(group: str) -> str:
    """``(torch.Size([2, 1]))`` with the numbers in ``group``; wraps and Python 2's ``2L`` too."""
    return rf"\(\s*(?:torch\.)?Size\(\s*\[(?P<{group}>[\d\sL,]*)\]\s*\)\s*\)"


# BCELoss's error and the broadcasting warning of the element-wise losses start alike.
_USING = (
    phrase("Using a target size") + r"\s*" + _size("target_size") + r"\s*"
    + phrase("that is different to the input size") + r"\s*" + _size("input_size")
)


@dataclass(frozen=True)
class SqueezeLossArgument(Rewrite):
    """Appends ``.squeeze(dim)`` to one argument of the loss call at the site, nothing else."""

    position: int  # the argument, by position or by keyword
    keyword: str
    dim: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, self.position, self.keyword)
        if target is None:
            raise EditError(f"no {self.keyword} argument")
        return [Edit(call, replace_arg_value(call, target, method_call(target.value, "squeeze", cst.Integer(str(self.dim)))))]


class TargetShape(Pattern):
    """Adds ``.squeeze(1)`` to the loss argument that has an extra dimension of size 1.

    What it fixes:
        A regression or binary-classification loss given a prediction of shape ``(N, 1)``
        (a model ending in ``nn.Linear(..., 1)``) and a target of shape ``(N,)`` (one label
        per sample), or the same the other way round; also ``(N, 1, H, W)`` against
        ``(N, H, W)`` (a one-channel mask model against plain masks).

    Why it fails:
        ``BCEWithLogitsLoss`` refuses: ``ValueError: Target size (torch.Size([N])) must be the
        same as input size (torch.Size([N, 1]))``; ``BCELoss`` too: ``ValueError: Using a
        target size (...) that is different to the input size (...) is deprecated``. The
        MSE, L1, SmoothL1 and Huber losses only warn (``UserWarning: Using a target size ...
        This will likely lead to incorrect results due to broadcasting``) and go on:
        ``(N, 1) - (N,)`` broadcasts to ``(N, N)``, every prediction is compared with every
        target and the model learns the mean. The tracing run turns that warning into a
        failure at the user's loss call (the ``target-size-warning`` probe), so the silent
        version is caught as well.

    Example:
        ``loss = criterion(out, y)`` with ``out`` traced as ``(2, 1)`` and ``y`` as ``(2,)``
        becomes ``loss = criterion(out.squeeze(1), y)``. An argument that is not a name, call,
        attribute or subscript is parenthesised first: ``((a + b) / 2).squeeze(1)``.

    Fix safety:
        Safe. The two shapes come from the error message and agree with the traced locals;
        the fix removes exactly the dimension of size 1 that the other side lacks, so the
        loss sees the element-wise pairs it was meant to. ``.squeeze(1)``, never a bare
        ``.squeeze()``, which would also drop the batch dimension of a last batch of one.

    Not handled:
        Shapes that differ by more than a unit dimension: ``(N, C)`` against ``(N,)`` with
        C > 1 (a class-count problem: CrossEntropyLoss, or a one-output last layer), channel
        or class counts that disagree (``(N, 3, H, W)`` against ``(N, 1, H, W)``), a 0-d side
        (``()`` against ``(1,)``, left by a bare ``.squeeze()`` on a batch of one), different
        batch sizes. These are declined with the remedy. Also a loss called through another
        package whose argument order is unknown, or with ``*args``.
    """

    ID = "target-shape"
    TITLE = "Loss prediction and target differ by a dimension of size 1"
    TAGS = frozenset({"shape", "loss"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        # BCEWithLogitsLoss / F.binary_cross_entropy_with_logits
        signature(
            ("ValueError",),
            phrase("Target size") + r"\s*" + _size("target_size") + r"\s*"
            + phrase("must be the same as input size") + r"\s*" + _size("input_size"),
        ),
        # BCELoss / F.binary_cross_entropy (a UserWarning before torch 1.0, an error since)
        signature(("ValueError", "UserWarning"), _USING + r"\s*" + phrase("is deprecated")),
        # MSE/L1/SmoothL1/Huber: the broadcasting warning (raised by the probe); a ValueError
        # of this text cut before "is deprecated" is BCELoss's
        signature(("UserWarning", "ValueError"), _USING),
    )
    EVIDENCE = frozenset({"locals"})
    PROBES = frozenset({probe.NAME})
    # The fix needs both sides to share their first (batch) size N and to differ only by a
    # dimension of size 1 elsewhere: that unit dimension is a feature or channel axis of the
    # model's output or of the labels, not a batch axis. The harness only ever lowers N to 2
    # (never to 1, the one size that could be mistaken for a unit dimension), and a batch size
    # hard-coded in the script would show up as two different first sizes, which locate
    # declines. So the forced batch size can neither create this failure nor hide it.
    BATCH_INVARIANT = True
    REWRITES = (SqueezeLossArgument,)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        input_shape, target_shape = _parse_shape(match["input_size"]), _parse_shape(match["target_size"])
        frame = failure.user_frame
        if frame is None:
            return self.decline("the loss is computed inside a library, not in the project's code")
        refused = _refusing_loss(failure)
        plan = _compare(input_shape, target_shape, classification=refused is not None)
        if isinstance(plan, _Mismatch):
            return self.decline(plan.reason, diagnosis=plan.diagnosis, at=frame)

        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        imports = ImportTable(module)
        scope = evidence.scope(frame) if evidence else Scope()
        found = _loss_call(wrapper, imports, scope, frame)
        if isinstance(found, str):
            return self.decline(found, at=frame)
        call, span = found
        where = f"{place_in(path, frame.line)}"
        if has_star_args(call):
            return self.decline(
                f"the loss call at {where} passes its arguments with * or **, so the argument to squeeze is not written out",
                diagnosis=f"squeeze dimension {plan.dim} of the {plan.role_word} before the call",
                at=frame,
            )
        input_arg, target_arg = (argument(call, _POSITIONS[role], role) for role in ("input", "target"))
        if input_arg is None or target_arg is None:
            return self.decline(f"the call at {where} does not pass a prediction and a target")

        expected = {"input": input_shape, "target": target_shape}
        traced: dict[str, list[int]] = {}
        for role, arg in (("input", input_arg), ("target", target_arg)):
            shape = _traced_shape(scope, arg.value)
            if shape is None:
                continue
            name = module.code_for_node(arg.value)
            if shape != expected[role]:
                return self.decline(
                    f"`{name}`, passed as the {_role_word(role)} at {where}, was traced as {_fmt(shape)}, "
                    f"but the loss saw a {_role_word(role)} of {_fmt(expected[role])}: the call's arguments "
                    "are not the loss's input and target in that order"
                )
            traced[name] = list(shape)

        loss = loss_name(call, imports, scope)
        if not traced and loss is None and not _called_directly(failure, frame):
            return self.decline(
                f"`{module.code_for_node(call.func)}` at {where} reaches the loss through another package, "
                "whose argument order is unknown",
                diagnosis=f"squeeze dimension {plan.dim} of the {plan.role_word} before it reaches the loss",
                at=frame,
            )

        chosen = input_arg if plan.role == "input" else target_arg
        code = one_line(module, chosen.value)
        if _squeezes(chosen.value, plan.dim):
            # A multi-line call keeps its traced columns when an argument grows: this is a
            # source already fixed since the run, not a second unit dimension to remove.
            return self.decline(
                f"the {plan.role_word} `{code}` at {where} is already squeezed at dimension {plan.dim}; "
                "the source changed since the traced run"
            )
        shown = f"`{code}`" if len(code) <= 40 else f"the {plan.role_word}"
        loss_label = loss or refused or "the loss"
        prediction, target = _fmt(input_shape), _fmt(target_shape)
        broadcast = None if refused is not None else _broadcast(input_shape, target_shape)
        effect, effect_long = _effect(loss_label, refused is not None, broadcast)
        traced_text = (
            "; traced: " + ", ".join(f"{name} {_fmt(tuple(shape))}" for name, shape in traced.items())
            if traced else ""
        )
        return Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=SqueezeLossArgument(_POSITIONS[plan.role], plan.role, plan.dim),
            summary=(
                f"Added .squeeze({plan.dim}) to {shown} at the loss call: the prediction was {prediction} "
                f"and the target {target}, {effect}"
            ),
            applicability=self.APPLICABILITY,
            evidence={
                "loss": loss_label,
                "call": where,
                "input_shape": list(input_shape),
                "target_shape": list(target_shape),
                "squeezed": {"argument": code, "role": plan.role, "dim": plan.dim},
                "traced_arguments": traced,
                "broadcast_shape": list(broadcast) if broadcast is not None else None,
            },
            evidence_text=(
                f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                f"(from the message{traced_text}); {effect_long}"
            ),
        )


# --------------------------------------------------------------------------------------------
# Shapes


@dataclass(frozen=True)
class _Squeeze:
    role: str  # "input" or "target": the side with the extra unit dimension
    dim: int

    @property
    def role_word(self) -> str:
        return _role_word(self.role)


@dataclass(frozen=True)
class _Mismatch:
    reason: str
    diagnosis: str | None = None


def _role_word(role: str) -> str:
    return "prediction" if role == "input" else "target"


def _parse_shape(text: str | None) -> Shape:
    return tuple(int(n) for n in re.findall(r"\d+", text or ""))


def _fmt(shape: Sequence[int]) -> str:
    """``(2, 1)``, ``(2,)``, ``()``: the shape as Python prints the tuple."""
    return str(tuple(shape))


def _unit_axis(longer: Shape, shorter: Shape) -> int | None:
    """The first axis after the batch axis where inserting a 1 into ``shorter`` gives ``longer``."""
    for axis in range(1, len(longer)):
        if longer[axis] == 1 and longer[:axis] + longer[axis + 1 :] == shorter:
            return axis
    return None


def _compare(input_shape: Shape, target_shape: Shape, classification: bool) -> _Squeeze | _Mismatch:
    """Whether the two sizes differ by exactly one unit dimension (and where), or why not."""
    sides = {"input": input_shape, "target": target_shape}
    if input_shape == target_shape:
        return _Mismatch("the message gives the same size for the prediction and the target; there is nothing to squeeze")
    if not input_shape or not target_shape:
        empty = "input" if not input_shape else "target"
        other = "target" if empty == "input" else "input"
        return _Mismatch(
            f"the {_role_word(empty)} is a 0-d tensor (shape ()) and the {_role_word(other)} "
            f"{_fmt(sides[other])}: a bare .squeeze() on a batch of one drops the batch dimension together "
            "with the unit one, and no .squeeze(1) at the loss can give it back",
            diagnosis=(
                f"where the {_role_word(empty)} is made, replace the bare .squeeze() with .squeeze(1) "
                "(or .squeeze(-1)) so that a batch of one keeps its batch dimension"
            ),
        )
    for longer, shorter in (("input", "target"), ("target", "input")):
        if len(sides[longer]) == len(sides[shorter]) + 1:
            axis = _unit_axis(sides[longer], sides[shorter])
            if axis is not None:
                return _Squeeze(longer, axis)
    if input_shape[0] != target_shape[0]:
        return _Mismatch(
            f"the prediction {_fmt(input_shape)} and the target {_fmt(target_shape)} differ in their first "
            f"(batch) dimension ({input_shape[0]} vs {target_shape[0]}): they do not come from the same "
            "batch, or one side is laid out differently, which no squeeze can fix",
            diagnosis="compute the prediction and the target from the same batch (look for a hard-coded batch size or a transposed output)",
        )
    if len(input_shape) == len(target_shape):
        axis = next(k for k in range(len(input_shape)) if input_shape[k] != target_shape[k])
        have, want = input_shape[axis], target_shape[axis]
        unit = "values per sample" if len(input_shape) == 2 else "channels"
        return _Mismatch(
            f"the prediction {_fmt(input_shape)} and the target {_fmt(target_shape)} differ in dimension "
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
        return _Mismatch(
            f"the prediction {_fmt(input_shape)} has {width} values per sample and the target "
            f"{_fmt(target_shape)} one: the model's output width and the labels disagree, and .squeeze(1) "
            "only removes a dimension of size 1",
            diagnosis=remedy,
        )
    if len(target_shape) == len(input_shape) + 1 and target_shape[:-1] == input_shape:
        width = target_shape[-1]
        return _Mismatch(
            f"the target {_fmt(target_shape)} has {width} values per sample and the prediction "
            f"{_fmt(input_shape)} one: the model's output width and the labels disagree, and .squeeze(1) "
            "only removes a dimension of size 1",
            diagnosis=f"make the model output {width} values per sample (its last layer), or give each sample one target value",
        )
    return _Mismatch(
        f"the prediction {_fmt(input_shape)} and the target {_fmt(target_shape)} differ by more than one "
        "dimension of size 1 (or by a larger dimension); which axes belong together cannot be told from the shapes",
        diagnosis="reshape the prediction or the target so that both have the same shape before the loss",
    )


def _broadcast(left: Shape, right: Shape) -> Shape | None:
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


def _effect(loss: str, refused: bool, broadcast: Shape | None) -> tuple[str, str]:
    """What the mismatch did, for the summary and for the evidence line."""
    if refused:
        return f"which {loss} refuses", f"{loss} requires equal shapes"
    if broadcast is None:
        return "which do not even broadcast", f"{loss} cannot broadcast them"
    return (
        f"which broadcast to {_fmt(broadcast)}",
        f"{loss} broadcast them to {_fmt(broadcast)}, pairing every prediction with every target",
    )


def _refusing_loss(failure: Failure) -> str | None:
    """The BCE loss that raises on different sizes, when the failure is its error (not a warning)."""
    if re.search(r"Target\s+size", failure.message):
        return "BCEWithLogitsLoss"
    if re.search(r"is\s+deprecated", failure.message) or not type_matches(failure.exc_type, "UserWarning"):
        return "BCELoss"
    return None


# --------------------------------------------------------------------------------------------
# The loss call


def _loss_call(
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


def _traced_shape(scope: Scope, value: cst.BaseExpression) -> Shape | None:
    """The traced shape of an argument that is a plain local name holding a tensor."""
    if not isinstance(value, cst.Name):
        return None
    for names in (scope.locals, scope.globals):
        described = names.get(value.value)
        if described and described.is_tensor and described.shape is not None:
            return described.shape
    return None


def _called_directly(failure: Failure, frame: Frame) -> bool:
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


def _squeezes(value: cst.BaseExpression, dim: int) -> bool:
    """Whether an expression ends in ``.squeeze(dim)``."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    args = value.args
    return (
        value.func.attr.value == "squeeze" and len(args) == 1
        and isinstance(args[0].value, cst.Integer) and args[0].value.evaluated_value == dim
    )


# --------------------------------------------------------------------------------------------
# The rewrite
