"""linear-in-features: an ``nn.Linear`` built for another input size than it receives."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    ImportTable,
    Source,
    argument,
    call_at,
    frame_at,
    has_star_args,
    is_torch_name,
    local_tensors,
    one_line,
    place_in,
    reads,
    shape_of,
    shape_text,
    source,
    walk,
)
from repairbot.codemod import replace_arg_value
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, LayerSite, LinearTrace, PassedArgument
from repairbot.pattern import Pattern, signature
from repairbot.provenance import (
    DEFAULT,
    LITERAL,
    integer_value,
    is_literal,
    parameter_names,
    self_attribute_value,
    written_at,
)
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, ForwardStep, Span

_SHAPES = r"\((?P<rows>\d+)x(?P<cols>\d+) and (?P<in_features>\d+)x(?P<out_features>\d+)\)"


@dataclass(frozen=True)
class SetInFeatures(Rewrite):
    """Replaces the value of the Linear call's ``in_features`` argument, nothing else."""

    in_features: str  # the new value, as code

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        target = argument(call, 0, "in_features")
        if target is None:
            raise EditError("no in_features argument")
        return [Edit(target.value, cst.parse_expression(self.in_features))]


@dataclass(frozen=True)
class ReplaceSize(Rewrite):
    """Replaces the size expression at the site (where the number is written, a name in scope...)."""

    code: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        return [Edit(nodes.node(cst.BaseExpression), cst.parse_expression(self.code))]


@dataclass(frozen=True)
class AssignFlatten(Rewrite):
    """Assigns a flatten whose result was thrown away: ``x.view(x.size(0), -1)`` -> ``x = ...``."""

    name: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.Expr)
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(self.name))], value=statement.value, semicolon=statement.semicolon)
        return [Edit(statement, assign)]


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

        siblings = [lt for lt in _same_site(evidence, linear) if lt.input_shape and lt.input_shape[-1] != needed]
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
        constructions = _constructions(evidence, linear)
        candidates = _candidates(module, call, target.value, linear, layer_site, needed, path, sources, constructions)
        if isinstance(candidates, str):
            return self.decline(candidates, at=site)
        if isinstance(candidates, _Refusal):
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
        in_code = _key(module.code_for_node(target.value))
        values = {k: v for k, v in (layer_site.values.items() if layer_site else ()) if _key(k) in in_code}
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
            discarded = _discarded_flatten(src, frame.line) if src is not None and frame is not None else None
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
        batches = _batch_sizes(failure, evidence)
        if not batches or rows in batches:
            return None
        fold = _folding_view(src, frame.line, shape[-1]) if src is not None and frame is not None else None
        if fold is None:
            fitted = _folding_view(src, frame.line, linear.in_features) if src is not None and frame is not None else None
            if fitted is not None and src is not None and rows * shape[-1] == min(batches) * linear.in_features:
                return self.decline(
                    f"`{src.code(fitted)}` at {place_in(src.path, src.line(fitted))} already gives the "
                    f"{layer} its in_features (the traced shapes are older than the code)"
                )
            kept = _batch_keeping_flatten(src, frame.line) if src is not None and frame is not None else None
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
        size = _folding_size(fold)
        if rows * shape[-1] == batch * linear.in_features and size is not None and src.positions.get(size):
            # One sample holds exactly the in_features the layer was built for: the view's
            # number is the one value the traced shapes contradict, so it takes the layer's.
            code = _in_features_code(sources, linear) or str(linear.in_features)
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


_FLATTENS = ("flatten", "view", "reshape")


def _flatten_of(src: Source, node: cst.BaseExpression) -> str | None:
    """``x`` of ``x.flatten(1)``, ``x.view(x.size(0), -1)``, ``x.reshape(...)``, ``torch.flatten(x, 1)``."""
    if not isinstance(node, cst.Call):
        return None
    if src.is_call_of(node, "torch.flatten"):
        first = node.args[0].value if node.args else None
        return first.value if isinstance(first, cst.Name) else None
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _FLATTENS and isinstance(func.value, cst.Name):
        return func.value.value
    return None


