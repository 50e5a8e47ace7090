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

A notebook's fix is one of a code cell's lines: the report's diff is per cell (``a/NB.ipynb:cell
7``, lines of the cell), the commit's is of the ``.ipynb`` JSON, so the commit's notebook before
and after is diffed per cell as ``repairbot fix`` shows it. In a notebook document the line is
looked for in the notebook's program (its code cells in order), so cells added or removed above
the fixed one do not matter either.

Reading the fix branches costs a few git runs per branch: ``FixHistory`` keeps what it read for
each repository until the refs' files change (``refs_state``), and each report until its file does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from repairbot.notebook import Location, Notebook, NotebookError, file_diff, is_notebook
from repairbot.output.diff import FilePatch, PatchError, parse_patch
from repairbot.output.git import FixCommit, fix_commits, refs_state
from repairbot.output.report import evidence_line

REPORT_SCHEMA = "repairbot.report/1"
# what a workspace names its reports by, where its settings do not say (``reports``)
DEFAULT_REPORTS = ("repairbot-report.json", ".repairbot/*.json")
# git's extended header lines, which a plain unified diff does not have
_GIT_HEADER = re.compile(r"^(diff --git |index |old mode |new mode |deleted file |new file |similarity |rename |copy )")
# a notebook cell's part of a per-cell diff: ``a/NB.ipynb:cell 7``
_CELL_PATH = re.compile(r"^(?P<file>.+\.ipynb):cell (?P<cell>\d+)$")


@dataclass(frozen=True)
class PastFix:
    """One verified fix: the file it changed, the lines it wrote (number after the fix, text;
    in a notebook, ``cell``'s lines)."""

    file: Path
    lines: tuple[tuple[int, str], ...]
    error: str
    evidence: str
    summary: str
    applicability: str
    diff: str
    origin: str  # the report file, or the branch and commit
    cell: int | None = None  # the notebook's code cell (1-based, as reports count them)

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
        if failure.get("cell"):
            where = f" at {failure['file']}, cell {failure['cell']}, line {failure['line']}"
        evidence = failure.get("evidence")
        for patch in _patches(str(fix.get("diff") or "")):
            file, cell = _file_and_cell(patch.path)
            if file != fix["file"]:
                continue
            found.append(PastFix(
                file=root / file, lines=_written(patch),
                error=f"{failure.get('exc_type', 'Error')}: {failure.get('message', '')}{where}",
                evidence=evidence_line(evidence) if isinstance(evidence, dict) and evidence else "",
                summary=str(fix.get("summary") or ""), applicability=str(fix.get("applicability") or "safe"),
                diff=str(fix["diff"]), origin=origin, cell=cell,
            ))
    return found


def _file_and_cell(path: str) -> tuple[str, int | None]:
    """A diff's path as (file, cell): ``NB.ipynb:cell 7`` is a notebook's cell 7."""
    match = _CELL_PATH.match(path)
    return (match["file"], int(match["cell"])) if match else (path, None)


# ``[FIXED] train.py:39``, or in a notebook ``[FIXED] NB.ipynb, cell 7, line 9``
_BLOCK = re.compile(r"^\[FIXED\] (?:(?P<notebook>.+\.ipynb), cell (?P<cell>\d+), line \d+|(?P<file>.+):\d+)$")


def from_commit(commit: FixCommit, root: Path) -> list[PastFix]:
    """The fixes of a fix branch's commit: each ``[FIXED]`` block of its message, with the lines
    the commit's diff writes in that block's file (a notebook's: in that block's cell)."""
    origin = f"branch {commit.branch}, commit {commit.sha[:8]}"
    patches = {patch.path: patch for patch in _patches(commit.diff)}
    cell_diffs = {}
    for path, before, after in commit.notebooks:
        try:
            cell_diffs[path] = file_diff(root / path, before.encode("utf-8"), after.encode("utf-8"), path)
        except NotebookError:  # not a notebook repairbot reads (nor one it fixed)
            continue
        patches.update((patch.path, patch) for patch in _patches(cell_diffs[path]))
    found = []
    block: dict[str, str] = {}
    for line in [*commit.message.splitlines(), ""]:
        head = _BLOCK.match(line)
        if head is not None:
            block = {"file": head["file"]} if head["file"] else {"file": head["notebook"], "cell": head["cell"]}
            continue
        key, colon, value = line.partition(": ")
        if block and colon and key in ("Error", "Fix", "Applicability", "Evidence"):
            block.setdefault(key, value)
        elif block and (not line.strip() or line.startswith("Remaining errors")):
            cell = int(block["cell"]) if "cell" in block else None
            name = f"{block['file']}:cell {cell}" if cell is not None else block["file"]
            patch = patches.get(name)
            if patch is not None and "Fix" in block:
                diff = _cell_diff(cell_diffs.get(block["file"], ""), name) if cell else _file_diff(commit.diff, name)
                found.append(PastFix(
                    file=root / block["file"], lines=_written(patch), error=block.get("Error", ""),
                    evidence=block.get("Evidence", ""), summary=block["Fix"],
                    applicability=block.get("Applicability", "safe"), diff=diff, origin=origin, cell=cell,
                ))
            block = {}
    return found


