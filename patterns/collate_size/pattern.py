"""collate-size: a DataLoader batch made of samples of different sizes."""

from __future__ import annotations

import re
from typing import Any

from repairbot.analysis import place, shape_text
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

# Texts that mean "these tensors differ in size" only when they come out of collation: the
# same words from a torch.cat in a model are another bug.
_WHILE_COLLATING = (
    # 0.4 to 1.4: default_collate's torch.stack went through cat
    signature(
        "RuntimeError",
        r"Sizes of tensors must match except in dimension 0\. Got (?P<size_a>\d+) and (?P<size_b>\d+) in dimension (?P<dim>\d+)",
    ),
    # 1.5 and later, from a torch.cat in a collate function
    signature(
        "RuntimeError",
        r"Sizes of tensors must match except in dimension 0\. Expected size (?P<size_a>\d+) but got size (?P<size_b>\d+) for tensor number (?P<entry>\d+)",
    ),
    # 0.2/0.3
    signature("RuntimeError", r"inconsistent tensor sizes"),
    # default_collate in a worker process stacks into shared memory sized for equal samples
    signature("RuntimeError", r"Trying to resize storage that is not resizable"),
)
# A call of a collate function on a line of torch.utils.data: the fetcher's
# ``return self.collate_fn(data)``, 1.0's worker ``samples = collate_fn([dataset[i] ...])``.
_CALLS_COLLATE = re.compile(r"\bcollate(?:_fn)?\s*\(")


def _torch_data(frame: Frame) -> bool:
    return "torch/utils/data/" in frame.file.replace("\\", "/")


def _in_default_collate(frame: Frame) -> bool:
    # _utils/collate.py since 1.1; before, default_collate lived in dataloader.py
    return _torch_data(frame) and (
        frame.file.replace("\\", "/").endswith("/collate.py") or frame.function == "default_collate"
    )


def _collate_entry(frames: tuple[Frame, ...]) -> int | None:
    """The index of the innermost frame where a collation of a batch starts: torch's default
    collate, or a line of torch.utils.data calling the DataLoader's collate_fn; None when the
    exception was not raised under one, or was raised in a Dataset's ``__getitem__`` that the
    same line of the fetcher called (a stack there joins the pieces of one sample, not a batch)."""
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        calls = _CALLS_COLLATE.search(frame.code) if frame.code is not None else frame.file.endswith("fetch.py")
        if _in_default_collate(frame) or (_torch_data(frame) and calls):
            if any(f.function == "__getitem__" for f in frames[index + 1 :]):
                return None
            return index
    return None


def _collation_frames(failure: Failure) -> tuple[Frame, ...] | None:
    """The frames (the worker's where a worker raised) through which a DataLoader's collate (or
    a direct call of torch's default collate) raised the failure, None when none did: a
    ``torch.stack`` of the script's own, in a training loop or a ``__getitem__``, is no collate
    problem even where the script has a DataLoader."""
    frames = failure.worker_frames or failure.frames
    if _collate_entry(frames) is not None:
        return frames
    # an old worker re-raise carries the worker's traceback only as text
    if not failure.worker_frames and re.search(r"\bdefault_collate\b|collate_fn\(", failure.message):
        return ()
    return None


def _sizes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        return None


