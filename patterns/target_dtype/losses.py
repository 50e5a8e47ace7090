"""The loss call the failure ran: which loss it is (one that takes class indices, probabilities
or float targets) and where its target argument is.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    Source,
    last_binding,
    loss_call_at,
    loss_name,
    place,
)
from repairbot.evidence import Scope
from repairbot.torch_semantics import is_loss_name
from repairbot.types import Failure, Frame, Span

# Losses that take class indices (int64), by the names their calls and torch frames use.
INDEX_LOSSES = frozenset({
    "cross_entropy", "CrossEntropyLoss", "nll_loss", "NLLLoss", "nll_loss2d", "NLLLoss2d",
    "nll_loss_nd", "multi_margin_loss", "MultiMarginLoss",
})


# Take class probabilities of the input's shape as well (torch 1.10+).
PROBABILITY_LOSSES = frozenset({"cross_entropy", "CrossEntropyLoss"})


# Takes class indices too, but as (N, C) rows padded with -1: a float (N, C) target there is
# almost always a multi-hot vector meant for another loss.
MULTILABEL_MARGIN = frozenset({"multilabel_margin_loss", "MultiLabelMarginLoss"})


# Losses that take float targets (probabilities, values) and refuse integer ones.
FLOAT_TARGET_LOSSES = frozenset({
    "binary_cross_entropy", "BCELoss", "binary_cross_entropy_with_logits", "BCEWithLogitsLoss",
    "huber_loss", "HuberLoss", "kl_div", "KLDivLoss",
})


def remedy_text(want: str, code: str | None) -> str:
    what = f"`{code}`" if code else "the targets"
    if want == "long":
        return f"pass the class indices as int64: {what}.long() at the loss call (or dtype=torch.long where they are made)"
    return f"pass the targets as floats: {what}.float() at the loss call"


@dataclass(frozen=True)
class LossCall:
    """The loss call the failure ran, what kind of loss it is, and where its target is."""

    call: cst.Call
    span: Span
    name: str | None  # cross_entropy, CrossEntropyLoss, BCELoss...; None when it cannot be told
    statement_line: int  # the line of the statement that makes the call

    @classmethod
    def find(cls, src: Source, frame: Frame, failure: Failure, scope: Scope) -> LossCall | str:
        where = place(frame)
        call = _call_at_frame(src, frame, scope)
        if call is None:
            return f"no single call is traced at {where}"
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
            # raised in backward(): the loss is the statement that made the tensor backward() is called on
            target = call.func.value
            bound = last_binding(src, target.value, frame.line) if isinstance(target, cst.Name) else None
            value = bound.value if bound is not None else None
            if not isinstance(value, cst.Call):
                return f"the loss that {where} calls backward() on is not made by a loss call before it"
            call = value
        span = src.positions[call]
        name = loss_name(call, src.imports, scope) or _torch_loss_frame(failure, frame)
        return cls(call, span, name, span.line)


def _call_at_frame(src: Source, frame: Frame, scope: Scope) -> cst.Call | None:
    located = loss_call_at(src.wrapper, src.imports, scope, frame)
    return located.node if located is not None and isinstance(located.node, cst.Call) else None


def _torch_loss_frame(failure: Failure, frame: Frame) -> str | None:
    """The torch loss function the user's call went into, from the frames below it."""
    frames = list(failure.frames)
    if frame not in frames:
        return None
    for deeper in frames[frames.index(frame) + 1 :]:
        if deeper.user:
            return None
        if is_loss_name(deeper.function):
            return deeper.function
    return None