def _discarded_flatten(src: Source, line: int) -> tuple[cst.Expr, str] | None:
    """A statement before ``line`` in its function that flattens a name and throws the result
    away (``x.flatten(1)`` alone on its line), the name unbound again before ``line``, which reads it."""
    statements = src.statements_of(line)
    found: tuple[cst.Expr, str] | None = None
    for statement in statements:
        span = src.positions.get(statement)
        if span is None or span.line >= line:
            if span is not None and span.line <= line <= span.end_line and found is not None:
                return found if found[1] in reads(statement) else None
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            if found is not None and found[1] in _bound_names(statement):
                found = None
            continue
        for small in statement.body:
            if isinstance(small, cst.Expr) and (name := _flatten_of(src, small.value)) is not None:
                found = (small, name)
            elif found is not None and found[1] in _bound_names(small):
                found = None
    return None


def _bound_names(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    for child in walk(node):
        if isinstance(child, cst.AssignTarget | cst.AugAssign | cst.AnnAssign):
            target = child.target
            if isinstance(target, cst.Name):
                names.add(target.value)
        elif isinstance(child, cst.For) and isinstance(child.target, cst.Name):
            names.add(child.target.value)
    return names


def _folding_view(src: Source, line: int, columns: int) -> cst.Call | None:
    """A ``t.view(-1, N)`` / ``t.reshape(-1, N)`` before ``line`` in its function, with N a
    number (or product of numbers) equal to ``columns``: the flatten that decided the rows."""
    for node, span in src.positions.items():
        if not isinstance(node, cst.Call) or span.line > line or not isinstance(node.func, cst.Attribute):
            continue
        if node.func.attr.value not in ("view", "reshape") or src.statements_of(span.line) != src.statements_of(line):
            continue
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if len(args) != 2 or integer_value(args[0]) != -1:
            continue
        if integer_value(args[1]) == columns:
            return node
    return None


def _folding_size(view: cst.Call) -> cst.BaseExpression | None:
    """The size written in a ``t.view(-1, N)``: N, when it is a number or product of numbers."""
    args = [a.value for a in view.args if a.keyword is None and not a.star]
    return args[1] if len(args) == 2 and is_literal(args[1]) else None


def _in_features_code(sources: Sources, linear: LinearTrace) -> str | None:
    """The Linear's in_features as its call writes it, when that is a number or product of numbers."""
    site = linear.site
    if site is None:
        return None
    wrapper = sources.metadata(Path(site.file))
    located = call_at(wrapper, site.line, site.col, site.end_line, site.end_col)
    if located is None or not isinstance(located.node, cst.Call):
        return None
    target = argument(located.node, 0, "in_features")
    if target is None or not is_literal(target.value) or integer_value(target.value) != linear.in_features:
        return None
    return wrapper.module.code_for_node(target.value)


def _batch_keeping_flatten(src: Source, line: int) -> cst.Call | None:
    """A flatten before ``line`` in its function that keeps dimension 0 as the batch:
    ``t.flatten(1)``, ``torch.flatten(t, 1)``, ``t.view(t.size(0), -1)``, ``t.reshape(t.shape[0], -1)``
    (or ``len(t)``)."""
    for node, span in src.positions.items():
        if not isinstance(node, cst.Call) or span.line > line or src.statements_of(span.line) != src.statements_of(line):
            continue
        args = [a.value for a in node.args if a.keyword is None and not a.star]
        if src.is_call_of(node, "torch.flatten"):
            if len(args) == 2 and integer_value(args[1]) == 1:
                return node
            continue
        if not isinstance(node.func, cst.Attribute):
            continue
        method = node.func.attr.value
        if method == "flatten" and len(args) == 1 and integer_value(args[0]) == 1:
            return node
        if method in ("view", "reshape") and len(args) == 2 and integer_value(args[1]) == -1 and _first_dim_of(args[0]):
            return node
    return None


def _first_dim_of(node: cst.BaseExpression) -> bool:
    """``t.size(0)``, ``t.shape[0]`` or ``len(t)``: a tensor's dimension 0."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size":
        return len(node.args) == 1 and integer_value(node.args[0].value) == 0
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len":
        return len(node.args) == 1
    if (
        isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape"
        and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
    ):
        return integer_value(node.slice[0].slice.value) == 0
    return False


def _batch_sizes(failure: Failure, evidence: Evidence | None) -> set[int]:
    """The batch sizes the run showed: the forced one, and the first dimension of the batched
    tensors (2-D or more) in the user frames that called the model (not the innermost one)."""
    sizes: set[int] = set()
    if evidence is None:
        return sizes
    if evidence.limits.forced:
        size = evidence.limits.batch_size
        if size is not None and size > 0:
            sizes.add(size)
    user = [frame for frame in failure.frames if frame.user]
    for frame in user[:-1]:
        for tensor in local_tensors(evidence, frame).values():
            shape = shape_of(tensor)
            if shape and len(shape) >= 2 and shape[0] > 0:
                sizes.add(shape[0])
    return sizes


@dataclass(frozen=True)
class _Candidate:
    """One edit that makes in_features evaluate to the needed size."""

    kind: str
    file: str
    span: Span
    old: str
    code: str
    applicability: Applicability
    rewrite: Rewrite
    trail: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Refusal:
    """No edit is proven: why, and the values the report names instead."""

    reason: str
    diagnosis: str
    final: bool = True  # False: other edits of the expression's own names may still be proven


def _constructions(evidence: Evidence | None, linear: LinearTrace) -> list[tuple[PassedArgument, ...]]:
    """The distinct constructions that built the Linears of this call site, by the traced
    arguments of their constructors' call sites (one per place and value: a loop that builds
    the same layer several times from one call counts once)."""
    found: list[tuple[PassedArgument, ...]] = []
    for lt in (linear, *_same_site(evidence, linear)):
        layer = evidence.layer_site(lt) if evidence else None
        chain = layer.chain if layer is not None else ()
        key = [(s.param, s.where.file, s.where.line, s.where.col, repr(s.value)) for s in chain]
        if all([(s.param, s.where.file, s.where.line, s.where.col, repr(s.value)) for s in c] != key for c in found):
            found.append(chain)
    return found


def _construction_argument(
    sources: Sources, src: Source, path: Path, node: cst.BaseExpression, linear: LinearTrace,
    layer: LayerSite | None, known: dict[str, int], needed: int, constructions: list[tuple[PassedArgument, ...]],
) -> _Candidate | _Refusal | None:
    """in_features written as an expression of one ``__init__`` parameter that the run traced to
    the constructor's call site (``nn.Linear(2 * input_size, h)`` <- ``Encoder(input_size=6)``):
    the argument where it is written, solved so that the expression gives ``needed``. The
    definition is reusable and right as far as the run shows; the construction is what the
    traced input contradicts. None when the expression reads no traced parameter; a refusal
    when it does but one argument of the only construction does not prove the edit."""
    if layer is None or node not in src.positions:
        return None
    functions = src.around(src.positions[node].line, cst.FunctionDef)
    function = functions[0] if functions and isinstance(functions[0], cst.FunctionDef) else None
    if function is None:
        return None
    passed = {s.param: s for s in layer.chain if s.where.file}
    attrs = {id(n.attr) for n in walk(node) if isinstance(n, cst.Attribute)}
    params = [
        n for n in walk(node)
        if isinstance(n, cst.Name) and id(n) not in attrs and n.value in passed and n.value in parameter_names(function)
    ]
    if not params:
        return None
    code = src.code(node)
    names = sorted({n.value for n in params})
    if len(names) != 1:
        return _Refusal(
            f"in_features `{code}` reads the constructor's parameters {', '.join(names)}: which argument is wrong is not proven",
            f"the layer receives {needed} features: make `{code}` evaluate to {needed} where the model is built",
        )
    param = names[0]
    step = passed[param]
    module = src.module

    def value(p: int) -> int | None:
        def leaf(n: cst.BaseExpression) -> int | None:
            if isinstance(n, cst.Name) and n.value == param:
                return p
            return known.get(_key(module.code_for_node(n)))
        return integer_value(node, leaf)

    where = f"{report_path(Path(step.where.file))}:{step.where.line}"
    if type(step.value) is not int or value(step.value) != linear.in_features:
        return None
    if len(constructions) > 1:
        built = "; ".join(
            f"{s.param} = {s.value!r} at {report_path(Path(s.where.file))}:{s.where.line}"
            for chain in constructions for s in chain if s.param == param
        )
        return _Refusal(
            f"the layer's in_features is `{code}`, and its class is built {len(constructions)} times with "
            f"different arguments ({built}): the failing one gets {linear.in_features} for an input of {needed}; "
            "whether this construction's argument or the definition's expression is wrong, one run does not prove",
            f"the layer built with {param} = {step.value!r} at {where} receives {needed} features, and `{code}` "
            f"gives {linear.in_features}: correct the argument there, or `{code}` for every construction",
        )
    solutions = [p for p in range(1, min(4 * needed + 4, 1 << 15)) if value(p) == needed]
    if len(solutions) != 1:
        return _Refusal(
            f"in_features `{code}` is {linear.in_features} with {param} = {step.value!r} passed at {where}; "
            f"no single {param} makes it {needed}",
            f"the layer receives {needed} features, and `{code}` ({param} = {step.value!r} at {where}) gives "
            f"{linear.in_features}: the definition's expression or the data is wrong",
            final=False,
        )
    name_node = params[0]
    written = written_at(sources, str(path), name_node, layer.chain)
    if written is None or written.kind == DEFAULT or integer_value(written.node) != step.value:
        return _Refusal(
            f"{param} = {step.value!r} passed at {where} is not written as one number the edit could change",
            f"the layer receives {needed} features: pass {param}={solutions[0]} at {where}",
            final=False,
        )
    rewritten = _rewrite_size(written.node, solutions[0])
    if rewritten is None:
        return None
    new = cst.Module(body=[]).code_for_node(rewritten)
    return _Candidate(
        written.kind, written.file, written.span, written.code, new, Applicability.SAFE, ReplaceSize(new),
        trail=written.trail,
    )


def _key(code: str) -> str:
    return "".join(code.split()).replace("'", '"')


def _candidates(
    module: cst.Module, call: cst.Call, node: cst.BaseExpression, linear: LinearTrace,
    layer: LayerSite | None, needed: int, path: Path, sources: Sources,
    constructions: list[tuple[PassedArgument, ...]],
) -> list[_Candidate] | str | _Refusal:
    """The edits that give the layer ``needed`` features, smallest and most idiomatic first:
    the number where it is written (a literal in the call, a call-site argument, a config
    default), a name or attribute in scope with the needed traced value, a factor dropped or
    added, a product of sizes in scope, and last a literal (unsafe). A reason (str) when the
    source already gives ``needed`` (the evidence is older than the code)."""
    src = source(sources, str(path))
    span = src.positions.get(node) if src is not None else None
    if src is None or span is None:
        return []
    code = src.code(node)
    known: dict[str, int] = {}
    if layer is not None:
        known.update({_key(k): v for k, v in layer.scope.items()})
        known.update({_key(k): v for k, v in layer.values.items() if type(v) is int})

    def value_of(expr: cst.BaseExpression) -> int | None:
        literal = integer_value(expr)
        return literal if literal is not None else known.get(_key(module.code_for_node(expr)))

    def replace_here(kind: str, new: str, applicability: Applicability = Applicability.SAFE,
                     notes: tuple[str, ...] = ()) -> _Candidate:
        return _Candidate(kind, str(path), span, code, new, applicability,
                          ReplaceSize(new), notes=notes)

    if is_literal(node):
        if integer_value(node) == needed:
            return f"in_features is already written as `{code}` = {needed}"
        rewritten = _rewrite_size(node, needed)
        if rewritten is None:
            return []
        located = src.positions[call]
        return [_Candidate("in_features literal", str(path), located, code, module.code_for_node(rewritten),
                           Applicability.SAFE, SetInFeatures(module.code_for_node(rewritten)))]
    if value_of(node) == needed:
        return f"`{code}` already evaluates to {needed} in the traced run"

    found: list[_Candidate] = []
    late: list[_Candidate] = []
    chain = layer.chain if layer is not None else ()
    # A size that a constructor's parameter gives is changed where the class is built, never
    # in its (reusable) definition, and only when the run saw that one construction.
    construction = _construction_argument(sources, src, path, node, linear, layer, known, needed, constructions)
    refusal: _Refusal | None = None
    if isinstance(construction, _Refusal):
        if construction.final:
            return construction
        refusal, construction = construction, None
    # the argument where the class is built resizes every layer the parameter sizes when the
    # parameter feeds others too: then it comes after the edits local to this layer, but before
    # a factor that no name gives (a whole part built with the wrong size is fixed there)
    shared_construction: list[_Candidate] = []
    if construction is not None and _reads_elsewhere(src, node):
        names = ", ".join(sorted({n.value for n in walk(node) if isinstance(n, cst.Name)}))
        shared_construction.append(replace(construction, applicability=Applicability.UNSAFE, notes=(
            f"`{names}` also sizes other layers of the class: the argument resizes them too",)))
    elif construction is not None:
        found.append(construction)
    written = written_at(sources, str(path), node, chain) if construction is None and refusal is None else None
    if written is not None and written.kind != LITERAL:
        number = integer_value(written.node)
        if number == needed:
            return f"`{code}` is written as {written.code} at {written.place}, already {needed}"
        rewritten = _rewrite_size(written.node, needed) if number == linear.in_features else None
        if rewritten is not None:
            new = cst.Module(body=[]).code_for_node(rewritten)
            # the number is shared when the name feeds other code of its function too (other
            # layers' sizes): then editing where it is written changes them as well, so it is
            # tried only after the edits local to this layer
            shared = _reads_elsewhere(src, node)
            (late if shared else found).append(_Candidate(
                written.kind, written.file, written.span, written.code, new, Applicability.SAFE,
                ReplaceSize(new), trail=written.trail,
            ))

    # a name or attribute already in scope whose traced value is the needed size
    roots = {n.value for n in walk(node) if isinstance(n, cst.Name)}
    same = [k for k, v in (layer.scope.items() if layer else ()) if v == needed and _key(k) != _key(code)]
    same.sort(key=lambda k: (k.split(".")[0].split("[")[0] not in roots, "." in k or "[" in k, k))
    for name in same[:3]:
        found.append(replace_here(
            "factor dropped" if _key(name) in _key(code) else "name in scope", name, Applicability.SAFE if len(same) == 1 else Applicability.UNSAFE,
            () if len(same) == 1 else (f"{', '.join(same)} all have the traced value {needed}; "
                                       f"`{name}` was the first that the rerun verified",),
        ))

    # a factor dropped or added
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply | cst.FloorDivide | cst.Divide):
        for operand in (node.left, node.right):
            if value_of(operand) == needed and not is_literal(operand):
                found.append(replace_here("factor dropped", module.code_for_node(operand)))
    wrapped = f"({code})" if isinstance(node, cst.BinaryOperation) and not isinstance(node.operator, cst.Multiply) else code
    # A factor is added first when the file already writes that product (the sibling layer's
    # `4 * cfg["emb_dim"]`); a factor the code never writes comes after the sizes in scope.
    factors: list[str] = []
    if linear.in_features > 0 and needed % linear.in_features == 0 and 2 <= needed // linear.in_features <= 16:
        factors.append(f"{needed // linear.in_features} * {wrapped}")
    if needed > 0 and linear.in_features % needed == 0 and 2 <= linear.in_features // needed <= 16:
        factors.append(f"{wrapped} // {linear.in_features // needed}")
    written_code = _key(module.code)
    found += [replace_here("factor added", text) for text in factors if _key(text) in written_code]
    unwritten = [text for text in factors if _key(text) not in written_code]

    # a product of sizes in scope, those the expression already reads first
    scope = [(k, v) for k, v in (layer.scope.items() if layer else ()) if v > 1]
    products: list[str] = []
    if linear.in_features > 0 and needed % linear.in_features == 0:
        products += [f"{k} * {wrapped}" for k, v in scope if v * linear.in_features == needed]
    for i, (a, va) in enumerate(scope):
        for b, vb in scope[i + 1:]:
            if va * vb == needed:
                products.append(f"{a} * {b}")
    products.sort(key=lambda text: not any(r in text for r in roots))
    seen: set[frozenset[str]] = set()
    distinct: list[str] = []
    classes = src.around(span.line, cst.ClassDef)
    cls = classes[0] if classes and isinstance(classes[0], cst.ClassDef) else None

    def same_value(part: str) -> str:
        # `self.block_size` set once from `config.block_size` is that size, not another one
        attr = part.removeprefix("self.")
        value = self_attribute_value(cls, attr) if cls is not None and attr != part and attr.isidentifier() else None
        if isinstance(value, cst.Name | cst.Attribute):
            return module.code_for_node(value).removeprefix("self.")
        return attr

    for text in products:
        factors_of = frozenset(same_value(part.strip()) for part in text.split(" * "))
        if factors_of not in seen:
            seen.add(factors_of)
            distinct.append(text)
    ambiguous = (f"{len(distinct)} products of sizes in scope give {needed}: {', '.join(distinct[:4])}",)
    found += [
        replace_here("product of sizes in scope", text, *((Applicability.SAFE, ()) if len(distinct) == 1
                                                          else (Applicability.UNSAFE, ambiguous)))
        for text in distinct[:3]
    ]
    guessed = [replace_here("factor added", text, Applicability.UNSAFE,
                            (f"the factor in `{text}` is written nowhere else in the file",)) for text in unwritten]

    config = _configuration_read(node)
    if config is not None and not found and not shared_construction and (not late or _config_read_elsewhere(src.module, config)):
        # A size read from a configuration object is written only in the configuration's
        # names: a number (or a factor that no name gives) would no longer follow its flags,
        # and changing the configuration's value would resize every other layer it sizes.
        origin = written_at(sources, str(path), config, chain)
        values_text = ", ".join(f"{k} = {v}" for k, v in known.items() if k in _key(code))
        return _Refusal(
            f"in_features is `{code}` ({values_text or linear.in_features}), read from a configuration object, and "
            f"no size of the configuration or in scope gives the traced {needed}",
            f"the layer receives {needed} features"
            + (f" ({needed // linear.in_features} x `{code}`)" if linear.in_features and needed % linear.in_features == 0 else "")
            + f": write in_features as an expression of the configuration that evaluates to {needed}"
            + (f" (`{src.code(config)}` is written at {origin.place})" if origin else ""),
        )
    found += shared_construction + (guessed if refusal is None else []) + late
    if not found and refusal is not None:
        return refusal
    if construction is None and config is None and refusal is None:
        found.append(replace_here(
            "literal", str(needed), Applicability.UNSAFE,
            (f"in_features is now the number {needed}: it no longer follows `{code}` (the configuration)",),
        ))
    unique: list[_Candidate] = []
    for candidate in found:
        if all((c.file, c.span, c.code) != (candidate.file, candidate.span, candidate.code) for c in unique):
            unique.append(candidate)
    return unique


def _configuration_read(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The first attribute of a configuration object that ``node`` reads (``config.n_embd``,
    ``args.hidden``, ``cfg["emb_dim"]``): not of ``self``, not of an imported module."""
    for n in walk(node):
        if isinstance(n, cst.Attribute | cst.Subscript):
            root: cst.BaseExpression = n
            while isinstance(root, cst.Attribute | cst.Subscript):
                root = root.value
            if isinstance(root, cst.Name) and root.value not in ("self", "math", "np", "torch", "nn"):
                return n
    return None


