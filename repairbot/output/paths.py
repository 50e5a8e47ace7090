"""The user's paths as every report shows them, made relative to the report's root in one place.

Runs and patterns speak of absolute paths; the reports (text, JSON, Markdown, SARIF) show them
relative to the repository's top folder, in POSIX form, and a path outside it as it was given.
The loop and the API make each path of a report relative through ``ReportPaths``; the renderers
in repairbot/output/ take the paths as they find them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from repairbot.sources import relative_path
from repairbot.types import Decline, Failure, Frame, HarnessFault

_LOCATION = re.compile(r".+:\d+")  # an absolute file:line, as the harness records places


@dataclass(frozen=True)
class ReportPaths:
    root: Path  # the folder the report's paths are relative to

    def file(self, path: str | Path) -> str:
        """One file as the report names it."""
        return relative_path(self.root, path)

    def location(self, where: object) -> str | None:
        """A ``file:line`` string with its file as the report names it; None for anything else."""
        if not isinstance(where, str) or ":" not in where:
            return None
        file, _, line = where.rpartition(":")
        return f"{self.file(file)}:{line}"

    def failure(self, failure: Failure) -> Failure:
        """The failure with its frames in the project's files relative (other frames as printed)."""

        def rebase(frame: Frame) -> Frame:
            return replace(frame, file=self.file(Path(frame.file))) if frame.user else frame

        return replace(
            failure,
            frames=tuple(map(rebase, failure.frames)),
            worker_frames=tuple(map(rebase, failure.worker_frames)),
        )

    def harness_fault(self, fault: HarnessFault) -> HarnessFault:
        """The fault with the script's frames relative to the root and the harness's frame
        relative to repairbot's own folder (``repairbot/trace/harness/...``)."""
        plain = fault.plain_failure
        return replace(
            fault, failure=self.failure(fault.failure), frame=replace(fault.frame, file=harness_file(fault.frame.file)),
            plain_failure=self.failure(plain) if plain is not None else None,
        )

    def declines(self, declines: Sequence[Decline]) -> tuple[Decline, ...]:
        """The declines with the file each remedy applies to relative."""
        return tuple(replace(d, file=self.file(d.file)) if d.file else d for d in declines)

    def evidence(self, value: object) -> Any:
        """Evidence (JSON values) with every absolute ``file:line`` string relative."""
        if isinstance(value, Mapping):
            return {str(k): self.evidence(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.evidence(v) for v in value]
        if isinstance(value, str) and value.startswith("/") and _LOCATION.fullmatch(value):
            return self.location(value)
        return value

    def inside(self, path: Path) -> bool:
        """Is ``path`` in the project (under the root)? A fix is never made outside it."""
        try:
            path.resolve().relative_to(self.root.resolve())
        except ValueError:
            return False
        return True


def harness_file(path: str) -> str:
    """A file of repairbot (its harness, a pattern's probe) as reports name it: relative to the
    folder that holds the ``repairbot`` package (and ``patterns``), else as it is."""
    import repairbot

    top = Path(repairbot.__file__).resolve().parent.parent
    try:
        return Path(path).resolve().relative_to(top).as_posix()
    except ValueError:
        return path
