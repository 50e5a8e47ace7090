"""broadcast-size: two tensors of an elementwise operation whose shapes cannot broadcast."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    Source,
    last_binding,
    local_tensors,
    place,
    reads,
    shape_of,
    shape_text,
    source,
)
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame


@dataclass(frozen=True)
class Operand:
    name: str
    shape: list[int]
    made: str  # where the value was made, for people


def broadcast_dim(a: Sequence[int], b: Sequence[int], dim: int) -> tuple[int, int] | None:
    """The sizes of ``a`` and ``b`` at dimension ``dim`` of their broadcast (aligned from the right)."""
    rank = max(len(a), len(b))
    if not 0 <= dim < rank:
        return None
    index_a, index_b = dim - (rank - len(a)), dim - (rank - len(b))
    size_a = a[index_a] if index_a >= 0 else 1
    size_b = b[index_b] if index_b >= 0 else 1
    return size_a, size_b


class BroadcastSize(Pattern):
    """Explains an elementwise operation on two tensors whose shapes do not broadcast.

    What it fixes:
        Diagnoses (never edits) ``a + b``, ``a * b``, ``(pred - y) ** 2``, ``torch.where``, a
        residual connection or an attention mask whose operands disagree in a dimension
        where neither is 1: a loss given ``[N, 10]`` scores and ``[N]`` labels, a residual
        added after a stride-2 conv, a mask built for another sequence length.

    Why it fails:
        ``RuntimeError: The size of tensor a (10) must match the size of tensor b (4) at
        non-singleton dimension 1`` (the same words since torch 0.4; tensor ``a`` is the first
        operand). Broadcasting aligns shapes from the right and stretches only dimensions of
        size 1. The tracing run records the tensors of the failing frame, which gives both
        operands' shapes; the user's own code tells the line that made each.

    Example:
        ``loss = ((out - target) ** 2).mean()`` with ``out`` ``[2, 10]`` (made at
        ``train.py:31: out = model(x)``) and ``target`` ``[2, 4]``: "tensor a is out [2, 10],
        tensor b is target [2, 4]; dimension 1 differs (10 vs 4)".

    Fix safety:
        Never edited automatically: which operand is wrong (the model's output size, the
        labels' encoding, a missing pooling step) is a modelling decision.

    Not handled:
        Operands that are not plain names recorded in the failing frame (``self.pos[:, :n]``,
        a call's result): the diagnosis names the dimension and sizes from the message only.
    """

    ID = "broadcast-size"
    TITLE = "Elementwise operation on tensors whose shapes do not broadcast"
    TAGS = frozenset({"shape"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    EVIDENCE = frozenset({"locals"})
    REMEDY = (
        "Make the two operands' shapes agree in the named dimension: print both shapes at the "
        "failing line, then fix the one that is wrong where it is made (the model's output size, "
        "one-hot or index labels for the loss, a pooling or stride that changed the spatial size "
        "of one branch of a residual, a mask built for another length); unsqueeze a dimension "
        "only where it is meant to be broadcast."
    )
    SIGNATURES = (
        signature(
            "RuntimeError",
            phrase("The size of tensor a") + r"\s+\((?P<a>\d+)\)\s+" + phrase("must match the size of tensor b")
            + r"\s+\((?P<b>\d+)\)\s+" + phrase("at non-singleton dimension") + r"\s+(?P<dim>\d+)",
        ),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        frame = failure.user_frame
        size_a, size_b, dim = int(match["a"]), int(match["b"]), int(match["dim"])
        told = f"dimension {dim} is {size_a} in tensor a and {size_b} in tensor b"
        pair = _operands(frame, evidence, sources, size_a, size_b, dim, failure.frames)
        if pair is None:
            return self.decline(
                f"two tensors of an elementwise operation do not broadcast: {told}",
                diagnosis=self.REMEDY, at=frame,
            )
        a, b = pair
        return self.decline(
            f"tensor a is {a.name} {shape_text(a.shape)} ({a.made}), tensor b is {b.name} "
            f"{shape_text(b.shape)} ({b.made}): {told}, and only a dimension of size 1 broadcasts",
            diagnosis=(
                f"Make {a.name} and {b.name} agree in dimension {dim}: fix the one that is wrong where it is "
                f"made ({a.made}; {b.made}); " + _hint(a.shape, b.shape, dim)
            ),
            at=frame,
        )


def _hint(a: Sequence[int], b: Sequence[int], dim: int) -> str:
    """The usual cause for a shape pair, in one phrase."""
    if len(a) != len(b) and min(len(a), len(b)) >= 1:
        shorter, longer = (a, b) if len(a) < len(b) else (b, a)
        if len(shorter) == 1 and len(longer) == 2 and shorter[0] == longer[0]:
            return (f"a [{shorter[0]}] vector aligns with the last dimension of [{longer[0]}, {longer[1]}]; "
                    "add the missing dimension where it is made (.unsqueeze(1)) or, for class labels, "
                    "use a classification loss that takes indices (cross_entropy)")
    if len(a) == len(b) == 4:
        return "for feature maps, a stride, pooling or padding changed one branch's spatial size"
    return "print both shapes to see which one is off"


def _caller(frames: Sequence[Frame], frame: Frame) -> Frame | None:
    """The user frame that called ``frame``."""
    index = next((i for i, f in enumerate(frames) if f == frame), None)
    if index is None:
        return None
    return next((f for f in reversed(frames[:index]) if f.user), None)


def _operands(
    frame: Frame | None, evidence: Evidence | None, sources: Sources, size_a: int, size_b: int, dim: int,
    failure_frames: Sequence[Frame] = (),
) -> tuple[Operand, Operand] | None:
    """The two recorded tensors of the failing line whose shapes give the message's sizes, in
    the order they appear (tensor a is the first operand)."""
    if frame is None:
        return None
    tensors = local_tensors(evidence, frame)
    src = source(sources, frame.file)
    names = _names_on_line(src, frame.line) if src else []
    candidates = [(n, shape_of(tensors[n])) for n in names if n in tensors and shape_of(tensors[n]) is not None]
    for i, (name_a, shape_a) in enumerate(candidates):
        for name_b, shape_b in candidates[i + 1:]:
            if shape_a is None or shape_b is None:
                continue
            if broadcast_dim(shape_a, shape_b, dim) == (size_a, size_b):
                assert src is not None
                caller = _caller(failure_frames, frame)
                return (Operand(name_a, shape_a, _made(src, name_a, frame, caller, sources)),
                        Operand(name_b, shape_b, _made(src, name_b, frame, caller, sources)))
    return None


def _names_on_line(src: Source, line: int) -> list[str]:
    """Names the statement at ``line`` reads, in source order, each once."""
    statements = [
        node for node, span in src.positions.items()
        if isinstance(node, cst.SimpleStatementLine | cst.Return | cst.Assign) and span.contains_line(line)
    ]
    if not statements:
        return []
    statement = min(statements, key=lambda node: src.positions[node].end_line - src.positions[node].line)
    seen: list[str] = []
    for name in reads(statement):
        if name not in seen:
            seen.append(name)
    return seen


def _made(src: Source, name: str, frame: Frame, caller: Frame | None = None, sources: Sources | None = None) -> str:
    """Where the value of ``name`` was made: its last binding in the frame's function, or, for a
    parameter, the argument the caller's line passed for it."""
    binding = last_binding(src, name, frame.line)
    if binding is not None:
        statement = binding.statement
        where = place(Frame(file=str(src.path), line=src.line(statement)))
        if isinstance(statement, cst.For):
            return f"a batch of the loop at {where}"
        return f"made at {where}: {src.code(statement)}"
    passed = _passed(src, name, frame, caller, sources) if caller is not None and sources is not None else None
    if passed is not None:
        return passed
    return f"an argument of {frame.function}()" if frame.function and frame.function != "<module>" else "made earlier"


def _passed(src: Source, name: str, frame: Frame, caller: Frame, sources: Sources) -> str | None:
    functions = [n for n in src.around(frame.line, cst.FunctionDef) if isinstance(n, cst.FunctionDef)]
    if not functions:
        return None
    params = [p.name.value for p in functions[0].params.params]
    if name not in params:
        return None
    caller_src = source(sources, caller.file)
    if caller_src is None:
        return None
    offset = 1 if params and params[0] == "self" else 0
    for node, span in caller_src.positions.items():
        if not isinstance(node, cst.Call) or not span.line <= caller.line <= span.end_line:
            continue
        positional = [a for a in node.args if a.keyword is None and not a.star]
        index = params.index(name) - offset
        keyword = next((a for a in node.args if a.keyword is not None and a.keyword.value == name), None)
        arg = keyword or (positional[index] if 0 <= index < len(positional) and len(positional) == len(params) - offset else None)
        if arg is None:
            continue
        where = place(caller)
        if isinstance(arg.value, cst.Name):
            return f"{frame.function}()'s {name}, passed as {arg.value.value} at {where} ({_made(caller_src, arg.value.value, caller)})"
        return f"{frame.function}()'s {name}, passed as {caller_src.code(arg.value)} at {where}"
    return None
