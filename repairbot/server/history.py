"""The fixes ``repairbot fix`` made in the past, for the editor's hover: the error, the traced
evidence and the fix of a line that a repair changed.

Two sources, both written by ``repairbot fix``:

- JSON reports (``--json PATH``, ``repairbot.report/1``): every attempt whose fix was verified,
  with the failure's evidence as traced;
- the commits of the fix branches (``repairbot/fix-*``): the commit message holds the text
  report (``[FIXED] file:line``, ``Error:``, ``Fix:``, ``Evidence:`` lines) and the commit's
  diff the changed lines.

A fix is tied to a document by its file (paths in both are relative to the repository's top
folder) and to a line by that line's text after the fix: the line may have moved since (lines
added above it), so the nearest line with the same text is the one (none: the line was edited
since, and there is no hover).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repairbot.output.diff import FilePatch, PatchError, parse_patch
from repairbot.output.report import evidence_line

REPORT_SCHEMA = "repairbot.report/1"
# what a workspace names its reports by, where its settings do not say (``reports``)
DEFAULT_REPORTS = ("repairbot-report.json", ".repairbot/*.json")
# git's extended header lines, which a plain unified diff does not have
_GIT_HEADER = re.compile(r"^(diff --git |index |old mode |new mode |deleted file |new file |similarity |rename |copy )")


@dataclass(frozen=True)
class PastFix:
    """One verified fix: the file it changed, the lines it wrote (number after the fix, text)."""

    file: Path
    lines: tuple[tuple[int, str], ...]
    error: str
    evidence: str
    summary: str
    applicability: str
    diff: str
    origin: str  # the report file, or the branch and commit

    def markdown(self) -> str:
        parts = [
            f"**repairbot fixed this line** ({self.applicability} fix, verified by a rerun; {self.origin})",
            f"**Error:** {self.error}",
        ]
        if self.evidence:
            parts.append(f"**Evidence (traced):** {self.evidence}")
        parts.append(f"**Fix:** {self.summary}")
        if self.diff:
            parts.append(f"```diff\n{self.diff.rstrip()}\n```")
        return "\n\n".join(parts)


def _written(patch: FilePatch) -> tuple[tuple[int, str], ...]:
    """The lines a file's patch adds, with their numbers in the new file."""
    found = []
    for hunk in patch.hunks:
        number = hunk.new_start
        for tag, text in hunk.lines:
            if tag == "+":
                found.append((number, text.rstrip("\r\n")))
            if tag != "-":
                number += 1
    return tuple(found)


def _patches(diff: str) -> list[FilePatch]:
    try:
        return parse_patch("".join(line for line in diff.splitlines(keepends=True) if not _GIT_HEADER.match(line)))
    except PatchError:
        return []


def from_report(data: Any, root: Path, origin: str) -> list[PastFix]:
    """The verified fixes of a JSON report (paths relative to ``root``); [] for anything else."""
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        return []
    found = []
    for attempt in data.get("attempts") or ():
        fix, failure = attempt.get("fix"), attempt.get("failure") or {}
        if not isinstance(fix, dict) or attempt.get("outcome") != "passed" or not isinstance(fix.get("file"), str):
            continue
        where = f" at {failure['file']}:{failure['line']}" if failure.get("file") else ""
        evidence = failure.get("evidence")
        for patch in _patches(str(fix.get("diff") or "")):
            if patch.path != fix["file"]:
                continue
            found.append(PastFix(
                file=root / patch.path, lines=_written(patch),
                error=f"{failure.get('exc_type', 'Error')}: {failure.get('message', '')}{where}",
                evidence=evidence_line(evidence) if isinstance(evidence, dict) and evidence else "",
                summary=str(fix.get("summary") or ""), applicability=str(fix.get("applicability") or "safe"),
                diff=str(fix["diff"]), origin=origin,
            ))
    return found


_BLOCK = re.compile(r"^\[FIXED\] (?P<file>.+):(?P<line>\d+)$")


def from_commit(message: str, diff: str, root: Path, origin: str) -> list[PastFix]:
    """The fixes of a fix branch's commit: each ``[FIXED]`` block of its message, with the lines
    the commit's diff writes in that block's file."""
    patches = {patch.path: patch for patch in _patches(diff)}
    found = []
    block: dict[str, str] = {}
    for line in [*message.splitlines(), ""]:
        head = _BLOCK.match(line)
        if head is not None:
            block = {"file": head["file"]}
            continue
        key, colon, value = line.partition(": ")
        if block and colon and key in ("Error", "Fix", "Applicability", "Evidence"):
            block.setdefault(key, value)
        elif block and (not line.strip() or line.startswith("Remaining errors")):
            patch = patches.get(block["file"])
            if patch is not None and "Fix" in block:
                found.append(PastFix(
                    file=root / patch.path, lines=_written(patch), error=block.get("Error", ""),
                    evidence=block.get("Evidence", ""), summary=block["Fix"],
                    applicability=block.get("Applicability", "safe"), diff=_file_diff(diff, patch.path), origin=origin,
                ))
            block = {}
    return found


def _file_diff(diff: str, path: str) -> str:
    """One file's part of a commit's diff, without git's extended headers."""
    parts = re.split(r"(?m)^(?=diff --git )", diff)
    for part in parts:
        if f"\n+++ b/{path}\n" in part or part.startswith(f"+++ b/{path}\n"):
            return "".join(line for line in part.splitlines(keepends=True) if not _GIT_HEADER.match(line))
    return ""


def read_reports(root: Path, patterns: Iterable[str], base: Path) -> list[PastFix]:
    """The fixes of the JSON reports that ``patterns`` (globs under ``root``) name; paths in
    them are relative to ``base`` (the repository's top folder). Unreadable files are passed over."""
    found = []
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                continue
            found.extend(from_report(data, base, path.name))
    return found


def line_of(fix: PastFix, lines: Sequence[str]) -> list[int]:
    """The 0-based lines of a document that hold the fix's lines now: for each line it wrote,
    the nearest line with the same text (ignoring indentation's change)."""
    found = []
    for number, text in fix.lines:
        wanted = text.strip()
        if not wanted:
            continue
        matches = [index for index, line in enumerate(lines) if line.strip() == wanted]
        if matches:
            found.append(min(matches, key=lambda index: abs(index - (number - 1))))
    return found
