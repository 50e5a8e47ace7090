"""batch-size-mismatch: a loss given a different number of predictions than targets."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Description,
    Source,
    frame_at,
    last_binding,
    local_tensors,
    numel,
    place,
    shape_of,
    shape_text,
    source,
    walk,
)
from repairbot.evidence import Evidence, LinearTrace
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame


@dataclass(frozen=True)
class Reshape:
    """A ``.view(-1, N)`` / ``.reshape(-1, N)`` of the project: the usual way samples get merged."""

    frame: Frame
    code: str
    # the name it reshapes when that is the function's own parameter, unchanged before it
    # (``def forward(self, x): x = x.view(-1, 784)``): the model's input as the data gave it
    flattens_input: str | None = None


class BatchSizeMismatch(Pattern):
    """Explains predictions and targets that disagree in number, and which reshape mixed samples.

    What it fixes:
        Diagnoses (never edits) a classification loss that gets N rows of scores for M
        targets: a flatten with a hard-coded size (``x.view(-1, 16 * 5 * 5)``) that splits or
        merges samples when the feature map has another size, or sequence outputs and targets
        of different lengths flattened for the loss.

    Why it fails:
        ``ValueError: Expected input batch_size (8) to match target batch_size (2).`` (older
        releases without the final period; 0.3: ``Assertion `THIndexTensor_(size)(target, 0)
        == batch_size' failed``). ``view(-1, 400)`` on a ``[2, 16, 10, 10]`` feature map gives
        ``[8, 400]``: each sample became four rows, and the Linear after it accepts them.
        The diagnosis uses the two numbers, the traced Linear inputs, the recorded tensors of
        the failing frame, and the project's ``view(-1, ...)``/``reshape(-1, ...)`` calls.

    Example:
        ``x = x.view(-1, 16 * 5 * 5)`` in ``forward`` with 40x40 inputs: "the model returned 4
        rows per sample"; the remedy is ``x = x.flatten(1)`` (or ``x.view(x.size(0), -1)``) and
        then the Linear's ``in_features`` for the real size, which linear-in-features fixes.
        That remedy is given only where the flatten reshapes what the model's own layers made
        (a feature map). Where it reshapes the model's input as the data gave it
        (``def forward(self, x): x = x.view(-1, 28 * 28)`` fed 3-channel images), either side
        may be wrong (colour data for a grayscale model, or a model sized for other data): the
        diagnosis names both sample sizes and where the flatten is written, and proposes nothing.

    Fix safety:
        Never edited automatically: the right flatten and the right ``in_features`` depend on
        the input size the model is meant for, and a sequence-length mismatch may need the
        targets shifted (next-token prediction) rather than truncated.

    Not handled:
        Reshapes written without ``-1`` in front or computed in a library; losses other than
        the NLL family (their size errors are other messages).
    """

    ID = "batch-size-mismatch"
    TITLE = "Loss input and target batch sizes differ"
    TAGS = frozenset({"shape"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    EVIDENCE = frozenset({"linears", "locals"})
    REMEDY = (
        "Keep the batch dimension when flattening: `x = x.flatten(1)` or `x = x.view(x.size(0), -1)` "
        "instead of `x.view(-1, C * H * W)` with a hard-coded size (then set the next Linear's "
        "in_features to the real size); for sequences, flatten outputs and targets of the same "
        "length (shift or trim the targets for next-token prediction)."
    )
    SIGNATURES = (
        signature(
            ("ValueError", "RuntimeError"),
            r"Expected input batch_size \((?P<input>\d+)\) to match target batch_size \((?P<target>\d+)\)",
        ),
        signature("RuntimeError", r"Assertion .THIndexTensor_\(size\)\(target, 0\) == batch_size. failed"),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        frame = failure.user_frame
        groups = match.groupdict()
        if not groups.get("input") or not groups.get("target"):
            return self.decline(
                "the loss received a different number of predictions than targets", diagnosis=self.REMEDY, at=frame
            )
        rows, targets = int(groups["input"]), int(groups["target"])
        sequences = self._sequences(evidence, frame, rows, targets)
        if sequences is not None:
            return sequences
        if frame is not None and min(rows, targets) > 0 and max(rows, targets) % min(rows, targets) == 0:
            return self._merged_samples(evidence, sources, frame, rows, targets)
        return self.decline(
            f"the loss received {rows} rows of predictions for {targets} targets", diagnosis=self.REMEDY, at=frame
        )

    def _sequences(self, evidence: Evidence | None, frame: Frame | None, rows: int, targets: int) -> Decline | None:
        """Outputs and targets of sequences with different lengths, from the recorded tensors."""
        tensors = local_tensors(evidence, frame)
        scores = [
            (name, t) for name, t in tensors.items()
            if _is_float(t) and len(shape_of(t) or ()) >= 3 and (shape_of(t) or [0])[-1] > 0
        and numel(t) // (shape_of(t) or [1])[-1] == rows
        ]
        labels = [
            (name, t) for name, t in tensors.items()
            if not _is_float(t) and len(shape_of(t) or ()) >= 2 and numel(t) == targets
        ]
        if frame is None or len(scores) != 1 or len(labels) != 1:
            return None
        (out_name, out), (target_name, target) = scores[0], labels[0]
        out_shape, target_shape = shape_of(out) or [], shape_of(target) or []
        if out_shape[0] != target_shape[0] or out_shape[1] == target_shape[1]:
            return None
        return self.decline(
            f"`{out_name}` {shape_text(out_shape)} flattens to {rows} rows and `{target_name}` "
            f"{shape_text(target_shape)} to {targets}: the outputs cover {out_shape[1]} positions per "
            f"sequence, the targets {target_shape[1]}",
            diagnosis=(
                f"The outputs and the targets disagree in length at {place(frame)}: `{out_name}` covers "
                f"{out_shape[1]} positions per sequence, `{target_name}` {target_shape[1]}. Which one is wrong "
                "the run does not show (next-token targets not shifted against the inputs, or a sequence "
                "length that differs between the model and the data), so no change is proposed."
            ),
            at=frame,
        )

    def _merged_samples(
        self, evidence: Evidence | None, sources: Sources, frame: Frame, rows: int, targets: int
    ) -> Decline:
        """A reshape that turned each sample into several rows (or several samples into one)."""
        if rows > targets:
            ratio = f"{rows // targets} rows per sample" if targets else f"{rows} rows"
            what = f"the model returned {rows} rows of scores for a batch of {targets}: {ratio}"
        else:
            what = f"the model returned {rows} rows of scores for a batch of {targets}: one row per {targets // rows} samples"
        linear = next(
            (lt for lt in (evidence.linears if evidence else ()) if lt.input_shape and lt.input_shape[0] == rows
             and len(lt.input_shape) == 2 and lt.site is not None and rows != targets),
            None,
        )
        fed = ""
        files = [frame.file]
        if linear is not None and linear.site is not None:
            fed = (
                f"; the {linear.type}({linear.in_features}, {linear.out_features}) built at "
                f"{place(linear.site)} received {shape_text(linear.input_shape)}"
            )
            files.insert(0, linear.site.file)
        files += list(evidence.imported_files if evidence else ())
        reshapes = _reshapes(sources, files)
        if len(reshapes) == 1:
            reshape = reshapes[0]
            effect = (
                f"each sample is split into {rows // targets} rows" if rows > targets
                else f"{targets // rows} samples are merged into each row"
            )
            if reshape.flattens_input is not None and rows > targets:
                return self._sample_size_disagrees(reshape, linear, frame, what, fed, rows, targets)
            then = "then set the next Linear's in_features to the real feature size"
            if linear is not None and linear.site is not None and (rows * linear.in_features) % targets == 0:
                then = (
                    f"then {linear.type}({linear.in_features}, {linear.out_features}) at {place(linear.site)} "
                    f"needs in_features={rows * linear.in_features // targets}"
                )
            return self.decline(
                f"{what}{fed}. `{reshape.code}` at {place(reshape.frame)} flattens to a fixed feature "
                f"size, and the feature map has another size: {effect}",
                diagnosis=(
                    f"Keep the batch dimension at {place(reshape.frame)}: `.flatten(1)` or "
                    f"`.view(x.size(0), -1)` instead of a hard-coded size; {then} (repairbot's "
                    "linear-in-features fixes that once the batch is right)."
                ),
                at=reshape.frame,
            )
        listed = "; candidates: " + ", ".join(f"`{r.code}` at {place(r.frame)}" for r in reshapes) if reshapes else ""
        return self.decline(f"{what}{fed}{listed}", diagnosis=self.REMEDY, at=frame)

    def _sample_size_disagrees(
        self, reshape: Reshape, linear: LinearTrace | None, frame: Frame, what: str, fed: str, rows: int, targets: int
    ) -> Decline:
        """The model's input itself flattened to a fixed size that one sample exceeds: the data
        (colour images for a model written for grayscale ones) or the model (written for other
        data) may be the wrong side, and the run does not show which, so nothing is proposed."""
        name = reshape.flattens_input
        in_features = linear.in_features if linear is not None else None
        sizes = (
            f"one sample of `{name}` holds {rows // targets} x {in_features} = {rows * in_features // targets} values, "
            f"the model flattens it to {in_features}" if in_features
            else f"one sample of `{name}` holds {rows // targets} times the size the model flattens it to"
        )
        return self.decline(
            f"{what}{fed}. `{reshape.code}` at {place(reshape.frame)} flattens the model's input `{name}` "
            f"as the data gave it: {sizes}",
            diagnosis=(
                f"The data and the model disagree on the size of one sample: {sizes} (`{reshape.code}` at "
                f"{place(reshape.frame)}), so each sample became {rows // targets} rows of the batch that reached "
                f"the loss at {place(frame)}. Which side is wrong (images with more channels than the model was "
                "written for, or a model sized for other data) the run does not show, so no change is proposed."
            ),
            at=reshape.frame,
        )


def _is_float(tensor: Description) -> bool:
    return (tensor.dtype or "").startswith(("float", "bfloat", "half", "double"))


def _reshapes(sources: Sources, files: list[str]) -> list[Reshape]:
    """``.view(-1, ...)`` / ``.reshape(-1, ...)`` calls with a fixed size, in the given files."""
    found: list[Reshape] = []
    seen: set[str] = set()
    for file in files:
        if file in seen or not Path(file).is_absolute():
            continue
        seen.add(file)
        src = source(sources, file)
        if src is None:
            continue
        found += [
            Reshape(frame_at(str(src.path), span.line), src.code(node), _reshaped_parameter(src, node, span.line))
            for node, span in src.positions.items()
            if isinstance(node, cst.Call) and _flattens_to_fixed_size(src, node)
        ]
    return sorted(found, key=lambda r: (r.frame.file, r.frame.line))


def _reshaped_parameter(src: Source, call: cst.Call, line: int) -> str | None:
    """The name ``call`` reshapes when it is a parameter of the function around it that no
    statement before rebinds: the value the caller passed, unchanged (for ``forward``, the data)."""
    target = call.func.value if isinstance(call.func, cst.Attribute) else None
    if not isinstance(target, cst.Name):
        return None
    functions = src.around(line, cst.FunctionDef)
    if not functions or not isinstance(functions[0], cst.FunctionDef):
        return None
    params = functions[0].params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    if target.value not in names or target.value == "self":
        return None
    return target.value if last_binding(src, target.value, line) is None else None


def _flattens_to_fixed_size(src: Source, call: cst.Call) -> bool:
    """``t.view(-1, 400)``, ``t.reshape(-1, 16 * 5 * 5)``: -1 first, then a size without names."""
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in ("view", "reshape"):
        return False
    args = [a.value for a in call.args if a.keyword is None and not a.star]
    if len(args) != 2:
        return False
    first, size = args
    minus_one = isinstance(first, cst.UnaryOperation) and isinstance(first.operator, cst.Minus) and (
        isinstance(first.expression, cst.Integer) and first.expression.value == "1"
    )
    return minus_one and not isinstance(size, cst.UnaryOperation) and not any(
        isinstance(n, cst.Name) for n in walk(size)
    )
