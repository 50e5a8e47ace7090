"""target-shape: a loss given a prediction and a target that differ by a unit dimension."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    Source,
    argument,
    assigned_value,
    calls_on_line,
    has_star_args,
    is_torch_name,
    last_binding,
    loss_call_at,
    loss_name,
    name_reads,
    one_line,
    place_in,
    source,
    walk,
)
from repairbot.codemod import method_call, replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature, type_matches
from repairbot.provenance import (
    Context,
    KeyPath,
    Made,
    ProjectFile,
    Result,
    ValueWalk,
    project_sources,
)
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame, Span

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


@dataclass(frozen=True)
class ReshapeBuiltTarget(Rewrite):
    """Appends ``.unsqueeze(dim)`` (or ``.squeeze(dim)``) to the expression that builds the
    target tensor, where it is written."""

    method: str  # unsqueeze or squeeze
    dim: int

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        built = nodes.node(cst.BaseExpression)
        return [Edit(built, method_call(built, self.method, cst.Integer(str(self.dim))))]


@dataclass(frozen=True)
class ItemAsList(Rewrite):
    """In a Dataset's ``torch.tensor(value)`` of a sample's target: the value wrapped in a
    one-element list (``torch.tensor([y])``: one value per sample, batched to (N, 1)), or such a
    list unwrapped (``torch.tensor(y)``: batched to (N,))."""

    wrap: bool

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        data = argument(call, 0, "data")
        if data is None:
            raise EditError("no data argument")
        value = data.value
        if self.wrap:
            changed: cst.BaseExpression = cst.List([cst.Element(value)])
        elif isinstance(value, cst.List) and len(value.elements) == 1 and isinstance(value.elements[0], cst.Element):
            changed = value.elements[0].value
        else:
            raise EditError("not a one-element list")
        return [Edit(call, replace_arg_value(call, data, changed))]


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
        When the target tensor is built from the data (``torch.tensor``, ``torch.Tensor``,
        ``torch.from_numpy``...) in one place of the loss's function (or module),
        followed back through moves (``y = y.to(device)``), row slices (``y[:n]``) and tuple
        assignments, and what it builds is read only on the way to loss calls of the same
        loss (and ``len()``), the dimension is fixed there instead, once for every loss call
        it feeds: ``y_tensor = torch.Tensor(y)`` -> ``torch.Tensor(y).unsqueeze(1)``,
        ``y_test = torch.from_numpy(y_test).float()`` -> ``torch.from_numpy(y_test).float().unsqueeze(1)``
        (the array it replaces is no read of the tensor); the fix at the loss call stays the
        alternative tried when that rerun fails. A target batched by a ``TensorDataset``
        (``DataLoader(TensorDataset(X_train, y_train))``), followed back from the loop through
        the DataLoader and the dataset to the one place that builds it, gets the same fix there
        when it is read only by that dataset, the dataset only by DataLoaders, and every loop
        over them reads the item only as that loss's target. A target made per
        sample in the project's Dataset (``__getitem__`` returning ``torch.tensor(self.y[i])``,
        batched to ``(N,)`` against ``(N, 1)``), followed back from the loop through the
        DataLoader, becomes ``torch.tensor([self.y[i]])`` there (or the other way round), when
        every loop over such items reads it only as that loss's target. A target also read
        otherwise (a metric, a plot, arithmetic) keeps the fix at the loss call, so nothing else
        broadcasts differently.

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
    REWRITES = (SqueezeLossArgument, ReshapeBuiltTarget, ItemAsList)

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
        src = source(sources, str(path))
        built = _built_target(src, call, target_arg.value, plan) if src is not None else None
        item = (
            _dataset_item(failure, evidence, sources, frame, call, target_arg.value, plan)
            if built is None and evidence is not None else None
        )
        batched = (
            _tensor_dataset_target(failure, evidence, sources, frame, call, target_arg.value, plan)
            if built is None and item is None and evidence is not None else None
        )
        if "already" in (built, item, batched):
            return self.decline(
                f"where the target of the loss call at {where} is made, it has that dimension already; the source "
                "changed since the traced run"
            )
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
        at_call = Site(
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
        if isinstance(item, tuple):
            made, made_file, wrap = item
            made_at = made_file.where(made)
            before = made_file.code(made)
            return Site(
                pattern=self.ID,
                file=str(made_file.path),
                span=made_file.src.positions[made],
                rewrite=ItemAsList(wrap),
                summary=(
                    f"{'Wrapped the sample' if wrap else 'Unwrapped the one-element list of the sample'}'s target "
                    f"{'in a one-element list ' if wrap else ''}in the Dataset item at {made_at} "
                    f"(`{before}`): the prediction was {prediction} and the batched target {target} at {where}, {effect}"
                ),
                applicability=self.APPLICABILITY,
                evidence={**at_call.evidence, "built_at": made_at, "built": before, "fixed_at": "dataset-item"},
                evidence_text=(
                    f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                    f"(from the message{traced_text}); {effect_long}; each sample's target is made at {made_at} and every "
                    "loop over the loader reads it only as this loss's target"
                ),
                alternatives=(at_call,),
            )
        if isinstance(batched, _Batched):
            method = "unsqueeze" if plan.role == "input" else "squeeze"
            built_code = batched.file.code(batched.built)
            built_at = batched.file.where(batched.built)
            dataset_at = batched.file.where(batched.dataset)
            return Site(
                pattern=self.ID,
                file=str(batched.file.path),
                span=batched.file.src.positions[batched.built],
                rewrite=ReshapeBuiltTarget(method, plan.dim),
                summary=(
                    f"Added .{method}({plan.dim}) where the target is built at {built_at} (`{built_code}`), before the "
                    f"TensorDataset at {dataset_at} batches it: the prediction was {prediction} and the batched target "
                    f"{target} at {where}, {effect}"
                ),
                applicability=self.APPLICABILITY,
                evidence={**at_call.evidence, "built_at": built_at, "built": built_code, "fixed_at": "target-creation",
                          "dataset_at": dataset_at},
                evidence_text=(
                    f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                    f"(from the message{traced_text}); {effect_long}; the batched target is tensor {batched.index} of "
                    f"the TensorDataset at {dataset_at}, built once at {built_at} and read only by it, and every loop "
                    "over its loaders reads it only as this loss's target"
                ),
                alternatives=(at_call,),
            )
        if not isinstance(built, _Built) or src is None:
            return at_call
        method = "unsqueeze" if plan.role == "input" else "squeeze"
        built_code = one_line(module, built.node)
        built_at = place_in(path, src.line(built.node))
        feeds = f"the {built.losses} loss calls it feeds" if built.losses > 1 else "the loss call"
        return Site(
            pattern=self.ID,
            file=str(path),
            span=src.positions[built.node],
            rewrite=ReshapeBuiltTarget(method, plan.dim),
            summary=(
                f"Added .{method}({plan.dim}) where the target is built at {built_at} (`{built_code}`): the prediction "
                f"was {prediction} and the target {target} at {where}, {effect}"
            ),
            applicability=self.APPLICABILITY,
            evidence={**at_call.evidence, "built_at": built_at, "built": built_code, "fixed_at": "target-creation"},
            evidence_text=(
                f"the loss call at {where} got a prediction of {prediction} and a target of {target} "
                f"(from the message{traced_text}); {effect_long}; the target is built once at {built_at} and read only "
                f"as the target of {feeds}: one .{method}({plan.dim}) there"
            ),
            alternatives=(at_call,),
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
# Where the target is built

_MOVES = frozenset({"to", "cuda", "cpu", "float", "double"})  # the same values, shape kept
# Where a target tensor is built from the data (Python numbers, numpy arrays).
_TENSOR_FROM_DATA = (
    "torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.as_tensor", "torch.from_numpy",
)


@dataclass(frozen=True)
class _Built:
    node: cst.BaseExpression  # the expression that builds the target tensor
    losses: int  # the loss calls its values reach as their target


def _built_target(src: Source, loss: cst.Call, target: cst.BaseExpression, plan: _Squeeze) -> _Built | str | None:
    """The one expression of the loss's function (or module) that builds the target tensor, when
    what it builds is read only on the way to loss calls of the same callee: followed back from
    the target through moves, row slices and names; None when the fix belongs at the loss call,
    ``"already"`` when what builds it has that fix already."""
    if not isinstance(target, cst.Name) or plan.dim < 1:
        return None
    name, line = target.value, src.line(loss)
    for _ in range(8):
        event = last_binding(src, name, line)
        value = assigned_value(event.statement, name) if event is not None else None
        if event is None or value is None:
            return None
        line = src.line(event.statement)
        inner = _passed_through(value)
        if inner is not None:
            name = inner
            continue
        if _reshaped(value, plan) is not None:
            return "already"  # built with the very dimension fix: the source changed since the run
        if not _builds_from_data(src, value):
            return None  # computed (arithmetic, a reduction): its shape is the computation's, fixed at the loss
        owner = _scope_of(src, event.statement)
        reached: set[int] = set()
        # `y = torch.from_numpy(y)` reads the array it replaces: no read of the tensor
        rebuilt = {id(n) for n in walk(value)}
        if not _feeds_only(src, owner, name, loss, reached, set(), rebuilt) or id(loss) not in reached:
            return None
        return _Built(value, len(reached))
    return None


def _builds_from_data(src: Source, value: cst.BaseExpression) -> bool:
    """Whether ``value`` builds a tensor from the data, then moves or casts it:
    ``torch.tensor(y)``, ``torch.from_numpy(y).float()``, ``torch.Tensor(y).to(device)``."""
    while (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES
        and isinstance(value.func.value, cst.Call)
    ):
        value = value.func.value
    return isinstance(value, cst.Call) and is_torch_name(src.imports.qualify(value.func), *_TENSOR_FROM_DATA)


@dataclass(frozen=True)
class _Batched:
    built: cst.BaseExpression  # the expression that builds the whole target tensor
    file: ProjectFile
    dataset: cst.Call  # the TensorDataset that batches it
    index: int  # its position among the dataset's tensors


def _tensor_dataset_target(
    failure: Failure, evidence: Evidence, sources: Sources, frame: Frame, loss: cst.Call,
    target: cst.BaseExpression, plan: _Squeeze,
) -> _Batched | str | None:
    """A batched target that is one tensor of a ``TensorDataset`` (followed back with
    ``ValueWalk``: the loop, the DataLoader, the dataset) built from the data in one place
    (``y_train = torch.from_numpy(y_train).float()``): fixed there, as the dataset indexes its
    first dimension only, when the built tensor is read only by that dataset, the dataset only
    by DataLoaders, each loader only by loops that unpack its items, and every such loop of the
    project reads that item only as this loss's target; ``"already"`` when it is built with
    the fix."""
    if not isinstance(target, cst.Name) or plan.dim != 1:
        return None
    datasets: list[tuple[cst.Call, int]] = []

    def at_call(
        values: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        if is_torch_name(qualified, "torch.utils.data.TensorDataset") and len(path) > 1 and path[1].kind == "index":
            datasets.append((call, int(path[1].value)))
            return None  # the walk's own rule takes the tensor
        if not path and _builds_from_data(ctx.file.src, call):
            return Made(call, ctx.file, trail, "built")
        fixed = _reshaped(call, plan)
        if not path and fixed is not None and _builds_from_data(ctx.file.src, fixed):
            return Made(call, ctx.file, trail, "already")
        if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
            return values.resolve(call.func.value, ctx, path, trail)
        return None

    result = ValueWalk(failure, evidence, sources, at_call).follow_name_at(frame, target.value)
    if not isinstance(result, Made) or len(datasets) != 1:
        return None
    if result.kind == "already":
        return "already"  # built with the very dimension fix: the source changed since the run
    dataset, position = datasets[0]
    file, built = result.file, result.call
    tensors = [a for a in dataset.args if a.keyword is None and not a.star]
    if file.enclosing(dataset, cst.FunctionDef) is not file.enclosing(built, cst.FunctionDef) \
            or len(tensors) != len(dataset.args) or not 0 <= position < len(tensors):
        return None
    if tensors[position].value is not built:
        statement = file.parents.get(built)
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 \
                or not isinstance(statement.targets[0].target, cst.Name):
            return None
        name = statement.targets[0].target.value
        rebuilt = {id(n) for n in walk(built)}
        owner = _scope_of(file.src, statement)
        reads = [r for r in _reads_of(owner, name) if id(r) not in rebuilt and not _in_target(file.parents, r)]
        if not reads or any(r is not tensors[position].value and not _in_len(file.parents, r) for r in reads):
            return None
    if not _read_only_by_loops(file, dataset, len(tensors)):
        return None
    loss_src = source(sources, frame.file)
    if loss_src is None or not _loops_read_only_as_target(sources, loss_src, loss, len(tensors), position):
        return None
    return _Batched(built, file, dataset, position)


def _in_len(parents: Mapping[cst.CSTNode, cst.CSTNode], read: cst.Name) -> bool:
    arg = parents.get(read)
    call = parents.get(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"


def _read_only_by_loops(file: ProjectFile, dataset: cst.Call, arity: int) -> bool:
    """Whether a dataset is read only by DataLoaders (directly or by name), and each loader
    only by ``for`` loops that unpack ``arity`` values from its items (or by ``len()``)."""
    parents = file.parents
    loaders: list[cst.Call] = []
    for made in _bound_uses(file, dataset):
        arg = parents.get(made)
        loader = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(loader, cst.Call) or not is_torch_name(file.src.imports.qualify(loader.func), "torch.utils.data.DataLoader") \
                or argument(loader, 0, "dataset") is not arg:
            return False
        loaders.append(loader)
    for loader in loaders:
        for used in _bound_uses(file, loader):
            loop: cst.CSTNode | None = parents.get(used)
            if isinstance(loop, cst.Arg):  # enumerate(loader), tqdm(loader)
                loop = parents.get(parents.get(loop) or loop)
            names = _unpacked(loop) if isinstance(loop, cst.For) else None
            if names is None or len(names) != arity:
                return False
    return bool(loaders)


def _bound_uses(file: ProjectFile, value: cst.Call) -> list[cst.BaseExpression]:
    """Where a call's value is used: the call itself as an argument, or the reads of the one
    name it is assigned to (``len()`` left out); a binding of another form gives no uses."""
    statement = file.parents.get(value)
    if not isinstance(statement, cst.Assign):
        return [value]
    if len(statement.targets) != 1 or not isinstance(statement.targets[0].target, cst.Name):
        return []
    name = statement.targets[0].target.value
    owner = _scope_of(file.src, statement)
    return [
        r for r in _reads_of(owner, name)
        if not _in_target(file.parents, r) and not _in_len(file.parents, r)
    ]


def _reshaped(value: cst.BaseExpression, plan: _Squeeze) -> cst.BaseExpression | None:
    """The receiver of ``value`` when it ends in the method this fix adds (``.unsqueeze(1)``)."""
    method = "unsqueeze" if plan.role == "input" else "squeeze"
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == method \
            and len(value.args) == 1 and _is_integer(value.args[0].value, plan.dim):
        return value.func.value
    return None


def _dataset_item(
    failure: Failure, evidence: Evidence, sources: Sources, frame: Frame, loss: cst.Call,
    target: cst.BaseExpression, plan: _Squeeze,
) -> tuple[cst.Call, ProjectFile, bool] | str | None:
    """A batched target made per sample in a Dataset's ``__getitem__`` by ``torch.tensor(value)``
    (followed back with ``ValueWalk``: the loop, the DataLoader, the Dataset), when a one-element
    list there (``[value]``, or its removal) gives the batch the unit dimension at axis 1 the
    other side has, and every loop of the project that unpacks such items reads that one only as
    this loss's target. The call, its file, and whether to wrap (else unwrap); ``"already"``
    when the item is made that way already."""
    if not isinstance(target, cst.Name) or plan.dim != 1:
        return None
    values = ValueWalk(failure, evidence, sources, _at_item_call)
    result = values.follow_name_at(frame, target.value)
    if not isinstance(result, Made) or values.getitem is None:
        return None
    file, returned = values.getitem
    elements = returned.value.elements if isinstance(returned.value, cst.Tuple) else ()
    position = next((i for i, e in enumerate(elements) if e.value is result.call), None)
    data = argument(result.call, 0, "data")
    if position is None or data is None or any(a.star for a in result.call.args):
        return None
    one = isinstance(data.value, cst.List) and len(data.value.elements) == 1
    wrap = plan.role == "input"  # the batch lacks the unit dimension the prediction has
    if wrap and one:
        return "already"  # made a one-element list already: the source changed since the run
    if wrap == one:
        return None
    loss_src = source(sources, frame.file)
    if loss_src is None or not _loops_read_only_as_target(sources, loss_src, loss, len(elements), position):
        return None
    return result.call, file, wrap


def _at_item_call(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """The walk ends at a tensor made from a sample's data; a move passes through."""
    func = call.func
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value in _MOVES:
        return walk.resolve(func.value, ctx, path, trail)
    if not path and is_torch_name(qualified, "torch.tensor", "torch.as_tensor"):
        return Made(call, ctx.file, trail, "item")
    return None


