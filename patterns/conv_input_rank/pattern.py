"""conv-input-rank: a convolution given a tensor with too few or too many dimensions."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    Source,
    is_torch_name,
    last_binding,
    place,
    reads,
    resolve_site,
    shape_text,
    source,
    walk,
)
from repairbot.codemod import method_call
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, FailingModule
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import ITEM, Context, KeyPath, Made, Result, TracedFrame, ValueWalk
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

_DIMS = r"\[(?P<shape>[\d,\s]*)\]"
_RESHAPES = ("view", "reshape", "flatten")
# torch >= 1.11 reads a batch without its channel dimension as one unbatched sample
_CHANNELS = (
    r"Given groups=1, weight of size \[(?P<weight>[\d,\s]+)\], expected input\[(?P<input>[\d,\s]+)\] to have "
    r"(?P<expected>\d+) channels, but got (?P<got>\d+) channels instead"
)
# Where a dataset's tensor is made from the data, and the calls that pass it on with its dimensions.
_TENSOR_FROM_DATA = (
    "torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.as_tensor", "torch.from_numpy",
)
_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "type"})


def _ints(text: str | None) -> list[int]:
    return [int(v) for v in re.findall(r"\d+", text or "")]


def restoring_reshape(shape: Sequence[int], channels: int | None, spatial: int) -> str | None:
    """The call that gives a convolution's input back its dimensions, when it is certain.

    ``spatial`` is the convolution's number of spatial dimensions (2 for Conv2d).
    """
    if not shape or channels is None:
        return None
    rank = len(shape)
    if rank == spatial + 2:
        return None
    if rank == 2 and spatial == 2:
        features = shape[1]
        if features < 0 or channels <= 0:
            return None  # a recorded size or layer no real tensor has: no reshape is certain
        side = math.isqrt(features // channels) if features % channels == 0 else 0
        if side and side * side * channels == features:
            return f".view(-1, {channels}, {side}, {side})"
        # not a flattened [C, H, W]: one bare [H, W] sample of a single-channel conv
        return f".view(1, 1, {shape[0]}, {shape[1]})" if channels == 1 else None
    if rank == spatial + 1 and channels == 1:
        return ".unsqueeze(1)"  # [N, H, W]: the channel dimension is missing
    if rank == spatial + 1 and shape[0] == channels:
        return ".unsqueeze(0)"  # one sample [C, H, W]: the batch dimension is missing
    if rank == spatial + 3 and shape[2] == channels:
        return ".flatten(0, 1)"  # [N, T, C, H, W]: frames of clips, fold time into the batch
    if rank == spatial and channels == 1:
        return f".view(1, 1, {', '.join(map(str, shape))})"  # one single-channel sample, bare
    return None


@dataclass(frozen=True)
class Unflatten(Rewrite):
    """Gives the flatten call at the site the image's dimensions as its arguments."""

    args: str  # the new argument list, as code

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        replacement = cst.ensure_type(cst.parse_expression(f"f({self.args})"), cst.Call)
        return [Edit(call, call.with_changes(args=replacement.args))]


