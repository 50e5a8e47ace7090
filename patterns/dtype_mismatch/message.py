"""What a dtype-mismatch message says: the dtypes it names, and which side each is on when the
message tells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from repairbot.analysis import (
    dtype_name,
)
from repairbot.types import Failure

FLOAT64 = "float64"


FLOAT32 = "float32"


_REDUCED = ("float16", "bfloat16")


# How messages spell a scalar type: Double, double, torch.float64, torch.cuda.DoubleTensor,
# CUDADoubleType, c10::Half, long int...
TYPE = r"[A-Za-z][\w.:]*"


C_TYPE = r"(?:unsigned |signed )?[\w:]+(?: int)?"


FLOATING = r"(?:Double|Float|Half|BFloat16|ComplexFloat|ComplexDouble)"


def _on_cuda(text: str) -> bool:
    return text.strip().startswith(("torch.cuda.", "CUDA"))


def is_reduced(dtype: str) -> bool:
    return dtype in _REDUCED or dtype.startswith("float8")


def claims(found: re.Match[str]) -> bool:
    """Not a device mismatch in the same words, and two different dtypes where the message names them."""
    groups = found.groupdict()
    if groups.get("input") and groups.get("weight") and _on_cuda(groups["input"]) != _on_cuda(groups["weight"]):
        return False  # Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)
    message = Message.of(found)
    return not message.complete or len(set(message.dtypes)) > 1


def in_torch_layer(failure: Failure) -> bool:
    """Whether the innermost ``forward`` of the failure is a torch layer's (not the project's)."""
    for frame in reversed(failure.frames):
        if frame.function == "forward":
            return not frame.user
    return False


@dataclass(frozen=True)
class Message:
    """The dtypes a message names, and which side each is on when the message says so."""

    dtypes: tuple[str, ...]
    input: str | None = None
    parameters: str | None = None
    complete: bool = True  # False when the message names fewer than the two dtypes

    @classmethod
    def of(cls, match: re.Match[str]) -> Message:
        groups = match.groupdict()
        if groups.get("input") and groups.get("weight"):
            given, weight = dtype_name(groups["input"]), dtype_name(groups["weight"])
            return cls(tuple(d for d in (given, weight) if d), given, weight, None not in (given, weight))
        if groups.get("given"):
            # "expect parameter to have scalar type of Float": the input is Float, the parameters are not
            given = dtype_name(groups["given"])
            return cls((given,) if given else (), given, None, False)
        if groups.get("listed"):
            named = [dtype_name(word) for word in re.findall(r"[A-Za-z][\w:]*", groups["listed"])]
            found = tuple(dict.fromkeys(d for d in named if d))
            return cls(found, complete=len(found) > 1)
        pair = (dtype_name(groups.get("first")), dtype_name(groups.get("second")))
        return cls(tuple(d for d in pair if d), complete=None not in pair)
