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
_COLLATE = re.compile(r"collate", re.IGNORECASE)


def _collating(failure: Failure) -> bool:
    """Whether the failure happened while a DataLoader collated a batch."""
    for frame in (*failure.frames, *failure.worker_frames):
        if _COLLATE.search(frame.function) or _COLLATE.search(frame.code or "") or frame.file.endswith("collate.py"):
            return True
    # an old worker re-raise carries the worker's traceback only as text
    return bool(re.search(r"\bdefault_collate\b|collate_fn\(", failure.message))


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
        frames show a collate function). The diagnosis reads the two shapes to tell
        variable-length sequences from images of different sizes or channel counts.

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
        at the user's collate function or ``__getitem__`` when the traceback shows one); a
        ``torch.cat`` size mismatch outside collation is another failure.
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
        found = super().match(failure)
        if found is not None or not _collating(failure):
            return found
        for sig in _WHILE_COLLATING:
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
        own_collate = self._own_collate(failure, frame)
        if own_collate:
            where = f"the collate function at {place(frame)} stacks them as they come"
            remedy += f" Do it in the collate function at {place(frame)}, or make __getitem__ return one size."
        elif frame.function == "__getitem__":
            where = f"the Dataset's __getitem__ at {place(frame)} returns them"
        else:
            where = f"the DataLoader iterated at {place(frame)} stacks them with its default collate"
        process = " (in a DataLoader worker process)" if failure.worker_frames else ""
        return self.decline(f"{what}, and {where}{process}", diagnosis=remedy, at=frame)

    @staticmethod
    def _own_collate(failure: Failure, frame: Frame) -> bool:
        """Whether the failing user frame is a collate function of the project."""
        frames = failure.worker_frames or failure.frames
        if frame not in frames:
            return False
        above = frames[: frames.index(frame)]
        return any(_COLLATE.search(f.code or "") or _COLLATE.search(f.function) for f in above) and not frame.file.endswith("collate.py")

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
