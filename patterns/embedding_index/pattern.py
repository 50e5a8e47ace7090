"""embedding-index: an index outside an embedding table, or a class label outside the model's classes."""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Description,
    place,
    recorded_local,
    resolve_site,
    shape_of,
    shape_text,
    source,
)
from repairbot.evidence import DescribedValue, Evidence, LinearTrace
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

_ASSERT_CUDA_INDEX = r"(?:srcIndex < srcSelectDimSize|indexSelect(?:Large|Small)Index)"
_EMBEDDINGS = ("Embedding", "EmbeddingBag")


class EmbeddingIndex(Pattern):
    """Explains an index beyond an embedding table, or a label beyond the model's classes.

    What it fixes:
        Diagnoses (never edits) an ``nn.Embedding`` looked up with an index outside
        ``0 .. num_embeddings - 1`` (a vocabulary sized without its padding or unknown token, a
        tokenizer from another vocabulary, ``-1`` used as padding), and a classification loss
        given a label outside ``0 .. C - 1`` for a model that scores ``C`` classes.

    Why it fails:
        ``IndexError: index out of range in self`` (1.5/1.6 as ``RuntimeError``; 1.3 to 1.5:
        ``index out of range: Tried to access index 12 out of table with 9 rows``; 0.4 to 1.2:
        ``index out of range at .../THTensorEvenMoreMath.cpp:191``) from the table lookup, and
        ``IndexError: Target 3 is out of bounds.`` from ``cross_entropy``/``nll_loss`` (older
        CPU builds: ``Assertion `cur_target >= 0 && cur_target < n_classes' failed``). On a
        GPU both are device-side asserts reported at a later line; only the embedding's
        ``indexSelect`` assertion in the message is recognised there. The tracing run records
        the failing module: the Embedding's size, where it was built, and the smallest and
        largest index it received; for a loss, the shape of the scores it received.

    Example:
        ``nn.Embedding(len(vocab), 32)`` with the padding id ``len(vocab)``: "nn.Embedding(10,
        32) built at model.py:7 received index 10", and the diagnosis names both sides, the
        table's 10 rows where it is built and the ids reaching 10 where it was given them, with
        no change proposed: which side is wrong the run does not show. Only a negative id, which
        no table takes, gets a remedy (a real padding id and ``padding_idx``).

    Fix safety:
        Never edited automatically: the table may be right and the data wrong (a tokenizer
        from another checkpoint, labels counted from 1), and resizing a pretrained table or
        head breaks loading its weights.

    Not handled:
        A lookup through ``F.embedding`` or ``index_select`` on a hand-made tensor (no table
        size is recorded: the diagnosis states the rule); CUDA device-side asserts without
        the assertion text in the message (they are left unclassified).
    """

    ID = "embedding-index"
    TITLE = "Embedding index or class label outside the table"
    TAGS = frozenset({"data", "index"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    BATCH_INVARIANT = True
    EVIDENCE = frozenset({"failing_module", "linears", "locals"})
    REMEDY = (
        "The table and the ids must agree: every id the data uses (vocabulary plus padding, "
        "unknown and special tokens) below nn.Embedding's num_embeddings, and none negative; "
        "check which side is wrong, the table's size or the ids the data is encoded with. For a "
        "classification loss, the final layer's out_features and the labels must agree: labels "
        "0 to classes - 1. On a GPU, rerun on the CPU to see the failing index."
    )
    SIGNATURES = (
        signature(("IndexError", "RuntimeError"), r"index out of range in self"),
        signature(
            "RuntimeError",
            r"index out of range: Tried to access index (?P<index>-?\d+) out of table with (?P<rows>\d+) rows",
        ),
        signature("RuntimeError", r"^index out of range at \S*TH\w*Tensor\w*Math"),
        signature(("IndexError", "RuntimeError"), r"Target (?P<target>-?\d+) is out of bounds"),
        signature("RuntimeError", r"Assertion .cur_target >= 0 && cur_target < n_classes. failed"),
        signature(
            ("RuntimeError", "AcceleratorError"),
            rf"{_ASSERT_CUDA_INDEX}.*device-side assert triggered|device-side assert triggered.*{_ASSERT_CUDA_INDEX}",
        ),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        frame = failure.user_frame
        text = match.group(0)
        if "device-side assert" in text:
            return self.decline(
                "a CUDA embedding lookup read an index outside its table (the indexSelect "
                "assertion); CUDA reports it asynchronously, so the failing line may be a later one",
                diagnosis=(
                    "Rerun on the CPU (or with CUDA_LAUNCH_BLOCKING=1) to get the lookup and the "
                    "index that fail; then make num_embeddings larger than the largest index, or "
                    "fix the ids the data produces."
                ),
                at=frame,
            )
        if "target" in text.lower():
            return self._label(failure, match, evidence, sources, frame)
        return self._lookup(match, evidence, frame)

    def _lookup(self, match: re.Match[str], evidence: Evidence | None, frame: Frame | None) -> Decline:
        module = evidence.failing_module if evidence else None
        groups = match.groupdict()
        if not module or module.type not in _EMBEDDINGS or module.num_embeddings is None:
            told = (
                f" (index {groups['index']}, table of {groups['rows']} rows)" if groups.get("index") else ""
            )
            return self.decline(
                f"an index lookup (an embedding or index_select) got an index outside its table{told}; "
                "the failing call is not an nn.Embedding the trace could measure",
                diagnosis=self.REMEDY,
                at=frame,
            )
        size = module.num_embeddings
        dim = module.embedding_dim if module.embedding_dim is not None else "..."
        kind = module.type
        site = resolve_site(evidence, module.site)
        built = f" built at {place(site)}" if site else ""
        low, high = module.input_min, module.input_max
        received = f" (input {shape_text(module.input_shape)} {module.input_dtype or ''}".rstrip()
        received += f", indices {low}..{high})" if low is not None and high is not None else ")"
        table = f"nn.{kind}({size}, {dim}){built}"
        at = site or frame
        if isinstance(high, int) and high >= size:
            return self.decline(
                f"{table} received index {high}{received}: a table of {size} rows takes indices "
                f"0..{size - 1}",
                diagnosis=(
                    f"The table and the ids disagree: {table} has {size} rows (ids 0..{size - 1}); the ids "
                    f"it was given at {place(frame) if frame else 'the failing line'} reach {high}. Which one "
                    "is wrong the run does not show (a table that misses the padding, unknown or special "
                    "tokens, or ids made with another vocabulary), so no change is proposed."
                ),
                at=at,
            )
        if isinstance(low, int) and low < 0:
            return self.decline(
                f"{table} received index {low}{received}: indices must be 0..{size - 1}, never negative",
                diagnosis=(
                    f"Map padding and unknown tokens to real ids instead of {low}: reserve one (such as "
                    f"0) and pass padding_idx=0 to nn.{kind}{' at ' + place(site) if site else ''}, "
                    "with num_embeddings counting it."
                ),
                at=at,
            )
        return self.decline(
            f"{table} received an index outside 0..{size - 1}{received}",
            diagnosis=self.REMEDY,
            at=at,
        )

    def _label(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources, frame: Frame | None
    ) -> Decline:
        groups = match.groupdict()
        target = int(groups["target"]) if groups.get("target") else None
        scores = _scores(evidence, sources, frame)
        classes = _classes(scores)
        label = f"a label is {target}" if target is not None else "a label is outside the classes"
        given = f"label {target}" if target is not None else "a label outside the classes"
        if target is not None and target < 0:
            return self.decline(
                f"{label}: class labels must be 0..C-1, and only the loss's ignore_index (-100 by "
                "default) may be negative",
                diagnosis=(
                    f"If {target} marks samples without a label, pass ignore_index={target} to the loss "
                    "(nn.CrossEntropyLoss(ignore_index=...)); otherwise map the labels to 0..C-1."
                ),
                at=frame,
            )
        if classes is None:
            return self.decline(
                f"{label}, beyond the classes the model scores",
                diagnosis=(
                    f"The labels and the model's outputs disagree: {given} at "
                    f"{place(frame) if frame else 'the failing line'}, beyond the classes the model scores; the "
                    "run does not show which one is wrong (1-based labels, or a class the output layer "
                    "lacks), so no change is proposed."
                ),
                at=frame,
            )
        head = _head(evidence, classes)
        head_text = (
            f"{head.type}({head.in_features}, {head.out_features}) at {place(head.site)}"
            if head is not None and head.site is not None else None
        )
        at = head.site if head is not None and head.site is not None else frame
        scored = f"{classes} classes (scores {shape_text(shape_of(scores))})" if scores else f"{classes} classes"
        return self.decline(
            f"the model scores {scored} but {label}: the loss takes labels 0..{classes - 1}"
            + (f"; the output layer is {head_text}" if head_text else ""),
            diagnosis=(
                f"The labels and the model's outputs disagree: {head_text or 'the output layer'} scores "
                f"{classes} classes (labels 0..{classes - 1}); the loss at {place(frame) if frame else 'the failing line'} "
                f"got {given}. Which one is wrong the run does not show (1-based labels, or a class the "
                "layer lacks), so no change is proposed."
            ),
            at=at,
        )


def _scores(evidence: Evidence | None, sources: Sources, frame: Frame | None) -> Description | None:
    """The scores the loss received: the failing loss module's input, else the first tensor
    argument of the call on the failing line (``F.cross_entropy(logits, y)``)."""
    module = evidence.failing_module if evidence else None
    if module and module.input_shape is not None:
        return DescribedValue(kind="tensor", shape=module.input_shape, dtype=module.input_dtype)
    if frame is None:
        return None
    src = source(sources, frame.file)
    if src is None:
        return None
    for node, span in src.positions.items():
        if not isinstance(node, cst.Call) or not span.contains_line(frame.line):
            continue
        for arg in node.args:
            value = recorded_local(evidence, frame, arg.value.value) if isinstance(arg.value, cst.Name) else None
            if value is None or not value.is_tensor:
                continue
            shape = shape_of(value)
            if shape and len(shape) >= 2 and (value.dtype or "").startswith(("float", "bfloat")):
                return value
    return None


def _classes(scores: Description | None) -> int | None:
    shape = shape_of(scores) if scores else None
    if not shape:
        return None
    return shape[1] if len(shape) >= 2 else shape[0]


def _head(evidence: Evidence | None, classes: int) -> LinearTrace | None:
    """The one nn.Linear of the project that produced ``classes`` outputs in this run."""
    if evidence is None:
        return None
    heads = [
        lt for lt in evidence.linears
        if lt.out_features == classes and lt.calls and lt.site is not None and lt.site.user
        and Path(lt.site.file).is_absolute()
    ]
    return heads[0] if len(heads) == 1 else None