def _cell_diff(diff: str, name: str) -> str:
    """One cell's part of a notebook's per-cell diff."""
    parts = re.split(r"(?m)^(?=--- a/)", diff)
    return next((part for part in parts if part.startswith(f"--- a/{name}\n")), "")


def _file_diff(diff: str, path: str) -> str:
    """One file's part of a commit's diff, without git's extended headers."""
    parts = re.split(r"(?m)^(?=diff --git )", diff)
    for part in parts:
        if f"\n+++ b/{path}\n" in part or part.startswith(f"+++ b/{path}\n"):
            return "".join(line for line in part.splitlines(keepends=True) if not _GIT_HEADER.match(line))
    return ""


def read_report(path: Path, base: Path) -> list[PastFix]:
    """The fixes of one JSON report (paths in it relative to ``base``, the repository's top
    folder); [] for a file that cannot be read or is no report."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    return from_report(data, base, path.name)


class FixHistory:
    """The past fixes of each repository, kept between hovers. The fix branches' commits are read
    again only when ``refs_state`` changes (a fix branch created, moved or deleted), a report
    only when its file's stats do (or a report appears or goes): a hover where nothing changed
    runs no git and reads no report. Used from one thread (the server's worker)."""

    def __init__(self) -> None:
        self._commits: dict[Path, tuple[tuple[object, ...], list[PastFix]]] = {}
        self._reports: dict[tuple[Path, Path], tuple[tuple[int, int, int], list[PastFix]]] = {}

    def fixes(self, folder: Path, workspace: Path | None, reports: Iterable[str], branches: bool) -> list[PastFix]:
        """The verified fixes that concern files under ``folder``'s repository: the fix
        branches' commits (if ``branches``), then the reports that the ``reports`` globs name
        under ``workspace`` and the repository's top folder (one fix found twice is shown once,
        from the commit, whose evidence is the report's prose)."""
        state = refs_state(folder)
        root = state[0] if state is not None else folder
        found = list(self._from_branches(*state)) if state is not None and branches else []
        for top in dict.fromkeys([*([workspace] if workspace else []), root]):
            for pattern in reports:
                for path in sorted(top.glob(pattern)):
                    found += self._from_report(path, root)
        unique: dict[tuple[Path, int | None, tuple[tuple[int, str], ...], str], PastFix] = {}
        for fix in found:
            unique.setdefault((fix.file, fix.cell, fix.lines, fix.summary), fix)
        return list(unique.values())

    def _from_branches(self, root: Path, refs: tuple[object, ...]) -> list[PastFix]:
        cached = self._commits.get(root)
        if cached is None or cached[0] != refs:
            top, commits = fix_commits(root)
            cached = refs, [fix for commit in commits for fix in from_commit(commit, top)]
            self._commits[root] = cached
        return cached[1]

    def _from_report(self, path: Path, base: Path) -> list[PastFix]:
        try:
            stat = path.stat()
        except OSError:
            return []
        key, signature = (path, base), (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        cached = self._reports.get(key)
        if cached is None or cached[0] != signature:
            cached = signature, read_report(path, base)
            self._reports[key] = cached
        return cached[1]


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


def cell_lines_of(fix: PastFix, notebook: Notebook) -> list[Location]:
    """The cell lines of a notebook (as an editor has it: ``from_cells``) that hold a notebook
    fix's lines now: ``line_of`` over the notebook's program, from where the fix's cell starts
    in it now (the last cell, if the notebook has fewer cells now)."""
    start = notebook.cell_start(min(fix.cell or 1, len(notebook.cells)))
    if start is None:
        return []
    shifted = replace(fix, lines=tuple((start + number - 1, text) for number, text in fix.lines))
    program = notebook.program.split("\n")
    return [where for index in line_of(shifted, program) if (where := notebook.locate(index + 1)) is not None]


def concerns(fix: PastFix, path: Path) -> bool:
    """Whether the fix is one of this file's (a notebook's fixes are its cells')."""
    return fix.file.resolve() == path.resolve() and (fix.cell is not None) == is_notebook(path)