def _loops_read_only_as_target(sources: Sources, src: Source, loss: cst.Call, arity: int, position: int) -> bool:
    """Whether every loop of the project's files that unpacks items of ``arity`` values (directly,
    or under ``enumerate``) reads value ``position`` only as the target of the failing loss's
    callee, and no item is taken otherwise (``next(...)``); the failing loss among them."""
    reached: set[int] = set()
    for each in project_sources(sources, src):
        nodes = list(walk(each.module))
        if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "next" for n in nodes):
            return False
        loops = [n for n in nodes if isinstance(n, cst.For)]
        for loop in loops:
            names = _unpacked(loop)
            if names is None or len(names) != arity:
                continue
            name = names[position]
            if name is None or not _feeds_only(each, _scope_of(each, loop), name, loss, reached, set()):
                return False
    return id(loss) in reached


def _unpacked(loop: cst.For) -> list[str | None] | None:
    """The names a loop's tuple target unpacks (``x, y``, or ``i, (x, y)`` under enumerate)."""
    target = loop.target
    if isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Tuple) \
            and isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "enumerate":
        target = target.elements[1].value
    if not isinstance(target, cst.Tuple | cst.List) or any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    return [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]


def _passed_through(value: cst.BaseExpression) -> str | None:
    """The name whose tensor ``value`` passes on with its dimensions: ``y``, ``y.to(device)``,
    ``y.float()``, a row slice ``y[:n]``."""
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES:
        return _passed_through(value.func.value) if isinstance(value.func.value, cst.Name) else None
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and len(value.slice) == 1 \
            and isinstance(value.slice[0].slice, cst.Slice):
        return value.value.value
    return None


