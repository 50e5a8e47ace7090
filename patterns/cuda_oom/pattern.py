"""cuda-oom: the GPU ran out of memory."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    Source,
    frame_at,
    grad_off_around,
    local_tensors,
    numel,
    place,
    place_in,
    recorded_local,
    source,
    tensor_text,
    tracks_grad,
)
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

_SIZE = r"[\d.]+ (?:[KMGTP]i?B|bytes|B)"
# The numbers of the message, in each wording since 1.x.
_NUMBERS = (
    re.compile(rf"Tried to allocate (?P<requested>{_SIZE})"),
    re.compile(rf"\(GPU (?P<gpu>\d+); (?P<total>{_SIZE}) total capacity; (?P<allocated>{_SIZE}) already allocated; (?P<free>{_SIZE}) free"),
    re.compile(rf"; (?P<reserved>{_SIZE}) (?:reserved in total by PyTorch|cached)"),
    re.compile(rf"GPU (?P<gpu>\d+) has a total capac(?:i|)ty of (?P<total>{_SIZE}) of which (?P<free>{_SIZE}) is free"),
    re.compile(rf"this process has (?P<process>{_SIZE}) memory in use"),
    re.compile(rf"Of the allocated memory (?P<allocated>{_SIZE}) is allocated by PyTorch, and (?P<unallocated>{_SIZE}) is reserved by PyTorch but unallocated"),
)
_UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}


def _bytes(size: str | None) -> float | None:
    if not size:
        return None
    number, _, unit = size.partition(" ")
    try:
        return float(number) * _UNITS.get(unit, 1)
    except ValueError:
        return None


def numbers(message: str) -> dict[str, str]:
    """The sizes an out-of-memory message states: requested, total, free, allocated, ..."""
    found: dict[str, str] = {}
    for pattern in _NUMBERS:
        hit = pattern.search(message)
        if hit is not None:
            found.update({k: v for k, v in hit.groupdict().items() if v and k not in found})
    return found


@dataclass(frozen=True)
class Leak:
    """A statement that keeps tensors with their graphs alive across steps."""

    at: Frame
    reason: str
    remedy: str


class CudaOom(Pattern):
    """Explains a CUDA out-of-memory error with the numbers, and spots the usual leaks.

    What it fixes:
        Diagnoses (never edits) ``CUDA out of memory``: a batch, model or activation too big
        for the GPU, memory that grows step after step because loss tensors (and their
        graphs) are accumulated, evaluation that builds graphs without ``torch.no_grad()``,
        and fragmentation of PyTorch's cache.

    Why it fails:
        ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a
        total capacity of 23.68 GiB of which 1.10 GiB is free. ...`` (2.5+; 2.1 wrote
        ``capacty``; 1.13/2.0 ``torch.cuda.OutOfMemoryError`` with ``(GPU 0; X total capacity;
        Y already allocated; Z free; W reserved in total by PyTorch)``; 1.x a ``RuntimeError``
        with ``... cached)``; also ``CUDA error: out of memory`` and 0.4's ``cuda runtime error
        (2) : out of memory``). The diagnosis quotes the requested and free sizes, names the
        largest tensor of the failing frame, and reads the failing function for a running
        total of loss tensors or a forward pass outside ``no_grad`` that never calls backward.

    Example:
        ``epoch_loss += loss`` in the training loop keeps every step's graph on the GPU:
        diagnosed at that line, with ``epoch_loss += loss.item()`` as the remedy.

    Fix safety:
        Never edited automatically: a smaller batch changes the optimisation, gradient
        accumulation and mixed precision change the training code, and the harness runs with
        a small batch, so an out-of-memory error at the script's own batch size is often not
        even reproduced by the checking runs.

    Not handled:
        Memory held by other processes on the GPU, and leaks through containers the trace
        does not describe (a dict of tensors kept on the model); the diagnosis then gives the
        numbers and the standard remedies.
    """

    ID = "cuda-oom"
    TITLE = "CUDA out of memory"
    TAGS = frozenset({"device", "memory"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    EVIDENCE = frozenset({"locals", "limits"})
    REMEDY = (
        "Use less GPU memory per step: a smaller batch (with gradient accumulation to keep the "
        "effective batch), mixed precision (torch.autocast), torch.no_grad() around evaluation, "
        "`total += loss.item()` instead of accumulating loss tensors; for fragmentation (much "
        "memory reserved but unallocated) set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
    )
    SIGNATURES = (
        signature(
            ("OutOfMemoryError", "RuntimeError"),
            rf"(?P<backend>CUDA|HIP) out of memory\. Tried to allocate (?P<requested>{_SIZE})",
        ),
        signature(("OutOfMemoryError", "RuntimeError", "AcceleratorError"), r"CUDA error: ?out of memory"),
        signature("RuntimeError", r"cuda runtime error ?\(2\) ?: ?out of memory"),
        signature("RuntimeError", r"(?:CUDA|HIP) out of memory"),
        # torch.cuda.OutOfMemoryError (1.13+) / torch.OutOfMemoryError (2.5+), whatever it says
        signature("OutOfMemoryError", r""),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        sizes = numbers(failure.message)
        stated = _stated(sizes)
        frame = failure.user_frame
        if frame is None:
            return self.decline(f"the GPU ran out of memory{stated}", diagnosis=self.REMEDY + _fragmentation(sizes))
        leak = _leak(failure, evidence, sources)
        if leak is not None:
            return self.decline(
                f"the GPU ran out of memory at {place(frame)}{stated}; {leak.reason}",
                diagnosis=leak.remedy + _fragmentation(sizes),
                at=leak.at,
            )
        tensors = sorted(local_tensors(evidence, frame).items(), key=lambda item: numel(item[1]), reverse=True)
        largest = f"; the largest tensor there is `{tensors[0][0]}` ({tensor_text(tensors[0][1])})" if tensors else ""
        forced = evidence.forced if evidence else ()
        small = (
            f" even with the batch size forced down ({'; '.join(forced)})" if forced else ""
        )
        remedy = (
            "Memory runs out even at a tiny batch: the model or one sample is too big for this GPU; use "
            "mixed precision (torch.autocast), activation checkpointing, or a smaller input size."
            if forced else self.REMEDY
        )
        return self.decline(
            f"the GPU ran out of memory at {place(frame)}{small}{stated}{largest}",
            diagnosis=remedy + _fragmentation(sizes),
            at=frame,
        )


def _stated(sizes: Mapping[str, str]) -> str:
    parts = []
    if "requested" in sizes:
        parts.append(f"it needed {sizes['requested']} more")
    if "free" in sizes:
        parts.append(f"{sizes['free']} were free")
    if "total" in sizes:
        parts.append(f"of {sizes['total']} on GPU {sizes.get('gpu', '0')}")
    if "process" in sizes:
        parts.append(f"this process held {sizes['process']}")
    return " (" + ", ".join(parts) + ")" if parts else ""


def _fragmentation(sizes: Mapping[str, str]) -> str:
    """Advice on the allocator when the message shows more cached-but-unused memory than was asked for."""
    unused = _bytes(sizes.get("unallocated"))
    requested = _bytes(sizes.get("requested"))
    if unused is not None and requested is not None and unused >= requested:
        return (
            f" {sizes['unallocated']} is reserved by PyTorch but unallocated, more than the "
            f"{sizes['requested']} requested: the cache is fragmented, so also set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
        )
    return ""


def _leak(failure: Failure, evidence: Evidence | None, sources: Sources) -> Leak | None:
    """Tensors kept with their graphs across steps, in any function of the failing stack; else an
    evaluation forward outside no_grad in the function that drives the model."""
    user_frames = [frame for frame in reversed(failure.frames) if frame.user]
    driver_checked = False
    for frame in user_frames:
        src = source(sources, frame.file)
        if src is None:
            continue
        held = _held_across_steps(src, frame, evidence)
        if held is not None:
            return held
        if not driver_checked and frame.function not in ("forward", "__call__", "_call_impl"):
            # the innermost frame that is not a model's forward: the loop that runs the model
            driver_checked = True
            functions = src.around(frame.line, cst.FunctionDef)
            if functions and isinstance(functions[0], cst.FunctionDef):
                evaluation = _evaluation_without_no_grad(src, frame, evidence, functions[0])
                if evaluation is not None:
                    return evaluation
    return None


def _held_across_steps(src: Source, frame: Frame, evidence: Evidence | None) -> Leak | None:
    """``total += loss`` or ``losses.append(loss)`` of a tensor requiring grad, in the frame's function."""
    functions = src.around(frame.line, cst.FunctionDef)
    scope = src.positions[functions[0]] if functions else None
    inside = [
        (node, span) for node, span in src.positions.items()
        if scope is None or scope.contains_line(span.line)
    ]
    for node, span in sorted(inside, key=lambda pair: pair[1].line):
        held = _held_tensor(node)
        if held is None:
            continue
        total, added = held
        value = recorded_local(evidence, frame, total)
        grows = tracks_grad(value)
        appended = isinstance(node, cst.Call) and tracks_grad(recorded_local(evidence, frame, added))
        if grows or appended:
            what = f"`{total}` ({tensor_text(value)})" if value is not None and grows else f"`{total}`"
            return Leak(
                frame_at(str(src.path), span.line),
                f"{what} collects `{added}` at {place_in(src.path, span.line)} with its autograd graph, so "
                "every step's graph stays in GPU memory and usage grows until it runs out",
                f"Keep numbers, not graphs: `{total} += {added}.item()` (or `.append({added}.item())`, "
                f"or `{added}.detach()`) at {place_in(src.path, span.line)}.",
            )
    return None