class CollateSize(Pattern):
    """Explains a batch that cannot be stacked because its samples differ in size.

    What it fixes:
        Diagnoses (never edits) a DataLoader whose Dataset returns tensors of different sizes
        (sentences of different lengths, images of different resolutions, a grayscale image
        among colour ones) while the collate function stacks them into one batch tensor.

    Why it fails:
        ``RuntimeError: stack expects each tensor to be equal size, but got [3] at entry 0 and
        [4] at entry 1``; in a worker process it is re-raised as ``Caught RuntimeError in
        DataLoader worker process 0`` with the worker's traceback in the message, and the
        default collate in a worker may say ``Trying to resize storage that is not resizable``
        instead. Releases up to 1.4 said ``invalid argument 0: Sizes of tensors must match
        except in dimension 0. Got 35 and 34 in dimension 1`` (those texts count only when the
        frames show a collate function). Every one of these texts counts only when the
        traceback runs through a collation: torch's default collate, or the collate_fn the
        DataLoader's fetcher calls. The diagnosis reads the two shapes to tell variable-length
        sequences from images of different sizes or channel counts.

    Example:
        Token sequences of lengths 5 and 6 with the default collate: diagnosed at the
        ``for tokens, labels in loader:`` line, with the remedy to pad them in a ``collate_fn``
        (``torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)``).

    Fix safety:
        Never edited automatically: padding (with which value, and a mask or lengths for the
        model), resizing, cropping and bucketing change the data the model sees; the choice
        belongs to the user.

    Not handled:
        The Dataset class is not traced from the loop (the diagnosis points at the loop, or
        at the user's collate function when the traceback shows one). A ``torch.stack`` or
        ``torch.cat`` of the script's own (in a training loop, after it, or in a Dataset's
        ``__getitem__`` joining the pieces of one sample) is not recognised, even in a script
        with a DataLoader: padding the batches would not reach it.
    """

    ID = "collate-size"
    TITLE = "DataLoader batch of samples with different sizes"
    TAGS = frozenset({"data", "shape"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    # A script may batch variable-size samples one at a time (batch_size=1) on purpose: the
    # forced batch size can cause this failure, so it is confirmed first.
    BATCH_INVARIANT = False
    EVIDENCE = frozenset({"frames"})
    REMEDY = (
        "Make every sample of a batch the same size: pad variable-length sequences in a "
        "collate_fn (torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)), resize or crop "
        "images to one size in the Dataset's transform, or convert every image to the same "
        "number of channels in __getitem__."
    )
    SIGNATURES = (
        signature(
            "RuntimeError",
            r"stack expects each tensor to be equal size, but got \[(?P<first>[^\]]*)\] at entry (?P<first_entry>\d+)"
            r" and \[(?P<other>[^\]]*)\] at entry (?P<other_entry>\d+)",
        ),
        # default_collate on samples that are lists (or tuples) of different lengths
        signature("RuntimeError", r"each element in list of batch should be of equal size"),
    )

    def match(self, failure: Failure) -> re.Match[str] | None:
        # The words alone do not tell a batch from any other stack: `classify` and `doctor` give
        # this pattern's remedy from the match alone, so a stack the frames do not show under a
        # collate is not recognised at all.
        if _collation_frames(failure) is None:
            return None
        for sig in (*self.SIGNATURES, *_WHILE_COLLATING):
            found = sig.match(failure.exc_type, failure.message)
            if found is not None:
                return found
        return None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        groups = {**match.groupdict(), "text": match.group(0)}
        first, other = _sizes(groups.get("first")), _sizes(groups.get("other"))
        what, remedy = self._explain(first, other, groups)
        worker_frame = next((f for f in reversed(failure.worker_frames) if f.user), None)
        frame = worker_frame or failure.user_frame
        if frame is None:
            return self.decline(f"{what}; no frame of the project's code shows where", diagnosis=remedy)
        frames = _collation_frames(failure) or ()
        entry = _collate_entry(frames)
        # the DataLoader's own line that called its collate_fn (the fetcher), if one did
        loader = next(
            (i for i in range(entry if entry is not None else -1, -1, -1)
             if _torch_data(frames[i]) and not _in_default_collate(frames[i])),
            None,
        )
        if loader is not None and frame in frames[loader + 1 :]:
            where = f"the collate function at {place(frame)} stacks them as they come"
            remedy += f" Do it in the collate function at {place(frame)}, or make __getitem__ return one size."
        elif loader is None and entry is not None:
            where = f"the default collate called at {place(frame)} stacks them"
        else:
            default = loader is None or (loader + 1 < len(frames) and _in_default_collate(frames[loader + 1]))
            collate = "its default collate" if default else "its collate_fn"
            where = f"the DataLoader iterated at {place(frame)} stacks them with {collate}"
        process = " (in a DataLoader worker process)" if failure.worker_frames else ""
        return self.decline(f"{what}, and {where}{process}", diagnosis=remedy, at=frame)

    @staticmethod
    def _explain(first: list[int] | None, other: list[int] | None, groups: dict[str, str | Any]) -> tuple[str, str]:
        """What differs between the samples, and the remedy that fits it."""
        pad = (
            "Pad the samples of a batch to a common length in a collate_fn: "
            "`torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=PAD)` (return the "
            "lengths or a mask too), or truncate/pad every sample to a fixed length in __getitem__."
        )
        if first is None or other is None:
            if groups.get("size_a") and groups.get("size_b"):
                dim = f" in dimension {groups['dim']}" if groups.get("dim") else ""
                return (
                    f"the DataLoader's samples differ in size ({groups['size_a']} vs {groups['size_b']}{dim})",
                    f"{pad} For images: resize or crop to one size in the Dataset's transform.",
                )
            if "resize storage" in (groups.get("text") or ""):
                return (
                    "the samples have different numbers of elements: the default collate in a worker "
                    "sizes the shared batch from the first sample and cannot fit the others",
                    CollateSize.REMEDY,
                )
            return (
                "the DataLoader's samples differ in size, so they cannot be stacked into one batch",
                CollateSize.REMEDY,
            )
        entry = groups.get("other_entry") or "1"
        shapes = f"{shape_text(first)} (sample 0 of the batch) and {shape_text(other)} (sample {entry})"
        if len(first) != len(other):
            return (
                f"the samples have different numbers of dimensions, {shapes}: a grayscale (or "
                "RGBA) image among colour ones, or a sample missing a channel dimension",
                "Give every sample the same layout in __getitem__: convert images to one mode "
                "(`Image.open(path).convert('RGB')`) or add the missing channel dimension "
                "(`x.unsqueeze(0).expand(3, -1, -1)` for a grayscale tensor).",
            )
        differing = [i for i, (a, b) in enumerate(zip(first, other, strict=True)) if a != b]
        if len(first) == 1:
            return f"the samples are sequences of different lengths, {shapes}", pad
        if len(first) >= 3 and differing and min(differing) >= len(first) - 2:
            return (
                f"the samples are images of different sizes, {shapes}",
                "Resize or crop every image to one size in the Dataset's transform "
                "(`transforms.Resize((H, W))`, `RandomCrop`), or pad them to the largest size "
                "of the batch in a collate_fn.",
            )
        dims = ", ".join(str(d) for d in differing)
        return f"the samples differ in dimension {dims}, {shapes}", pad