def _scope_of(src: Source, node: cst.CSTNode) -> cst.CSTNode:
    parents = src.wrapper.resolve(ParentNodeProvider)
    current = parents.get(node)
    while current is not None and not isinstance(current, cst.FunctionDef):
        current = parents.get(current)
    return current if current is not None else src.module


def _feeds_only(
    src: Source, owner: cst.CSTNode, name: str, loss: cst.Call, reached: set[int], seen: set[str],
    skipped: frozenset[int] | set[int] = frozenset(),
) -> bool:
    """Whether every read of ``name`` in ``owner`` (but those of nodes in ``skipped``) is the
    target of a loss call of the failing call's callee (added to ``reached``), ``len()``, or
    passes its tensor on (a move, a row slice) to a plain name whose reads are such in turn."""
    if name in seen:
        return True
    seen.add(name)
    parents = src.wrapper.resolve(ParentNodeProvider)
    callee = src.module.code_for_node(loss.func)
    for read in _reads_of(owner, name):
        parent = parents.get(read)
        if id(read) in skipped or _in_target(parents, read):
            continue  # a binding, not a read
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            if argument(call, 1, "target") is parent and src.module.code_for_node(call.func) == callee:
                reached.add(id(call))
                continue
            if isinstance(call.func, cst.Name) and call.func.value == "len":
                continue
            if _blind_in_function(src, call, parent, seen):
                continue
            return False
        passed: cst.CSTNode = read
        while not isinstance(parents.get(passed), cst.Assign | cst.Element):
            above = parents.get(passed)
            if not isinstance(above, cst.Attribute | cst.Call | cst.Subscript | cst.SubscriptElement | cst.Index
                              | cst.Slice | cst.Arg):
                return False
            passed = above
        if not isinstance(passed, cst.BaseExpression) or _passed_through(passed) != name:
            return False
        statement = parents.get(passed)
        if isinstance(statement, cst.Element):
            statement = parents.get(parents.get(statement) or statement)
        bound = _names_bound_to(statement, passed) if isinstance(statement, cst.Assign) else None
        if bound is None or not _feeds_only(src, owner, bound, loss, reached, seen):
            return False
    return True


