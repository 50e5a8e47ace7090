"""cudnn-error: a cuDNN call failed, almost always for reasons of the machine rather than the code."""

from __future__ import annotations

import re

from repairbot.analysis import place, resolve_site, shape_text
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure

_CHECKS = (
    "rerun with CUDA_LAUNCH_BLOCKING=1 to see the operation that really fails (CUDA errors are "
    "reported late); set `torch.backends.cudnn.enabled = False` once to confirm cuDNN is the cause "
    "(slower, but the same maths); compare the driver, CUDA and cuDNN versions "
    "(`python -m torch.utils.collect_env`) and check free GPU memory (`nvidia-smi`)"
)
# What each status usually means, and the remedy that goes first.
_STATUS = {
    "CUDNN_STATUS_NOT_INITIALIZED": (
        "cuDNN could not start: usually the GPU had no memory left when cuDNN created its handle "
        "(another process, or this one), or the cuDNN library does not match the driver and CUDA build",
        "Free GPU memory (other processes, a smaller batch) and make sure the installed torch wheel's "
        "CUDA/cuDNN match the driver",
    ),
    "CUDNN_STATUS_ALLOC_FAILED": (
        "cuDNN could not allocate its workspace: an out-of-memory error in disguise",
        "Use less GPU memory (a smaller batch, mixed precision)",
    ),
    "CUDNN_STATUS_NOT_SUPPORTED": (
        "cuDNN does not support this call: a non-contiguous input, an unusual dtype or layout, or a "
        "batch beyond cuDNN's size limits",
        "Pass a contiguous input (`x.contiguous()`), a supported dtype, or a smaller batch",
    ),
    "CUDNN_STATUS_BAD_PARAM": (
        "cuDNN rejected the arguments: mixed dtypes (half and float), or a shape or layout it "
        "cannot take",
        "Give the layer inputs of its own dtype (or run under torch.autocast) and a standard layout",
    ),
    "CUDNN_STATUS_ARCH_MISMATCH": (
        "this GPU's architecture is not supported by the cuDNN build",
        "Install a torch build that supports this GPU",
    ),
}
_KERNEL_FAILED = (
    "a cuDNN kernel failed: usually an earlier asynchronous CUDA error (an out-of-range index), "
    "memory exhaustion, or a driver/cuDNN/GPU mismatch",
    "",
)
_NO_ALGORITHM = (
    "cuDNN found no algorithm for this operation: usually not enough GPU memory for its workspace, "
    "or a cuDNN library that does not match the torch build",
    "Use less GPU memory (a smaller batch) and check the cuDNN installation",
)


class CudnnError(Pattern):
    """Explains a failed cuDNN call and the checks that find its real cause.

    What it fixes:
        Diagnoses (never edits) cuDNN failures: ``CUDNN_STATUS_NOT_INITIALIZED``,
        ``EXECUTION_FAILED``, ``INTERNAL_ERROR``, ``MAPPING_ERROR``, ``NOT_SUPPORTED``,
        ``BAD_PARAM``, ``ALLOC_FAILED``, and cuDNN finding no algorithm or engine for a
        convolution. They come from the machine (driver, CUDA and cuDNN versions, GPU memory)
        or from an earlier CUDA error far more often than from the line that shows them.

    Why it fails:
        ``RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED`` (0.4 printed the status
        alone; ``Unable to find a valid cuDNN algorithm to run convolution`` and ``GET was
        unable to find an engine to execute this computation`` are the same family). CUDA
        runs asynchronously, so the failing line may be later than the operation that failed.
        The tracing run records the module whose forward raised (a Conv2d, an LSTM), where it
        was built and the input it received; the diagnosis names them with the status's usual
        causes.

    Example:
        ``CUDNN_STATUS_NOT_INITIALIZED`` at the first LSTM forward: "cuDNN could not start",
        with the checks: free GPU memory, matching driver and wheel, ``CUDA_LAUNCH_BLOCKING=1``,
        ``torch.backends.cudnn.enabled = False`` to confirm.

    Fix safety:
        Never edited automatically: the cause is almost never in the code, and turning cuDNN
        off in the script would hide the problem and slow training down.

    Not handled:
        The real cause itself (a driver to update, memory another process holds) is outside
        the project; other cuDNN frontend messages (neither a status code nor the "no valid
        algorithm"/"unable to find an engine" wording) are left unclassified.
    """

    ID = "cudnn-error"
    TITLE = "cuDNN call failed (environment or an earlier CUDA error)"
    TAGS = frozenset({"device", "environment"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    EVIDENCE = frozenset({"failing_module", "environment"})
    REMEDY = (
        "Usually the environment, not the code: rerun with CUDA_LAUNCH_BLOCKING=1 to find the "
        "operation that really fails, set torch.backends.cudnn.enabled = False once to confirm "
        "cuDNN is the cause, check that the driver, CUDA and cuDNN versions match the torch "
        "build, and that the GPU has free memory."
    )
    SIGNATURES = (
        signature(("RuntimeError", "AcceleratorError"), r"\b(?P<status>CUDNN_STATUS_[A-Z_]+)\b"),
        signature("RuntimeError", r"Unable to find a valid cuDNN algorithm to run convolution"),
        signature("RuntimeError", r"\b(?:GET|FIND) was unable to find an engine to execute this computation"),
        signature("RuntimeError", r"cuDNN version incompatibility"),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        status = match.groupdict().get("status")
        if status:
            meaning, first = _STATUS.get(status, _KERNEL_FAILED)
        elif "version incompatibility" in match.group(0):
            meaning, first = (
                "the cuDNN library found at run time is not the one torch was built against",
                "Install matching torch and cuDNN builds (or remove the other cuDNN from the library path)",
            )
        else:
            meaning, first = _NO_ALGORITHM
        name = status or "cuDNN"
        frame = failure.user_frame
        module = evidence.failing_module if evidence else None
        inside = ""
        if module and module.type:
            site = resolve_site(evidence, module.site)
            sizes = ", ".join(
                str(size) for size in (module.in_channels, module.out_channels, module.input_size, module.hidden_size)
                if size is not None
            )
            built = f" built at {place(site)}" if site else ""
            given = (
                f" on input {shape_text(module.input_shape)} {module.input_dtype or ''}".rstrip()
                if module.input_shape is not None else ""
            )
            inside = f" in the forward of {module.type}({sizes}){built}{given}"
        torch = evidence.environment.torch if evidence else None
        versions = f" (torch {torch})" if torch else ""
        where = f" at {place(frame)}" if frame else ""
        return self.decline(
            f"{name}{inside}{where}{versions}: {meaning}",
            diagnosis=f"{first}; then {_CHECKS}." if first else f"{_CHECKS[0].upper()}{_CHECKS[1:]}.",
            at=frame,
        )
