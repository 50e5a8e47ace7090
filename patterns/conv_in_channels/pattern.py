"""conv-in-channels: a convolution built for another number of input channels than it receives.

This module holds the pattern and its choice of fix; ``records.py`` reads what the run
recorded about the failing conv, ``direction.py`` weighs how safe a change of the layer is
(and words the remedy), and ``rewrites.py`` holds the fixes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Source,
    argument,
    called_name,
    has_star_args,
    last_binding,
    name_reads,
    one_line,
    place,
    resolve_site,
    shape_text,
    source,
)
from repairbot.codemod import append_keyword, replace_arg_value
from repairbot.edits import Site
from repairbot.evidence import Evidence, FailingModule
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import DEFAULT, Written, integer_value, written_at
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame

from . import probe
from .direction import (
    Direction,
    conversion_text,
    convert_text,
    defaulted_parameter,
    one_channel_data,
    reads_at,
    remedy_text,
    weight_set_by_hand,
)
from .records import (
    channels_before,
    construction_call,
    constructions,
    conv_call,
    data_tensor_frame,
    instance_sites,
    layer_record,
    loaded_weights,
    statement_text_node,
)
from .rewrites import (
    PassChannelsAtConstruction,
    PermuteChannelsFirst,
    SetInChannels,
    SetWrittenChannels,
)

_WEIGHT = r"(?:weight of size \[?(?P<weight>[\d,\s]+?)\]?|weight\[(?P<weight04>[\d,\s]+)\],\s+so)"


_EXPECTED = (
    r"expected input\[(?P<input>[\d,\s]+)\] to have (?P<expected>\d+) channels, but got (?P<got>\d+) channels instead"
)


def _ints(text: str | None) -> list[int]:
    return [int(v) for v in re.findall(r"\d+", text or "")]


class ConvInChannels(Pattern):
    """Sets a convolution's ``in_channels`` to the channels it really receives, or explains the data.

    What it fixes:
        A ``nn.Conv1d/2d/3d`` of the project written for another channel count than its input
        has: a model written for RGB trained on grayscale data, a second conv that does not
        take the first one's ``out_channels``, a 1-D conv over sensors counted wrong. The
        integer ``in_channels`` where the layer is built becomes the traced channel count; an
        ``in_channels`` given by a name is changed where its value is written, found along the
        constructor chain the run traced: the argument at the call site (``TinyVGG(input_shape=1)``
        -> ``input_shape=3``), a config attribute or dict entry, an argparse default
        (``opt.channels`` -> ``default=3``), a name bound once; a parameter's default that the
        one construction the run saw leaves out (``def __init__(self, channels=3)``, ``net =
        SmallCNN()`` on grayscale data) is passed there, ``SmallCNN(channels=1)``, in the
        call's keyword style. A
        channels-last batch (``[N, H, W, C]`` with ``C`` equal to ``in_channels``) gets
        ``.permute(0, 3, 1, 2)`` where an assignment makes it (``x = torch.from_numpy(...)``).
        Diagnosed instead: a layer whose weights a ``load_state_dict`` of the run filled (the
        ``conv-history`` probe records which convs each executed load filled, so a load in a
        branch the run never took or one that left the conv out does not count) or a library
        model (the data must be converted: grayscale to 3 channels); data whose channels change
        from batch to batch (a grayscale image among RGB ones, after the conv already took
        batches of its own channel count: converted where the dataset loads each sample); a
        channels-last batch that a DataLoader loop makes (the dataset must convert it) and a
        batch missing its channel dimension.

    Why it fails:
        ``RuntimeError: Given groups=1, weight of size [32, 3, 3, 3], expected input[2, 1, 28,
        28] to have 3 channels, but got 1 channels instead`` (torch >= 1.5; 1.0 to 1.4 write
        the weight size without brackets, ``weight of size 32 3 3 3``; 0.4: ``weight[32, 3, 3,
        3], so expected input[...]``; transposed convolutions say ``Given transposed=1``).
        The weight is ``[out_channels, in_channels / groups, *kernel]``; dimension 1 of the
        input must equal ``in_channels``. The tracing run records the failing convolution (its
        sizes, the line that built it) and the shape it received, and the tensors of the
        user's frames, which tell whether that input is the data as loaded.

    Example:
        ``self.conv1 = nn.Conv2d(3, 32, 3)`` trained on MNIST batches ``[2, 1, 28, 28]``: the
        fix is ``nn.Conv2d(1, 32, 3)``. ``nn.Conv2d(32, 64, 3)`` after ``nn.Conv2d(1, 16, 3)``
        becomes ``nn.Conv2d(16, 64, 3)``.

    Fix safety:
        Safe: only ``in_channels`` changes, to what the layer receives in the run, for a layer
        the project builds itself from scratch (no load of the run filled its weights), written
        as a plain number in a call that builds one layer, or as one number where the name's
        value is written when the layer receives the data itself (or passed at the one
        construction, for a default that sizes nothing else); the rerun verifies. Data with
        more channels than the layer (colour images for a layer written for one channel) is
        unsafe: the data may be what is wrong (converted to grayscale elsewhere, or meant to
        be), and it is declined, naming both values and where each is written, when the
        project's code says so: a grayscale conversion (``transforms.Grayscale()``,
        ``.convert("L")``, ``cv2.COLOR_BGR2GRAY``, a ``to_grayscale`` helper) or a one-channel
        ``Normalize((0.5,), (0.5,))`` in its files, a single-channel filter
        (``nn.Conv2d(1, 1, ...)``, which ``in_channels=3`` would turn into a sum of the
        colours), a weight set by hand. The
        ``.permute`` fix is unsafe: the layout is inferred from the sizes, and code after the
        model call that reads the batch as channels-last (plotting) must permute it back.

    Not handled:
        ``in_channels`` computed by an expression or written in no single place (the diagnosis
        says what it must evaluate to); a parameter's default when the run built the layer more
        than once, when the parameter also sizes something else of the class (a decoder's
        ``out_channels``), when the construction is not in a file the run executed, or when
        the data has more channels than the default; a named ``in_channels`` of a
        layer whose input is another layer's output; grouped convolutions (``groups`` > 1);
        convolutions built in a loop or a comprehension; functional ``F.conv2d`` on a hand-made
        weight.
    """

    ID = "conv-in-channels"
    TITLE = "Convolution in_channels does not match its input's channels"
    TAGS = frozenset({"shape"})
    APPLICABILITY = Applicability.SAFE
    EVIDENCE = frozenset({"failing_module", "locals", probe.NAME})
    # on in the rerun that gathers evidence for this failure only (every case of every pattern
    # would otherwise record it): which convs a traced load_state_dict filled, and the
    # channels each conv took before the failure
    RERUN_PROBES = frozenset({probe.NAME})
    SIGNATURES = (
        signature("RuntimeError", r"Given (?P<kind>groups|transposed)=(?P<groups>\d+),\s+" + _WEIGHT + r",?\s+" + _EXPECTED),
        signature(
            "RuntimeError",
            phrase("Need input of dimension") + r"\s+(?P<rank>\d)\s+and input\.size\[1\] == (?P<expected>\d+)\s+"
            + r"but got input to have (?P<got_rank>\d) dimensions and input\.size\[1\] == (?P<got>\d+)",
        ),
    )
    REWRITES = (SetInChannels, SetWrittenChannels, PassChannelsAtConstruction, PermuteChannelsFirst)

    def needs_confirmation(self, failure: Failure, evidence: Evidence | None) -> bool:
        module = evidence.failing_module if evidence else None
        shape = module.input_shape if module else None
        if not shape or evidence is None:
            return True
        # The batch still in front: the channels flowed through unchanged and cannot depend on it.
        return bool(shape[0] != evidence.limits.batch_size)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        groups = match.groupdict()
        expected, got = int(groups["expected"]), int(groups["got"])
        module = evidence.failing_module if evidence else None
        if not module or not (module.type or "").startswith(("Conv", "LazyConv")):
            return self.decline(
                f"a convolution expected {expected} input channels and got {got}, but no nn.Conv module "
                "of the run failed (a functional conv on a hand-made weight)",
                diagnosis=remedy_text(expected, got), at=frame,
            )
        kind = str(module.type)
        in_channels = module.in_channels
        shape = list(module.input_shape) if module.input_shape is not None else _ints(groups.get("input"))
        site = resolve_site(evidence, module.site)
        built = f" built at {place(site)}" if site else ""
        layer = f"nn.{kind}({in_channels}, {module.out_channels}){built}"
        rank = {"Conv1d": 3, "Conv2d": 4, "Conv3d": 5}.get(kind.replace("Lazy", ""), 4)
        if groups.get("kind") == "transposed" or (groups.get("groups") and int(groups["groups"]) != 1):
            return self.decline(f"{layer} is a grouped or transposed convolution; its channel rule differs",
                                diagnosis=remedy_text(expected, got), at=site or frame)
        if not isinstance(in_channels, int) or shape is None:
            return self.decline(f"{layer}: the run did not record its sizes", diagnosis=remedy_text(expected, got), at=frame)
        if len(shape) == rank - 1:
            return self.decline(
                f"{layer} received {shape_text(shape)}: without a batch dimension torch reads it as one sample "
                f"of {shape[0]} channels; the channel dimension is missing",
                diagnosis=(
                    f"Add the channel dimension where the batch is made: x.unsqueeze(1) gives "
                    f"{shape_text([shape[0], 1, *shape[1:]])}."
                    if in_channels == 1 else
                    # one channel given to a layer of several: the data are grayscale, the layer is not
                    f"The data have no channel dimension (grayscale) and the layer takes {in_channels} channels: "
                    f"convert the images where they are loaded (x.unsqueeze(1).expand(-1, {in_channels}, "
                    f"{', '.join('-1' for _ in shape[1:])}) or an RGB conversion), or build the layer with 1 input channel."
                ),
                at=frame,
            )
        if len(shape) != rank:
            return self.decline(f"{layer} received {shape_text(shape)}", diagnosis=remedy_text(expected, got), at=frame)
        channels = shape[1]
        data = data_tensor_frame(evidence, failure, shape)
        if shape[-1] == in_channels and channels != in_channels:
            return self._channels_last(layer, shape, in_channels, rank, data, frame, sources)
        earlier = channels_before(evidence, site, kind, in_channels) if site is not None else None
        if data is not None and earlier:
            # the layer already took batches of its own channel count: the channels changed
            # within the data (a grayscale image among RGB ones), the layer is not the odd one
            return self.decline(
                f"{layer} receives {shape_text(shape)} from the data, but it had already taken {earlier} "
                f"(traced): the data's channel count changed from batch to batch",
                diagnosis=f"Some samples of the data have {channels} channels and the others {in_channels}: "
                          f"{conversion_text(in_channels, channels)}, where the dataset loads each sample.",
                at=data[1],
            )
        if site is None or not site.user or not Path(site.file).is_absolute():
            return self.decline(f"{layer} was built outside the project's own code", diagnosis=remedy_text(in_channels, channels), at=frame)
        src = source(sources, site.file)
        if src is None:
            return self.decline(f"cannot read {place(site)}", diagnosis=remedy_text(in_channels, channels), at=frame)
        call = conv_call(src, site.line, in_channels, kind)
        if call is None:
            return self.decline(
                f"{layer} is not built by one nn.{kind} call at {place(site)} (a library or pretrained model)",
                diagnosis=convert_text(in_channels, channels), at=frame,
            )
        pretrained = loaded_weights(evidence, failure, site, in_channels, sources)
        if pretrained is not None and data is not None:
            return self.decline(
                f"{layer} takes {in_channels} channels and the data has {channels}, but the model's weights are "
                f"loaded ({pretrained}): resizing the layer would break them",
                diagnosis=convert_text(in_channels, channels), at=data[1],
            )
        if src.around(site.line, cst.For, cst.While, cst.ListComp, cst.GeneratorExp, cst.DictComp):
            return self.decline(
                f"{layer} is built in a loop or comprehension: one in_channels may serve layers of other sizes",
                diagnosis=f"the layer receives {channels} channels; its in_channels must be {channels}", at=site,
            )
        target = argument(call, 0, "in_channels")
        if target is None or has_star_args(call):
            return self.decline("the in_channels argument is not written out in the call", diagnosis=remedy_text(in_channels, channels), at=site)
        if not isinstance(target.value, cst.Integer):
            return self._written_in_channels(
                module, layer, site, src, call, target.value, channels, shape, data, evidence, failure, sources,
            )
        direction = self._direction(layer, site, src, call, module, channels, shape, data, evidence, failure, sources)
        if isinstance(direction, Decline):
            return direction
        old = one_line(src.module, call)
        new = one_line(src.module, replace_arg_value(call, target, cst.Integer(str(channels))))
        source_of_input = (
            f"the data as loaded ({data[0]} {shape_text(shape)} in {place(data[1])})" if data
            else f"the output of the layer before it ({shape_text(shape)})"
        )
        span = src.positions[call]
        return Site(
            pattern=self.ID,
            file=str(src.path),
            span=span,
            rewrite=SetInChannels(channels),
            summary=f"Changed {old} to {new} to match the traced input ({shape_text(shape)})",
            applicability=direction.applicability,
            evidence={
                "conv": {**module.to_json(), "site": place(site)},
                "traced_input_shape": list(shape),
                "in_channels": {"was": in_channels, "now": channels},
                "input_is_data": data is not None,
            },
            evidence_text=f"the {kind} built at {place(site)} received {source_of_input} (traced){direction.evidence}",
            notes=direction.notes,
        )


    def _written_in_channels(
        self, module: FailingModule, layer: str, site: Frame, src: Source, call: cst.Call, value: cst.BaseExpression,
        channels: int, shape: Sequence[int], data: tuple[str, Frame] | None, evidence: Evidence | None,
        failure: Failure, sources: Sources,
    ) -> Site | Decline:
        """``in_channels`` given by a name: the number is changed where its value is written
        (the argument at the constructor's call site, a config attribute or dict entry, an
        argparse default, a name bound once), found by the shared provenance analysis along
        the constructor chain the run traced."""
        code = src.code(value)
        diagnosis = f"{layer} receives {channels} channels: make `{code}` evaluate to {channels}"
        traced = layer_record(evidence, site, str(module.type), module.in_channels)
        written = written_at(sources, str(src.path), value, traced.chain if traced else ())
        if written is None:
            return self.decline(f"in_channels is `{code}`, and no one place in the source writes its value",
                                diagnosis=diagnosis, at=site)
        if data is None:
            # a later layer's in_channels must follow the layer before it, and the number
            # may size other layers too: only the channels of the data itself are followed
            return self.decline(f"in_channels is `{code}` (written as {written.code} at {written.place}) and the "
                                "layer's input is another layer's output, not the data",
                                diagnosis=diagnosis, at=site)
        if written.kind != DEFAULT and integer_value(written.node) != module.in_channels:
            return self.decline(f"in_channels is `{code}`, written as {written.code} at {written.place}, which is "
                                f"not the {module.in_channels} the layer was built with", diagnosis=diagnosis, at=site)
        direction = self._direction(layer, site, src, call, module, channels, shape, data, evidence, failure, sources)
        if isinstance(direction, Decline):
            return direction
        if written.kind == DEFAULT and direction.applicability is not self.APPLICABILITY:
            # more channels in the data than the class's default: the default is the input the
            # class was written for, and nothing proves the data is not the odd one
            return self.decline(
                f"in_channels is `{code}`, the default {written.code} of a parameter (at {written.place}) that the "
                f"call building the model leaves out, and the data has more channels ({channels}): whether the data "
                "or the default is wrong is not proven by the run",
                diagnosis=(f"{layer} takes the default {code}={written.code} written at {written.place}; the data has "
                           f"{channels} channels ({data[0]} {shape_text(shape)} in {place(data[1])})."),
                at=site,
            )
        if written.kind == DEFAULT:
            return self._pass_at_construction(
                module, layer, site, src, value, written, channels, shape, data, direction, evidence, failure, sources,
            )
        return Site(
            pattern=self.ID,
            file=written.file,
            span=written.span,
            rewrite=SetWrittenChannels(channels),
            summary=(f"Changed {written.code} to {channels} at {written.place} ({written.kind}), where the "
                     f"in_channels `{code}` of {layer} is written, to match the traced input ({shape_text(shape)})"),
            applicability=direction.applicability,
            evidence={
                "conv": {**module.to_json(), "site": place(site)},
                "traced_input_shape": list(shape),
                "in_channels": {"was": module.in_channels, "now": channels, "expr": code},
                "written_at": list(written.trail),
                "input_is_data": True,
            },
            evidence_text=(f"the {module.type} built at {place(site)} received the data as loaded ({data[0]} "
                           f"{shape_text(shape)} in {place(data[1])}); `{code}` = {module.in_channels} is written at "
                           f"{written.place} (traced){direction.evidence}"),
            notes=direction.notes,
        )

    def _direction(
        self, layer: str, site: Frame, src: Source, call: cst.Call, module: FailingModule, channels: int,
        shape: Sequence[int], data: tuple[str, Frame] | None, evidence: Evidence | None, failure: Failure,
        sources: Sources,
    ) -> Direction | Decline:
        """Whether the traced facts say the layer, not the data, is the one to change.

        Data with fewer channels than the layer (grayscale into an RGB layer) has no channels
        to make up, and a layer that takes another layer's output must follow it: the layer is
        changed (safe). Data with more channels than the layer (colour images into a layer
        written for one channel) may be what the layer was written for only once converted:
        declined when the project's code says so (a conversion to grayscale or a one-channel
        normalisation in its files, the layer a single-channel filter of 1 in and 1 out, a
        weight set by hand), else changed as unsafe.
        """
        in_channels = module.in_channels
        assert isinstance(in_channels, int)  # checked by locate
        if data is None or channels <= in_channels:
            return Direction(self.APPLICABILITY)
        values = (
            f"{layer} takes {in_channels} input channel{'s' if in_channels != 1 else ''} and the data has {channels} "
            f"({data[0]} {shape_text(shape)} in {place(data[1])})"
        )
        if in_channels == 1 and module.out_channels == 1:
            return self.decline(
                f"{values}: a single-channel filter (1 channel in, 1 out); in_channels={channels} would sum the "
                f"{channels} channels into one, another operation than the filter's",
                diagnosis=f"{values}; the run does not tell whether the filter must run on each channel, on "
                          "grayscale data, or over all channels together.",
                at=site,
            )
        kernel = weight_set_by_hand(src, call)
        if kernel is not None:
            return self.decline(
                f"{values}; its weight is set by hand ({kernel}): a kernel of {in_channels} channel"
                f"{'s' if in_channels != 1 else ''} that a resized layer would not fit",
                diagnosis=f"{values}; the kernel set at {kernel} is written for {in_channels}.", at=site,
            )
        files = {*getattr(evidence, "imported_files", ()), *(f.file for f in failure.frames if f.user)}
        said = one_channel_data(sources, sorted(files)) if in_channels == 1 else None
        if said is not None:
            return self.decline(
                f"{values}; the project's code says the images have 1 channel ({said}), but these batches did not "
                "go through it: which of the two is wrong is not proven by the run",
                diagnosis=f"{values}; {said} makes or expects 1-channel images.", at=data[1],
            )
        return Direction(
            Applicability.UNSAFE,
            notes=(
                f"Unsafe: the data has more channels ({channels}) than the layer was written for ({in_channels}) and "
                f"nothing in the project's code makes it {in_channels}-channel; if the data was meant to have "
                f"{in_channels}, {conversion_text(in_channels, channels)} where it is loaded and keep the layer.",
            ),
            evidence=f"; nothing in the project's code converts the data to {in_channels} channel"
                     f"{'s' if in_channels != 1 else ''} or normalises {in_channels}",
        )

    def _pass_at_construction(
        self, module: FailingModule, layer: str, site: Frame, src: Source, value: cst.BaseExpression,
        written: Written, channels: int, shape: Sequence[int], data: tuple[str, Frame] | None,
        direction: Direction, evidence: Evidence | None, failure: Failure, sources: Sources,
    ) -> Site | Decline:
        """``in_channels`` is a parameter's default (``def __init__(self, channels=3)``) that the
        one construction the run saw leaves out (``net = SmallCNN()``): ``channels=1`` is passed
        there. Declined (with that remedy) when the run built the class more than once, the
        construction is not in a project file the run executed, or the parameter sizes
        anything else in the class (it must then keep its value for that)."""
        code = src.code(value)
        remedy = f"{layer} receives {channels} channels: pass {code}={channels} where the model is built"
        found = defaulted_parameter(sources, written)
        if found is None:
            return self.decline(
                f"in_channels is `{code}`, the default {written.code} (at {written.place}) of a parameter that is "
                "not an __init__'s keyword parameter of a class", diagnosis=remedy, at=site,
            )
        owner, cls, init, param = found
        remedy = f"{layer} receives {channels} channels: pass {param}={channels} where {cls.name.value} is built"
        default = f"in_channels is `{code}`, the default {param}={written.code} of {cls.name.value} (at {written.place})"
        traced = layer_record(evidence, site, str(module.type), module.in_channels)
        chain = traced.chain if traced is not None else ()
        reads = [r for r in name_reads(init.body, param) if r is not value]
        # the one read that passes it on toward the conv (a traced call-site argument) is its use
        passed = [r for r in reads if any(reads_at(owner, r, step.where) for step in chain)]
        other = [r for r in reads if r not in passed[:1]]
        if other:
            first = other[0]
            also = f"{owner.code(statement_text_node(owner, first))} at {report_path(owner.path)}:{owner.line(first)}"
            return self.decline(
                f"{default}, which also sizes {also}: the default may have to keep its value there",
                diagnosis=(f"{layer} receives {channels} channels; its in_channels is the default {param}={written.code} "
                           f"of {cls.name.value} at {written.place}, which also sizes {also}."),
                at=site,
            )
        built = constructions(evidence, site, str(module.type), module.in_channels)
        if built != 1:
            return self.decline(f"{default}; the run built the layer {built} times: one default serves several models",
                                diagnosis=remedy, at=site)
        sites = instance_sites(evidence, failure, cls.name.value)
        if len(sites) != 1:
            return self.decline(
                f"{default}; the run saw {len(sites) or 'no'} construction site{'s' if len(sites) != 1 else ''} of "
                f"{cls.name.value}", diagnosis=remedy, at=site,
            )
        (where,) = sites
        executed = {Path(f).resolve() for f in (*getattr(evidence, "imported_files", ()), *(f.file for f in failure.frames))}
        caller = source(sources, where.file)
        if caller is None or caller.path.resolve() not in executed:
            return self.decline(f"{default}; {cls.name.value} is built at {place(where)}, a file the run did not execute",
                                diagnosis=remedy, at=site)
        construction = construction_call(caller, where.line, cls.name.value)
        if construction is None:
            return self.decline(f"{default}; no one call of {cls.name.value} at {place(where)} builds it",
                                diagnosis=remedy, at=where)
        if has_star_args(construction) or any(a.keyword is not None and a.keyword.value == param for a in construction.args):
            return self.decline(f"{default}; the call {caller.code(construction)} at {place(where)} may pass it already",
                                diagnosis=remedy, at=where)
        old = one_line(caller.module, construction)
        new = one_line(caller.module, append_keyword(construction, param, cst.Integer(str(channels))))
        return Site(
            pattern=self.ID,
            file=str(caller.path),
            span=caller.positions[construction],
            rewrite=PassChannelsAtConstruction(param, channels),
            summary=(f"Changed {old} to {new} at {place(where)}, the one construction of {cls.name.value}, whose default "
                     f"{param}={written.code} is the in_channels of {layer}, to match the traced input ({shape_text(shape)})"),
            applicability=direction.applicability,
            evidence={
                "conv": {**module.to_json(), "site": place(site)},
                "traced_input_shape": list(shape),
                "in_channels": {"was": module.in_channels, "now": channels, "expr": code},
                "default": {"param": param, "at": written.place, "class": cls.name.value},
                "built_at": place(where),
                "input_is_data": True,
            },
            evidence_text=(f"the {module.type} built at {place(site)} received the data as loaded"
                           f"{f' ({data[0]} {shape_text(shape)} in {place(data[1])})' if data else ''}; `{code}` is "
                           f"the default {param}={written.code} at {written.place}, left out by the one construction "
                           f"of {cls.name.value} the run saw, at {place(where)} (traced){direction.evidence}"),
            notes=direction.notes,
        )

    def _channels_last(
        self, layer: str, shape: Sequence[int], in_channels: int, rank: int,
        data: tuple[str, Frame] | None, frame: Frame | None, sources: Sources,
    ) -> Site | Decline:
        """A channels-last batch: ``.permute`` where the batch is made, when an assignment makes it."""
        order = (0, 3, 1, 2) if rank == 4 else (0, 2, 1) if rank == 3 else (0, 4, 1, 2, 3)
        permute = f".permute({', '.join(map(str, order))})"
        reason = (f"{layer} received {shape_text(shape)}: channels last (the last dimension is {in_channels}, "
                  "the layer's in_channels); convolutions take channels first")
        made = f" where the batch is made ({data[0]} in {place(data[1])})" if data else ""
        diagnosis = (f"Move the channels first with {permute}{made}, e.g. x = x{permute}; or convert the "
                     "images to [C, H, W] in the dataset (transforms.ToTensor does).")
        if data is None:
            return self.decline(reason, diagnosis=diagnosis, at=frame)
        name, data_frame = data
        src = source(sources, data_frame.file)
        binding = last_binding(src, name, data_frame.line + 1) if src else None
        statement = binding.statement if binding else None
        if src is None or not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or not (
            isinstance(statement.targets[0].target, cst.Name)
        ):
            return self.decline(f"{reason}; {name} is not made by a plain assignment the fix could extend "
                                "(a loop over a DataLoader: the dataset makes it)", diagnosis=diagnosis, at=data_frame)
        value = statement.value
        if isinstance(value, cst.Call) and called_name(value) in ("permute", "movedim", "transpose"):
            return self.decline(f"{reason}; {name} is already reordered where it is made", diagnosis=diagnosis,
                                at=data_frame)
        old = src.code(value)
        return Site(
            pattern=self.ID,
            file=str(src.path),
            span=src.positions[value],
            rewrite=PermuteChannelsFirst(tuple(order)),
            summary=f"Moved the channels of {name} first where the batch is made: {old}{permute} "
                    f"({shape_text(shape)} -> {shape_text([shape[i] for i in order])})",
            applicability=Applicability.UNSAFE,
            evidence={"traced_input_shape": list(shape), "in_channels": in_channels, "batch": name,
                      "made_at": place(Frame(file=str(src.path), line=src.line(statement)))},
            evidence_text=(f"{layer} received {name} {shape_text(shape)} (traced): the last dimension is its "
                           f"in_channels {in_channels}, dimension 1 is {shape[1]}"),
            notes=(f"{name} is channels first from here on: code after the model call that reads it as "
                   "channels last (plotting, saving images) must permute it back.",),
        )