# Reads of a tensor whose result does not depend on a unit dimension after the batch axis.
_FLATTENS = frozenset({"view", "reshape"})  # with the one argument -1


def _blind_in_function(src: Source, call: cst.Call, arg: cst.Arg, seen: set[str]) -> bool:
    """Whether a module-level function of the file that gets the target as an argument reads
    that parameter only shape-blind: flattened (``.view(-1)``, ``.reshape(-1)``, ``.flatten()``),
    its batch size (``.size(0)``, ``.shape[0]``, ``len()``)."""
    if not isinstance(call.func, cst.Name) or arg.star:
        return False
    functions = [f for f in src.module.body if isinstance(f, cst.FunctionDef) and f.name.value == call.func.value]
    if len(functions) != 1:
        return False
    params = [p.name.value for p in functions[0].params.params]
    if arg.keyword is not None:
        param = arg.keyword.value
    else:
        position = [a for a in call.args if a.keyword is None].index(arg)
        param = params[position] if position < len(params) else ""
    if param not in params or functions[0].name.value in seen:
        return False
    parents = src.wrapper.resolve(ParentNodeProvider)
    return all(_shape_blind(parents, read) for read in _reads_of(functions[0], param))


def _shape_blind(parents: Mapping[cst.CSTNode, cst.CSTNode], read: cst.Name) -> bool:
    above = parents.get(read)
    if isinstance(above, cst.Arg):
        call = parents.get(above)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"
    if not isinstance(above, cst.Attribute) or above.value is not read:
        return False
    call = parents.get(above)
    method = above.attr.value
    if isinstance(call, cst.Call) and call.func is above:
        given = [a.value for a in call.args]
        if method in _FLATTENS:
            return len(given) == 1 and isinstance(given[0], cst.UnaryOperation) and _is_integer(given[0].expression, 1)
        if method == "flatten":
            return not given
        return method == "size" and len(given) == 1 and _is_integer(given[0], 0)
    if method == "shape" and isinstance(call, cst.SubscriptElement | cst.Subscript):
        subscript = call if isinstance(call, cst.Subscript) else parents.get(call)
        if isinstance(subscript, cst.Subscript) and len(subscript.slice) == 1:
            index = subscript.slice[0].slice
            return isinstance(index, cst.Index) and _is_integer(index.value, 0)
    return False