def _config_read_elsewhere(module: cst.Module, read: cst.BaseExpression) -> bool:
    """Whether the file reads the same configuration entry (``config.n_embd``) at another place."""
    key = _key(module.code_for_node(read))
    return sum(
        isinstance(n, cst.Attribute | cst.Subscript) and _key(module.code_for_node(n)) == key for n in walk(module)
    ) > 1


def _reads_elsewhere(src: Source, node: cst.BaseExpression) -> bool:
    """Whether the names of ``node`` are read elsewhere in its function (or module) too."""
    names = {n.value for n in walk(node) if isinstance(n, cst.Name)}
    line = src.positions[node].line
    functions = src.around(line, cst.FunctionDef)
    scope: cst.CSTNode = functions[0] if functions else src.module
    own = {id(n) for n in walk(node)}
    return any(
        isinstance(n, cst.Name) and n.value in names and id(n) not in own and not _is_binding(scope, n)
        for n in walk(scope)
    )


def _is_binding(scope: cst.CSTNode, name: cst.Name) -> bool:
    """A parameter's own name, or an assignment target (not a read)."""
    for n in walk(scope):
        if isinstance(n, cst.Param) and n.name is name:
            return True
        if isinstance(n, cst.AssignTarget) and n.target is name:
            return True
        if isinstance(n, cst.Attribute) and n.attr is name:
            return True
        if isinstance(n, cst.Arg) and n.keyword is name:
            return True
    return False


