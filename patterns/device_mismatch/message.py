"""What a device-mismatch message says: the two devices it names, in one spelling.
"""

from __future__ import annotations

import re

DEVICE = r"(?:cpu|cuda|mps|xpu|hpu|npu|meta)(?::\d+)?"


SAME_DEVICE = r"Expected all tensors to be on the same device, but "


def normalise_device(text: str) -> str:
    """``cpu``, ``cuda``, ``cuda:1``... from any spelling a device-mismatch message uses."""
    text = text.strip()
    if text.startswith(("torch.cuda.", "CUDA")):
        return "cuda"
    if text.startswith(("torch.", "CPU")):
        return "cpu"
    lower = text.lower()
    if lower.startswith("gpu"):
        index = lower[3:].strip()
        return f"cuda:{index}" if index else "cuda"
    return lower


def message_devices(match: re.Match[str]) -> tuple[str, str] | None:
    """The two devices a message names (for a convolution: the input's, then the weight's)."""
    groups = match.groupdict()
    for first, second in (("input_type", "weight_type"), ("device_a", "device_b")):
        if groups.get(first) and groups.get(second):
            return normalise_device(groups[first]), normalise_device(groups[second])
    return None


def same_device(a: str, b: str) -> bool:
    """``cuda`` and ``cuda:0`` are the same device for this purpose; ``cuda:0`` and ``cuda:1`` not."""
    kind_a, _, index_a = a.partition(":")
    kind_b, _, index_b = b.partition(":")
    return kind_a == kind_b and (not index_a or not index_b or index_a == index_b)