def _is_integer(node: cst.BaseExpression, value: int) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == value


def _names_bound_to(assign: cst.Assign, value: cst.BaseExpression) -> str | None:
    """The plain name an assignment binds ``value`` (or its tuple element) to."""
    if len(assign.targets) != 1:
        return None
    bound = assign.targets[0].target
    if assign.value is value:
        return bound.value if isinstance(bound, cst.Name) else None
    if isinstance(bound, cst.Tuple | cst.List) and isinstance(assign.value, cst.Tuple | cst.List) \
            and len(bound.elements) == len(assign.value.elements):
        for left, right in zip(bound.elements, assign.value.elements, strict=True):
            if right.value is value:
                return left.value.value if isinstance(left.value, cst.Name) else None
    return None


def _in_target(parents: Mapping[cst.CSTNode, cst.CSTNode], node: cst.CSTNode) -> bool:
    """Whether a name is bound where it stands: in an assignment's target or a loop's."""
    child, current = node, parents.get(node)
    while current is not None:
        if isinstance(current, cst.AssignTarget):
            return True
        if isinstance(current, cst.For):
            return current.target is child
        if isinstance(current, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            return False
        child, current = current, parents.get(current)
    return False


def _reads_of(owner: cst.CSTNode, name: str) -> list[cst.Name]:
    """The reads of ``name`` in a function's body (its parameters left out) or a module."""
    return name_reads(owner.body if isinstance(owner, cst.FunctionDef) else owner, name)


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