def _same_site(evidence: Evidence | None, linear: LinearTrace) -> list[LinearTrace]:
    if evidence is None or linear.site is None:
        return []
    key = (linear.site.file, linear.site.line, linear.site.col)
    return [
        lt for lt in evidence.linears
        if lt is not linear and lt.site is not None and (lt.site.file, lt.site.line, lt.site.col) == key
    ]


def _factors(node: cst.BaseExpression) -> list[cst.Integer] | None:
    """The integer leaves of a product like ``64 * 7 * 7``; None if it is anything else."""
    if isinstance(node, cst.Integer):
        return [node]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left, right = _factors(node.left), _factors(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _rewrite_size(node: cst.BaseExpression, needed: int) -> cst.BaseExpression | None:
    """The expression rewritten to evaluate to ``needed``, in its own shape where possible.

    A product of numbers keeps its factors: a repeated pair (a spatial size, as in ``7 * 7``)
    changes first, since a miscounted feature map is the usual mistake, then a single factor;
    failing both, and for a plain number, the number itself.
    """
    factors = _factors(node)
    if factors is None:
        return None
    if len(factors) == 1:
        return factors[0].with_changes(value=str(needed))
    values = [int(f.evaluated_value) for f in factors]
    replacements: dict[int, int] = {}
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            if values[i] != values[j]:
                continue
            rest = math.prod(v for k, v in enumerate(values) if k not in (i, j))
            side = math.isqrt(needed // rest) if rest and needed % rest == 0 else 0
            if side > 0 and side * side * rest == needed:
                replacements = {i: side, j: side}
                break
        if replacements:
            break
    if not replacements:
        for i, value in enumerate(values):
            rest = math.prod(values) // value if value else 0
            if rest and needed % rest == 0:
                replacements = {i: needed // rest}
                break
    if not replacements:
        return cst.Integer(str(needed))
    swap = {id(factors[i]): str(v) for i, v in replacements.items()}

    class SwapFactors(cst.CSTTransformer):
        def leave_Integer(self, original_node: cst.Integer, updated_node: cst.Integer) -> cst.Integer:
            return updated_node.with_changes(value=swap[id(original_node)]) if id(original_node) in swap else updated_node

    return node.visit(SwapFactors())  # type: ignore[return-value]