def _held_tensor(node: cst.CSTNode) -> tuple[str, str] | None:
    """``total += loss`` -> (total, loss); ``losses.append(loss)`` -> (losses, loss)."""
    if (
        isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign)
        and isinstance(node.target, cst.Name) and isinstance(node.value, cst.Name)
    ):
        return node.target.value, node.value.value
    if (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append"
        and isinstance(node.func.value, cst.Name) and len(node.args) == 1 and isinstance(node.args[0].value, cst.Name)
    ):
        return node.func.value.value, node.args[0].value.value
    return None


def _evaluation_without_no_grad(
    src: Source, frame: Frame, evidence: Evidence | None, function: cst.FunctionDef
) -> Leak | None:
    """A function that runs the model, never calls backward(), and keeps autograd on."""
    span = src.positions[function]
    for node, where in src.positions.items():
        if span.contains_line(where.line) and isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and (
            node.func.attr.value in ("backward", "step")
        ):
            return None
    if grad_off_around(src, frame.line) is not None:
        return None
    graphs = [name for name, value in local_tensors(evidence, frame).items() if value.requires_grad]
    if not graphs:
        return None
    loops = [n for n in src.around(frame.line, cst.For, cst.While) if span.contains_line(src.line(n))]
    line = src.line(loops[-1]) if loops else frame.line
    return Leak(
        frame_at(str(src.path), line),
        f"`{function.name.value}` runs the model without ever calling backward(), yet autograd is on: "
        f"{', '.join(f'`{n}`' for n in graphs)} carry graphs that keep every activation alive",
        f"Wrap the evaluation in `with torch.no_grad():` (or decorate `{function.name.value}` with "
        f"@torch.no_grad()), starting at {place_in(src.path, line)}.",
    )
