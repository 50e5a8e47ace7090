"""linear-in-features: an ``nn.Linear`` built for another input size than it receives.

This module holds the pattern and its wiring; ``flattens.py`` reads the flattens and views
before the layer, ``candidates.py`` chooses among the candidate edits (or refuses, naming the
values), and ``rewrites.py`` holds the fixes.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    ImportTable,
    argument,
    call_at,
    frame_at,
    has_star_args,
    is_torch_name,
    one_line,
    place_in,
    shape_text,
    source,
)
from repairbot.codemod import replace_arg_value
from repairbot.edits import Site
from repairbot.evidence import Evidence, LinearTrace
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, ForwardStep

from .candidates import Refusal, candidate_edits, candidate_key, distinct_constructions, same_site
from .flattens import (
    batch_keeping_flatten,
    batch_sizes,
    discarded_flatten,
    folding_size,
    folding_view,
    in_features_code,
)
from .rewrites import AssignFlatten, ReplaceSize, SetInFeatures

_SHAPES = r"\((?P<rows>\d+)x(?P<cols>\d+) and (?P<in_features>\d+)x(?P<out_features>\d+)\)"


class LinearInFeatures(Pattern):
    """Sets an ``nn.Linear``'s ``in_features`` to the input size the layer really receives.

    What it fixes:
        A fully connected layer declared for one input size and fed another, typically the
        first Linear after a flatten whose size was computed by hand for another image size
        or channel count. A Linear that receives a conv/pool output of more than two dimensions
        has a broken flatten, not a wrong ``in_features``: a flatten whose result is thrown
        away (``x.flatten(1)`` alone on its line) is assigned (``x = x.flatten(1)``); a
        ``view(-1, N)`` that folds the batch into rows (``x.view(-1, 28 * 28)`` on colour
        images) takes the layer's size when one sample holds exactly its ``in_features``
        (``x.view(-1, 3 * 28 * 28)``), and is diagnosed otherwise; a missing flatten is
        diagnosed; so is a sample given without its batch dimension (a conv takes ``[C, H, W]``
        unbatched, and ``x.view(x.size(0), -1)`` then makes its channels the rows). Resizing
        such a layer to the last dimension would make the rerun pass with a wrong model.

        A size that a constructor's parameter gives (``nn.Linear(2 * input_size, h)`` in a
        reusable ``Encoder``) is changed where the class is built: the argument
        (``Encoder(input_size=8)``) solved so that the expression gives the traced size, when
        the run saw that one construction; with several constructions of different arguments
        it is diagnosed, never a number in the definition. A size read from a configuration
        object (``config.n_embd``, a dataclass field, an argparse namespace passed down)
        becomes the expression of the configuration's sizes that the traced values prove
        (``config.block_size * config.n_embd``), else it is diagnosed.

    Why it fails:
        ``RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x512 and 256x10)``: the input
        (mat1, 2 rows of 512 features) does not fit the weight (mat2, the transposed
        ``256 x 10`` weight of ``nn.Linear(256, 10)``). Older releases say ``size mismatch, m1:
        [2 x 512], m2: [256 x 10]``. The traceback points at ``self.fc(x)`` in ``forward``; the
        fix belongs where the layer was built. The tracing run records where every
        ``nn.Linear`` was constructed and the input shape it saw, which ties the two together,
        through ``nn.Sequential``, other modules of the project and layers built in loops.

    Example:
        ``self.fc = nn.Linear(64 * 7 * 7, 10)`` fed ``2x3136``... but on 32x32 images the
        flatten gives ``2x4096``: the fix is ``nn.Linear(64 * 8 * 8, 10)``. A product of
        numbers keeps its shape (the spatial pair, else one factor, changes); anything else
        becomes the traced number.

    Fix safety:
        Safe. Only the ``in_features`` argument changes (or the one number that gives it: a
        construction's argument, a view's size), to the size the layer actually received, and
        the rerun verifies that the script now runs. Unsafe where that number also sizes other
        layers (a constructor parameter they share), where several names in scope have the
        traced value, and for a factor or a literal that no name gives. A checkpoint saved
        from the old layout would no longer load, but no such checkpoint can come from this code.

    Not handled:
        ``in_features`` given by an expression with names that no traced value proves (the
        value may be shared with other layers; the report says which size it must evaluate
        to); a parameter's default that the construction leaves out; a layer
        built in a loop whose instances see different input sizes; a matrix product that is
        not an ``nn.Linear`` (``torch.mm``, ``@``, ``F.linear`` with a hand-made weight); a
        Linear built inside a library.
    """

    ID = "linear-in-features"
    TITLE = "nn.Linear in_features does not match the input it receives"
    TAGS = frozenset({"shape"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature("RuntimeError", r"mat1 and mat2 shapes cannot be multiplied " + _SHAPES),
        signature("RuntimeError", r"linear\(\): input and weight\.T shapes cannot be multiplied " + _SHAPES),
        signature(
            "RuntimeError",
            r"size mismatch, m1: \[(?P<rows>\d+) x (?P<cols>\d+)\], m2: \[(?P<in_features>\d+) x (?P<out_features>\d+)\]",
        ),
        signature(
            "RuntimeError",
            r"a and b must have same reduction dim, but got \[(?P<rows>\d+), (?P<cols>\d+)\] X \[(?P<in_features>\d+), (?P<out_features>\d+)\]",
        ),
        signature("RuntimeError", r"^size mismatch at \S*THC"),
    )
    EVIDENCE = frozenset({"linears"})
    REWRITES = (SetInFeatures, ReplaceSize, AssignFlatten)

    def needs_confirmation(self, failure: Failure, evidence: Evidence | None) -> bool:
        # When the layer's input still has the forced batch size in front, the batch flowed
        # through unchanged and the feature size cannot depend on it; otherwise (a hard-coded
        # `x.view(64, -1)`, say) the size might be an artefact of the smaller batch.
        linear = evidence.linear if evidence else None
        if linear is None or not linear.input_shape or len(linear.input_shape) < 2:
            return True
        return linear.input_shape[0] != evidence.limits.batch_size if evidence else True

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        linear = evidence.linear if evidence else None
        if linear is None:
            return self.decline(
                "the failing matrix product is not the forward of an nn.Linear (a torch.mm, an @ "
                "or F.linear on a hand-made weight), so there is no in_features to set"
            )
        groups = match.groupdict()
        if groups.get("in_features") and int(groups["in_features"]) != linear.in_features:
            return self.decline("the weight in the message is not the traced Linear's")
        needed = linear.input_shape[-1] if linear.input_shape else None
        if needed is None and groups.get("cols"):
            needed = int(groups["cols"])
        if needed is None or needed == linear.in_features:
            return self.decline("the traced input size does not tell which in_features would fit")
        site = linear.site
        if site is None or not site.user:
            return self.decline("this nn.Linear was built outside the project's own code")

        # A Linear fed a conv/pool output, or a batch folded into rows, has a broken flatten,
        # not a wrong in_features: resizing it to the last dimension would make the rerun pass
        # with a model that computes something else.
        flatten = self._broken_flatten(failure, linear, evidence, sources)
        if flatten is not None:
            return flatten

        siblings = [lt for lt in same_site(evidence, linear) if lt.input_shape and lt.input_shape[-1] != needed]
        if siblings:
            sizes = sorted({lt.input_shape[-1] for lt in siblings if lt.input_shape} | {needed})
            return self.decline(
                f"the nn.Linear call at {place_in(Path(site.file), site.line)} builds several layers that "
                f"receive different input sizes ({', '.join(map(str, sizes))}); one number cannot fit them all",
                at=site,
            )

        path = Path(site.file)
        wrapper = sources.metadata(path)
        located = call_at(wrapper, site.line, site.col, site.end_line, site.end_col)
        if located is None or not isinstance(located.node, cst.Call):
            return self.decline(f"cannot find the call that built the layer at {place_in(path, site.line)}")
        call = located.node
        module = wrapper.module
        if not is_torch_name(ImportTable(module).qualify(call.func), "torch.nn.Linear"):
            return self.decline(
                f"the layer is built by `{module.code_for_node(call.func)}(...)`, not by nn.Linear itself",
                diagnosis=f"the layer receives {needed} features; its in_features must be {needed}",
                at=site,
            )
        target = argument(call, 0, "in_features")
        if target is None or has_star_args(call):
            return self.decline("the in_features argument is not written out in the call")
        layer_site = evidence.layer_site(linear) if evidence else None
        constructions = distinct_constructions(evidence, linear)
        candidates = candidate_edits(module, call, target.value, linear, layer_site, needed, path, sources, constructions)
        if isinstance(candidates, str):
            return self.decline(candidates, at=site)
        if isinstance(candidates, Refusal):
            return self.decline(candidates.reason, diagnosis=candidates.diagnosis, at=site)
        if not candidates:
            code = module.code_for_node(target.value)
            return self.decline(
                f"in_features is `{code}`, and no edit of it evaluates to {needed}",
                diagnosis=f"the layer receives {needed} features: make `{code}` evaluate to {needed}",
                at=site,
            )
        shape = "x".join(map(str, linear.input_shape or (needed,)))
        traced = [
            ForwardStep(
                f"{lt.type}({lt.in_features}, {lt.out_features})", place_in(Path(lt.site.file), lt.site.line),
                "x".join(map(str, lt.input_shape)) if lt.input_shape else "?",
            )
            for lt in (evidence.linears if evidence else ())
            if lt.site is not None and (lt.calls or lt is linear)
        ]
        in_code = candidate_key(module.code_for_node(target.value))
        values = {k: v for k, v in (layer_site.values.items() if layer_site else ()) if candidate_key(k) in in_code}
        values_text = ", ".join(f"{k} = {v}" for k, v in values.items())
        sites = []
        for candidate in candidates:
            old_text = one_line(module, call)
            if candidate.file == str(path) and candidate.kind == "in_features literal":
                new_text = one_line(module, replace_arg_value(call, target, cst.parse_expression(candidate.code)))
                summary = f"Changed {old_text} to {new_text} to match the traced input ({shape})"
            else:
                summary = (
                    f"Changed `{candidate.old}` to `{candidate.code}` at {report_path(Path(candidate.file))}:"
                    f"{candidate.span.line} ({candidate.kind}) so that {old_text} gets in_features={needed}, "
                    f"the traced input ({shape})"
                )
            sites.append(Site(
                pattern=self.ID,
                file=candidate.file,
                span=candidate.span,
                rewrite=candidate.rewrite,
                summary=summary,
                applicability=candidate.applicability,
                evidence={
                    "linear": {**linear.to_json(), "site": f"{place_in(path, site.line)}"},
                    "traced_input_shape": list(linear.input_shape or ()),
                    "in_features": {"was": linear.in_features, "now": needed},
                    "forward_pass": traced,
                    "candidate": candidate.kind,
                    **({"traced_values": values, "traced_at": f"{place_in(path, site.line)}"} if values else {}),
                    **({"written_at": list(candidate.trail)} if candidate.trail else {}),
                },
                evidence_text=(
                    f"the Linear built at {place_in(path, site.line)} received input {shape} (traced); "
                    + (f"{values_text}, traced at {place_in(path, site.line)}; " if values_text else "")
                    + f"Linear layers along the forward pass: {'; '.join(traced)}"
                ),
                notes=candidate.notes,
            ))
        return replace(sites[0], alternatives=tuple(sites[1:]))

    def _broken_flatten(
        self, failure: Failure, linear: LinearTrace, evidence: Evidence | None, sources: Sources
    ) -> Site | Decline | None:
        """The fix or diagnosis of a flatten that is missing, thrown away or folds the batch;
        None when the layer's input is a plain ``[batch, features]`` (or a sequence) one."""
        shape = linear.input_shape
        if not shape or linear.site is None:
            return None
        frame = failure.user_frame
        src = source(sources, frame.file) if frame is not None else None
        per_sample = math.prod(shape[1:])
        where = f"{place_in(Path(linear.site.file), linear.site.line)}"
        layer = f"{linear.type}({linear.in_features}, {linear.out_features}) built at {where}"
        evidence_of = {
            "linear": {**linear.to_json(), "site": where},
            "traced_input_shape": list(shape),
        }
        if len(shape) >= 3:
            discarded = discarded_flatten(src, frame.line) if src is not None and frame is not None else None
            if discarded is not None:
                statement, name = discarded
                assert src is not None
                return Site(
                    pattern=self.ID,
                    file=str(src.path),
                    span=src.positions[statement],
                    rewrite=AssignFlatten(name),
                    summary=f"Assigned the flatten `{src.code(statement)}` (its result was thrown away) "
                    f"so that the {layer} receives [batch, features]",
                    applicability=self.APPLICABILITY,
                    evidence={**evidence_of, "flatten": f"{place_in(src.path, src.line(statement))}"},
                    evidence_text=(
                        f"the {layer} received the {len(shape)}-D tensor {shape_text(shape)} (traced): "
                        f"`{src.code(statement)}` at {place_in(src.path, src.line(statement))} computes the "
                        f"flattened tensor and discards it, so `{name}` is still the feature map"
                    ),
                )
            if len(shape) >= 4 or per_sample == linear.in_features:
                matches = (
                    f"; its in_features {linear.in_features} already is the flattened size of one sample"
                    if per_sample == linear.in_features else
                    f"; one sample flattens to {per_sample} features"
                )
                return self.decline(
                    f"the {layer} receives the {len(shape)}-D tensor {shape_text(shape)}: the flatten "
                    f"before it is missing, not in_features wrong (resizing it to the last "
                    f"dimension, {shape[-1]}, would change what the model computes){matches}",
                    diagnosis=(
                        "Flatten the feature map before the layer: `x = x.flatten(1)` in forward, or "
                        "`nn.Flatten()` before the Linear in an nn.Sequential"
                        + ("" if per_sample == linear.in_features else f"; then its in_features must be {per_sample}")
                        + "."
                    ),
                    at=frame,
                )
            return None
        rows = shape[0]
        batches = batch_sizes(failure, evidence)
        if not batches or rows in batches:
            return None
        fold = folding_view(src, frame.line, shape[-1]) if src is not None and frame is not None else None
        if fold is None:
            fitted = folding_view(src, frame.line, linear.in_features) if src is not None and frame is not None else None
            if fitted is not None and src is not None and rows * shape[-1] == min(batches) * linear.in_features:
                return self.decline(
                    f"`{src.code(fitted)}` at {place_in(src.path, src.line(fitted))} already gives the "
                    f"{layer} its in_features (the traced shapes are older than the code)"
                )
            kept = batch_keeping_flatten(src, frame.line) if src is not None and frame is not None else None
            if kept is None:
                return None
            assert src is not None
            # The flatten keeps dimension 0 as the batch, yet it is none of the run's batch sizes:
            # the model was given one sample without its batch dimension (a conv takes [C, H, W]
            # as unbatched), so dimension 0 is the channels. Resizing in_features would fit the
            # layer to one sample's channels and pass its rerun.
            return self.decline(
                f"the {layer} receives {shape_text(shape)}, and `{src.code(kept)}` at "
                f"{place_in(src.path, src.line(kept))} keeps dimension 0 as the batch, but the run's batches are "
                f"{', '.join(map(str, sorted(batches)))}: the model was given a sample without its batch dimension "
                f"(its {rows} rows are not samples); setting in_features to {shape[-1]} would change what the model computes",
                diagnosis=(
                    "Give the sample its batch dimension where the model is called: `model(x.unsqueeze(0))` "
                    "(or build the input as a batch of one)."
                ),
                at=frame_at(str(src.path), src.line(kept)),
            )
        assert src is not None
        batch = min(batches)
        size = folding_size(fold)
        if rows * shape[-1] == batch * linear.in_features and size is not None and src.positions.get(size):
            # One sample holds exactly the in_features the layer was built for: the view's
            # number is the one value the traced shapes contradict, so it takes the layer's.
            code = in_features_code(sources, linear) or str(linear.in_features)
            return Site(
                pattern=self.ID,
                file=str(src.path),
                span=src.positions[size],
                rewrite=ReplaceSize(code),
                summary=(
                    f"Changed `{src.code(size)}` to `{code}` in `{src.code(fold)}` so that it keeps the batch: "
                    f"one sample has {linear.in_features} features, the in_features of the {layer}"
                ),
                applicability=self.APPLICABILITY,
                evidence={**evidence_of, "flatten": f"{place_in(src.path, src.line(fold))}", "batch_sizes": sorted(batches)},
                evidence_text=(
                    f"the {layer} received {shape_text(shape)} (traced) for a batch of {batch}: `{src.code(fold)}` "
                    f"at {place_in(src.path, src.line(fold))} made {rows // batch if rows % batch == 0 else rows} rows "
                    f"of each sample, whose {rows * shape[-1] // batch} features are the layer's in_features"
                ),
            )
        return self.decline(
            f"the {layer} receives {shape_text(shape)} for a batch of {batch}: `{src.code(fold)}` at "
            f"{place_in(src.path, src.line(fold))} folds the batch into rows; setting in_features to "
            f"{shape[-1]} would only move the failure to the loss",
            diagnosis=(
                f"Keep the batch dimension at {place_in(src.path, src.line(fold))}: `.flatten(1)` or "
                f"`.view(x.size(0), -1)` instead of a hard-coded size; one sample has "
                f"{rows * shape[-1] // batch if rows * shape[-1] % batch == 0 else '?'} features, "
                f"which the {linear.type}'s in_features ({linear.in_features}) must match "
                "(see batch-size-mismatch)."
            ),
            at=frame_at(str(src.path), src.line(fold)),
        )
