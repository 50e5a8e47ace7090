"""What the failure and the probe say: the tensor the error names as modified (``Modified``), and
the recorded in-place ops and saved tensors that match it (the culprit candidates).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repairbot.analysis import shape_numel
from repairbot.evidence import Evidence, frame_from_json
from repairbot.types import Frame

from . import probe
from .source import location


def _records(evidence: Evidence) -> tuple[Mapping[str, Any], ...]:
    records = evidence.probe_records.get(probe.EVIDENCE_KEY)
    return tuple(r for r in records if isinstance(r, Mapping)) if isinstance(records, list | tuple) else ()


def inplace_ops(evidence: Evidence) -> tuple[Mapping[str, Any], ...]:
    """The probe's records (probe.py): op, shape, dtype, producer, leaf, version, storage,
    site, module, module_site of each in-place op since the last successful backward()."""
    return tuple(r for r in _records(evidence) if "op" in r)


def changed_saved(evidence: Evidence) -> tuple[Mapping[str, Any], ...]:
    """The tensors the failing backward() found changed, as the probe read them from the
    graph: node (the autograd node that saved it), shape, version, storage, forward (the user
    frames of the forward call that saved it, innermost last)."""
    found = [r.get("saved") for r in _records(evidence) if "saved" in r]
    last = found[-1] if found else None
    return tuple(s for s in last if isinstance(s, Mapping)) if isinstance(last, list) else ()


MODIFIED = (
    r"one of the variables needed for gradient computation has been modified by an inplace operation"
)


# 1.1 and later name the tensor; a tensor without autograd history (an input, a buffer, a
# parameter changed under no_grad) has no "which is output N of ..." part.
MODIFIED_DETAILS = (
    MODIFIED + r": \[(?P<tensor_type>[\w.]+) \[(?P<shape>[\d, ]*)\]\]"
    r"(?:, which is output (?P<output>\d+) of (?P<producer>[\w:]+),)?"
    r" is at version (?P<version>\d+); expected version (?P<expected>\d+) instead"
)


LEAF = (
    r"(?:a (?P<view>view) of )?a (?P<leaf>leaf Variable) that requires grad is being used in an "
    r"in-place operation"
)


_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ComplexFloatTensor": "complex64",
    "ComplexDoubleTensor": "complex128",
}


_NODE_NAME = re.compile(r"(?:\w+::)*(?P<base>\w+?)(?:Backward)?(?P<overload>\d*)")


@dataclass(frozen=True)
class Modified:
    """The tensor backward() found changed: ``[torch.FloatTensor [2, 3]], which is output 0 of Sigmoid``."""

    tensor_type: str
    shape: tuple[int, ...]
    producer: str | None
    version: int
    expected: int

    @classmethod
    def from_match(cls, match: re.Match[str]) -> Modified | None:
        groups = match.groupdict()
        if groups.get("shape") is None or groups.get("version") is None:
            return None
        shape = tuple(int(part) for part in groups["shape"].replace(" ", "").split(",") if part)
        return cls(
            tensor_type=groups["tensor_type"], shape=shape, producer=groups.get("producer"),
            version=int(groups["version"]), expected=int(groups["expected"]),
        )

    @property
    def dtype(self) -> str | None:
        return _DTYPES.get(self.tensor_type.rsplit(".", 1)[-1])

    @property
    def shape_text(self) -> str:
        return f"[{', '.join(map(str, self.shape))}]"

    @property
    def what(self) -> str:
        """``the output of Sigmoid ([2, 3])``; ``a [2, 3] tensor without autograd history``"""
        if self.producer is None:
            return f"a {self.shape_text} tensor without autograd history"
        return f"the output of {node_name(self.producer)} ({self.shape_text})"

    def to_json(self) -> dict[str, Any]:
        return {
            "tensor_type": self.tensor_type, "shape": list(self.shape), "producer": self.producer,
            "version": self.version, "expected_version": self.expected,
        }


def node_name(name: str) -> str:
    """An autograd node's name as torch 2.13 prints it: ``SigmoidBackward0``, ``SigmoidBackward`` -> ``Sigmoid``.

    ``LeakyReluBackward1`` (the in-place overload's node) stays apart: ``LeakyRelu1``.
    """
    found = _NODE_NAME.fullmatch(name)
    if found is None:
        return name
    overload = found["overload"]
    return found["base"] + ("" if overload in ("", "0") else overload)


def op_matches(op: Mapping[str, Any], modified: Modified) -> bool:
    """Whether a recorded in-place op was on a tensor like the one backward() found changed."""
    shape = op.get("shape")
    if shape is None or tuple(shape) != modified.shape:
        return False
    producer = op.get("producer")
    if modified.producer is None or producer is None or node_name(producer) != node_name(modified.producer):
        return False
    dtype = modified.dtype
    return dtype is None or not op.get("dtype") or op["dtype"] == dtype


# Autograd nodes of view operations: their output shares storage and version counter with the
# input's base (an in-place op on a view of a view regenerates it as AsStrided).
_VIEW_NODES = frozenset({
    "AsStrided", "View", "UnsafeView", "Reshape", "Transpose", "T", "Permute", "Select", "Slice",
    "Expand", "Squeeze", "Unsqueeze", "Split", "SplitWithSizes", "Unbind", "Narrow", "Diagonal",
    "Alias", "Unfold", "Unflatten", "ViewAsReal", "ViewAsComplex",
})


def is_view_node(name: object) -> bool:
    found = _NODE_NAME.fullmatch(name) if isinstance(name, str) else None
    return found is not None and found["base"] in _VIEW_NODES


def view_culprits(ops: Sequence[Mapping[str, Any]], modified: Modified) -> list[Mapping[str, Any]]:
    """In-place ops that can have changed the saved tensor through another view of its base:
    the saved tensor is a view, the op's target a view with as many elements and the same
    dtype, and the shared version counter stood at the saved version when the op ran (the
    record is taken before the op). The base itself is not traced: an op on the base, or on a
    view of another size, is not linked."""
    if not is_view_node(modified.producer):
        return []
    dtype = modified.dtype
    found = []
    for op in ops:
        shape = op.get("shape")
        if not isinstance(shape, Sequence) or not all(isinstance(n, int) for n in shape):
            continue
        if (
            is_view_node(op.get("producer")) and op.get("version") == modified.expected
            and shape_numel(shape) == shape_numel(modified.shape) and (dtype is None or not op.get("dtype") or op["dtype"] == dtype)
        ):
            found.append(op)
    return found


def saved_tensors_like(saved: Sequence[Mapping[str, Any]], modified: Modified) -> list[Mapping[str, Any]]:
    """The changed saved tensors that are the one the message names (its shape and version)."""
    return [
        s for s in saved
        if isinstance(s.get("shape"), list) and tuple(s["shape"]) == modified.shape and s.get("version") == modified.version
    ]


def storage_culprits(
    ops: Sequence[Mapping[str, Any]], saved: Sequence[Mapping[str, Any]], modified: Modified
) -> list[Mapping[str, Any]]:
    """In-place ops on the saved tensor itself or on any tensor that shares its storage (a
    view of it, its base, another view of the base: they share one version counter), made
    at or after the version it was saved at."""
    storages = {s.get("storage") for s in saved if isinstance(s.get("storage"), int)}
    return [
        op for op in ops
        if isinstance(op.get("storage"), int) and op["storage"] in storages
        and isinstance(op.get("version"), int) and op["version"] >= modified.expected
    ]


def saved_where(saved: Sequence[Mapping[str, Any]]) -> tuple[str, Frame | None]:
    """``Addmm (at train.py:18, `h += self.ffn(h)`)``: the autograd node that saved the tensor
    and the innermost user frame of its forward call (kept by anomaly mode), and that frame."""
    for record in saved:
        forward = record.get("forward")
        frames = [frame_from_json(f) for f in forward if isinstance(f, Mapping)] if isinstance(forward, list) else []
        if frames:
            frame = frames[-1]
            return f"{node_name(str(record.get('node')))} (at {location(frame)}, `{frame.code or '?'}`)", frame
    return (node_name(str(saved[0].get("node"))), None) if saved else ("", None)