@dataclass(frozen=True)
class AddChannelDim(Rewrite):
    """Appends ``.unsqueeze(1)`` to the call that makes the dataset's tensor."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        around = nodes.parent(call)
        if isinstance(around, cst.Attribute) and around.attr.value == "unsqueeze":
            raise EditError("the tensor gets an unsqueeze there already")
        return [Edit(call, method_call(call, "unsqueeze", cst.Integer("1")))]


class ConvInputRank(Pattern):
    """Restores the image a flatten in the data code lost, or explains a convolution input's rank.

    What it fixes:
        A flatten in the project's data code (outside ``forward``) whose size is written as the
        image's, ``images.view(-1, 28 * 28)`` before a CNN, becomes ``images.view(-1, 1, 28,
        28)`` (``3 * 32 * 32`` gives ``3, 32, 32`` for a 3-channel conv); of several such
        flattens (an MLP's training loop and its accuracy helper), the one whose result the
        traced model call reads, then the next on the next attempt. A grayscale or 1-D batch
        without its channel dimension (``[N, 28, 28]``, ``[N, L]`` for a 1-channel conv, which
        torch >= 1.11 reads as one unbatched sample of ``N`` channels: the message is
        conv-in-channels', which declines it) gets ``.unsqueeze(1)`` where the tensor of the
        ``TensorDataset`` behind its DataLoader is made (``torch.tensor(x,
        dtype=torch.float32).unsqueeze(1)``), followed back from the conv's input through the
        loop, the loader and the dataset. Diagnosed, with the
        traced shape and the reshape that restores it: an ``nn.Conv1d/2d/3d`` fed a tensor that lost or gained a
        dimension: MNIST images flattened to ``[N, 784]`` for an MLP and then given to a CNN,
        grayscale ``[N, 28, 28]`` without the channel dimension, one image ``[3, 224, 224]``
        without the batch dimension (torch < 1.11), video clips ``[N, T, C, H, W]`` given to a
        Conv2d.

    Why it fails:
        ``RuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input
        of size: [100, 784]`` (torch >= 1.11; 2D/3D for conv1d, 4D/5D for conv3d); earlier
        ``Expected 4-dimensional input for 4-dimensional weight [32, 1, 5, 5], but got
        2-dimensional input of size [100, 784] instead`` (0.4 to 1.10, with the weight's sizes
        written without brackets up to 1.2), and in 0.3 the THNN ``3D or 4D input tensor
        expected but got: [100 x 784]``. The tracing run records the failing convolution
        (its type, ``in_channels``, construction site) and the shape it received.

    Example:
        ``self.conv1 = nn.Conv2d(1, 32, 5)`` given ``images = images.view(-1, 28 * 28)`` (left
        from an MLP's loop): the fix is ``images = images.view(-1, 1, 28, 28)``. Given
        ``images.view(-1, 784)``: "784 = 1 x 28 x 28: x.view(-1, 1, 28, 28)", diagnosed at the
        flatten.

    Fix safety:
        Safe: made only when the flatten's own arguments write the image's sides (a product
        ``H * W`` for a 1-channel conv, ``C * H * W`` with ``C`` its ``in_channels``), so the
        reshape is certain, and the rerun verifies. The ``.unsqueeze(1)`` only for a 1-channel
        conv fed the samples of a ``TensorDataset`` through a DataLoader (dimension 0 is the
        sample index by construction; a last dimension of 1, channels-last, is declined). A
        flatten to a plain number (``784``), one inside ``forward``, a batch sliced by hand
        (one ``[C, H, W]`` image looks the same) and every other rank are diagnosed: there the
        layout is a guess.

    Not handled:
        A functional ``F.conv2d`` on a hand-made weight (no module is recorded: the shapes
        come from the message only); non-square flattened images (the diagnosis gives the
        rule, not the numbers).
    """

    ID = "conv-input-rank"
    TITLE = "Convolution input has the wrong number of dimensions"
    TAGS = frozenset({"shape"})
    APPLICABILITY = Applicability.SAFE
    BATCH_INVARIANT = True
    REWRITES = (Unflatten, AddChannelDim)
    EVIDENCE = frozenset({"failing_module", "locals"})
    REMEDY = (
        "Give the convolution [N, C, H, W] (Conv2d; [N, C, L] for Conv1d, [N, C, D, H, W] for "
        "Conv3d): do not flatten images before a CNN (or undo it with x.view(-1, C, H, W)), add a "
        "missing channel dimension with x.unsqueeze(1) and a missing batch dimension with "
        "x.unsqueeze(0), and fold a time dimension into the batch (or use Conv3d)."
    )
    SIGNATURES = (
        signature(
            "RuntimeError",
            r"Expected (?P<unbatched>\d)D \(unbatched\) or (?P<batched>\d)D \(batched\) input to conv(?P<spatial>[123])d, "
            + phrase("but got input of size:") + r"\s*" + _DIMS,
        ),
        signature(
            "RuntimeError",
            r"Expected (?P<batched>\d)-dimensional input for (?P=batched)-dimensional weight\s*\[?(?P<weight>[\d,\s]*?)\]?,?\s+"
            + r"but got (?P<rank>\d)-dimensional input of size " + _DIMS,
        ),
        signature(
            "RuntimeError",
            r"Expected (?P<batched>\d)-dimensional input for (?P=batched)-dimensional weight.*?but got input of size " + _DIMS,
        ),
        signature("RuntimeError", _CHANNELS),
        signature(
            "RuntimeError",
            r"(?P<unbatched>\d)D or (?P<batched>\d)D input tensor expected but got: \[(?P<shape>[\d\sx]*)\]\s+at\s+\S*Convolution",
        ),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        groups = match.groupdict()
        module = evidence.failing_module if evidence else None
        conv: FailingModule | None = module if module and (module.type or "").startswith(("Conv", "LazyConv")) else None
        shape = list(conv.input_shape) if conv and conv.input_shape is not None else _ints(groups.get("shape"))
        batched = int(groups["batched"]) if groups.get("batched") else None
        spatial = int(groups["spatial"]) if groups.get("spatial") else (batched - 2 if batched else 2)
        weight = _ints(groups.get("weight"))
        channels = conv.in_channels if conv else (weight[1] if len(weight) >= 2 else None)
        channels = channels if isinstance(channels, int) else None
        kind = str(conv.type) if conv else f"Conv{spatial}d"
        if groups.get("expected") is not None:  # the channel message names no rank: the layer's
            spatial = {"Conv1d": 1, "Conv2d": 2, "Conv3d": 3}.get(kind.replace("Lazy", ""), spatial)
        site = resolve_site(evidence, conv.site) if conv else None
        layer = f"nn.{kind}({channels}, {conv.out_channels})" if conv and channels is not None else f"the {kind}"
        built = f" built at {place(site)}" if site else ""
        expected = f"[N, C{', L' if spatial == 1 else ', H, W' if spatial == 2 else ', D, H, W'}]"
        reshape = restoring_reshape(shape, channels, spatial)
        flatten = _flatten_site(sources, failure, frame, shape)
        reason = f"{layer}{built} received {shape_text(shape)} ({len(shape)} dimensions); it takes {expected}"
        if groups.get("expected") is not None:
            if conv is None or len(shape) != spatial + 1 or shape[-1] == 1:
                # a batch with its dimensions and other channels (conv-in-channels' case), or a
                # channels-last sample ([H, W, 1]) that an unsqueeze would misread
                return self.decline(f"{reason}: not a batch that lacks only its channel dimension")
            if channels != 1:
                return self.decline(f"{reason}: a channel dimension added to it would hold 1 channel, and the layer "
                                    f"takes {channels} (single-channel data for a {channels}-channel layer)")
            return self._channel_dim(failure, evidence, sources, shape, reason, expected)
        if flatten is not None and spatial == 2 and len(shape) == 2 and channels is not None:
            fixed = self._unflatten(sources, flatten, shape, channels, reason)
            if fixed is not None:
                return fixed
        if reshape is None:
            return self.decline(reason, diagnosis=self.REMEDY, at=flatten or frame)
        why = {
            ".unsqueeze(1)": "the channel dimension is missing",
            ".unsqueeze(0)": "the batch dimension is missing (one sample)",
            ".flatten(0, 1)": "a time dimension comes first: fold it into the batch (or use Conv3d)",
        }.get(reshape)
        if why is None and reshape.startswith(".view(1, 1,"):
            why = "one sample without its batch and channel dimensions"
        if why is None:
            side = _ints(reshape)[-1]
            why = f"{shape[1]} = {channels} x {side} x {side}: the image was flattened"
        where = f"; the input was flattened at {place(flatten)}" if flatten else ""
        return self.decline(
            f"{reason}: {why}{where}",
            diagnosis=(
                f"Give the layer its {expected} input: x{reshape} before it"
                + (f", or remove the flatten at {place(flatten)} if only the CNN reads these tensors" if flatten else "")
                + "."
            ),
            at=flatten or frame,
        )


    def _channel_dim(
        self, failure: Failure, evidence: Evidence | None, sources: Sources, shape: Sequence[int], reason: str,
        expected: str,
    ) -> Site | Decline:
        """A batch of a 1-channel conv without its channel dimension (``[N, 28, 28]``, ``[N, L]``),
        given ``.unsqueeze(1)`` where the tensor of a ``TensorDataset`` behind the DataLoader is
        made: dimension 0 of that tensor is the sample index by construction, so the missing one
        is dimension 1."""
        frame = failure.user_frame
        diagnosis = (f"Give the layer its {expected} input: add the channel dimension where the batch is made, "
                     f"x.unsqueeze(1) gives {shape_text([shape[0], 1, *shape[1:]])}.")
        why = f"{reason}: torch reads {shape_text(shape)} as one sample of {shape[0]} channels; the channel dimension is missing"
        made = _dataset_tensor(failure, evidence, sources)
        if isinstance(made, str):
            return self.decline(f"{why}, and {made}", diagnosis=diagnosis, at=frame)
        src = source(sources, str(made.file.path))
        if src is None or made.call not in src.positions:
            return self.decline(f"{why}; cannot read where the data is made", diagnosis=diagnosis, at=frame)
        old = src.code(made.call)
        return Site(
            pattern=self.ID,
            file=str(src.path),
            span=src.positions[made.call],
            rewrite=AddChannelDim(),
            summary=f"Added .unsqueeze(1) to {old}: the convolution takes [N, 1, ...], the dataset's samples lack the channel",
            applicability=self.APPLICABILITY,
            evidence={"traced_input_shape": list(shape), "in_channels": 1, "made_at": made.file.where(made.call),
                      "walk": list(made.trail)},
            evidence_text=f"{why}; the batch comes from the dataset tensor made at {made.file.where(made.call)} "
                          f"(traced: {' -> '.join(made.trail)})",
        )

    def _unflatten(
        self, sources: Sources, flatten: Frame, shape: Sequence[int], channels: int, reason: str
    ) -> Site | None:
        """The flatten of the data code rewritten to keep the image, when its own size says the
        image's: ``x.view(-1, 28 * 28)`` -> ``x.view(-1, 1, 28, 28)`` for a 1-channel conv."""
        src = source(sources, flatten.file)
        calls = [node for node, span in src.positions.items() if _is_flatten(node) and span.line == flatten.line] if src else []
        if src is None or len(calls) != 1:
            return None
        call = calls[0]
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        if call.func.attr.value == "flatten" or len(call.args) != 2 or any(a.keyword or a.star for a in call.args):
            return None
        factors = _integer_factors(call.args[1].value)
        if factors is None or math.prod(factors) != shape[1]:
            return None
        if len(factors) == 2 and channels == 1:
            dims = [1, *factors]
        elif len(factors) == 3 and factors[0] == channels:
            dims = factors
        else:
            return None
        first = src.code(call.args[0].value)
        new_args = ", ".join([first, *map(str, dims)])
        old = src.code(call)
        new = f"{src.code(call.func)}({new_args})"
        return Site(
            pattern=self.ID,
            file=str(src.path),
            span=src.positions[call],
            rewrite=Unflatten(new_args),
            summary=f"Changed {old} to {new}: the convolution takes the image, not its flattened pixels",
            applicability=self.APPLICABILITY,
            evidence={"traced_input_shape": list(shape), "in_channels": channels, "image": dims,
                      "flatten": place(flatten)},
            evidence_text=(f"{reason}; the flatten at {place(flatten)} writes the image's size "
                           f"{' * '.join(map(str, factors))} = {shape[1]}, which {'1 x ' if len(factors) == 2 else ''}"
                           f"{' x '.join(map(str, factors))} restores for a {channels}-channel conv"),
        )


def _integer_factors(node: cst.BaseExpression) -> list[int] | None:
    """``[28, 28]`` for ``28 * 28``; None unless the expression is a product of integers (a
    single number does not say the image's sides)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left, right = _integer_factors(node.left), _integer_factors(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, cst.Integer):
        return [int(node.value)]
    return None


def _flatten_site(sources: Sources, failure: Failure, frame: Frame | None, shape: Sequence[int]) -> Frame | None:
    """The one ``.view/.reshape/.flatten`` of the failing frames' files, outside the model's
    ``forward``, that makes a 2-D tensor (``x.view(-1, 784)``, ``x.reshape(x.size(0), -1)``)."""
    if frame is None or len(shape) != 2:
        return None
    files = {f.file for f in failure.frames if f.user}
    found: list[Frame] = []
    for file in sorted(files):
        src = source(sources, file)
        if src is None:
            continue
        for node, span in src.positions.items():
            if not _is_flatten(node) or _in_forward(src, span.line):
                continue
            found.append(Frame(file=str(src.path), line=span.line, user=True))
    unique = {(f.file, f.line): f for f in found}
    feeding = {(f.file, f.line) for f in _feeding_reshapes(sources, failure)}
    if feeding:
        # the traced call reads a reshape's result: that one, when it is such a flatten (a
        # flatten in a helper the run has not reached yet is not the one; a reshape that
        # already restores the image means the source changed since the run)
        hits = [unique[key] for key in sorted(feeding) if key in unique]
        return hits[0] if len(hits) == 1 else None
    return next(iter(unique.values())) if len(unique) == 1 else None


def _feeding_reshapes(sources: Sources, failure: Failure) -> list[Frame]:
    """The ``.view/.reshape/.flatten`` calls whose result a traced frame outside ``forward``
    passes on: in the last binding, before a user frame's line, of a name that line's calls
    read (``x = x.view(-1, 784)`` ... ``model(x)``)."""
    found: list[Frame] = []
    for frame in failure.frames:
        src = source(sources, frame.file) if frame.user else None
        if src is None or _in_forward(src, frame.line):
            continue
        calls = [node for node, span in src.positions.items() if isinstance(node, cst.Call) and span.line == frame.line]
        names = {name for call in calls for arg in call.args for name in reads(arg.value)}
        for name in sorted(names):
            bound = last_binding(src, name, frame.line)
            value = bound.value if bound is not None else None
            for node in walk(value) if value is not None else ():
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _RESHAPES:
                    found.append(Frame(file=str(src.path), line=src.positions[node].line, user=True))
    return found


def _is_flatten(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute):
        return False
    name = node.func.attr.value
    if name not in _RESHAPES:
        return False
    if name == "flatten":
        return len(node.args) == 1  # x.flatten(1)
    return len(node.args) == 2  # x.view(-1, 784), x.reshape(n, -1)


def _in_forward(src: Source, line: int) -> bool:
    return any(isinstance(node, cst.FunctionDef) and node.name.value == "forward" for node in src.around(line, cst.FunctionDef))




def _dataset_tensor(failure: Failure, evidence: Evidence | None, sources: Sources) -> Made | str:
    """The call that makes the tensor of a ``TensorDataset`` whose DataLoader batches reach the
    failing convolution (followed back with ``ValueWalk`` from the conv call's argument, through
    moves such as ``.to(device)``), or why it is not certain."""
    if evidence is None:
        return "the run recorded no evidence"
    passed: set[str] = set()

    def at_call(
        walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        func = call.func
        if is_torch_name(qualified, "torch.utils.data.DataLoader"):
            passed.add("loader")
        elif is_torch_name(qualified, "torch.utils.data.TensorDataset"):
            passed.add("dataset" if path[:1] == (ITEM,) else "other")
        elif qualified is None and isinstance(func, cst.Attribute) and func.attr.value in _MOVES:
            return walk.resolve(func.value, ctx, path, trail)
        elif not path and is_torch_name(qualified, *_TENSOR_FROM_DATA):
            return Made(call, ctx.file, trail, "data")
        return None

    walk = ValueWalk(failure, evidence, sources, at_call)
    if not walk.frames:
        return "no frame of the project's code failed"
    view = walk.view(len(walk.frames) - 1)
    if not isinstance(view, TracedFrame) or not isinstance(view.expression, cst.Call) or len(view.expression.args) != 1:
        return "the failing call's input cannot be read"
    result = walk.follow(view.expression.args[0].value, view.ctx, ())
    if not isinstance(result, Made):
        return f"where the batch is made is not certain ({result.reason})"
    if passed != {"loader", "dataset"} or walk.getitem is not None:
        return f"the tensor made at {result.file.where(result.call)} does not reach the layer as a TensorDataset's samples"
    return result
