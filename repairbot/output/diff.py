"""Unified diffs of user files, as ``git apply`` and reviewers expect them, and read back as data."""

from __future__ import annotations

import difflib
import io
import re
import tokenize
from dataclasses import dataclass

NO_NEWLINE = "\\ No newline at end of file\n"


def decode(data: bytes) -> str:
    """A Python source's text, by its coding cookie or BOM (as the interpreter reads it)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def unified_diff(before: bytes, after: bytes, path: str, context: int = 3) -> tuple[str, int]:
    """The diff of one file (``a/path`` -> ``b/path``) and the number of lines it changes."""
    # split at "\n" only, as git does: str.splitlines would also split at a lone CR or a form
    # feed and write a bogus "No newline at end of file" in the middle of the file
    old = split_lines(decode(before))
    new = split_lines(decode(after))
    lines: list[str] = []
    removed = added = 0
    for line in difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", n=context):
        if line.startswith("-") and not line.startswith("---"):
            removed += 1
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        if line.endswith("\n"):
            lines.append(line)
        else:
            # the file's last line has no newline: say so, as git does
            lines.append(line + "\n" + NO_NEWLINE)
    return "".join(lines), max(removed, added)


def combined(diffs: list[str]) -> str:
    return "".join(diffs)


# --------------------------------------------------------------------------------------------
# The unified diff as data: read by the Markdown and SARIF renderers and by the Action's
# publishing stage, which must see a patch exactly as ``git apply`` will (hunks are read by
# their line counts, never by what a line looks like).
# --------------------------------------------------------------------------------------------

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A unified diff that is malformed, or that does not fit the text it is applied to."""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    # (" " | "-" | "+", the line's text with its line ending; none on a file's unterminated last line)
    lines: tuple[tuple[str, str], ...]

    def old_lines(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "+"]

    def new_lines(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "-"]


@dataclass(frozen=True)
class FilePatch:
    old_path: str  # the path of the "--- " header without its "a/" prefix ("/dev/null" as is)
    new_path: str
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.new_path


def split_lines(text: str) -> list[str]:
    """Lines as git sees them: split at "\\n" only, each keeping its ending (a CR stays in the line)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _header_path(line: str, prefix: str) -> str:
    path = line[4:].rstrip("\n")
    path = path.split("\t", 1)[0]  # a timestamp may follow a tab
    if path == "/dev/null":
        return path
    if not path.startswith(prefix):
        raise PatchError(f"header {line.rstrip()!r}: the path does not start with {prefix!r}")
    return path[len(prefix):]


def parse_patch(diff: str) -> list[FilePatch]:
    """The files and hunks of a plain unified diff (``--- a/`` / ``+++ b/`` headers, as
    repairbot writes them); PatchError for anything else, including git's extended headers."""
    lines = split_lines(diff)
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- ") or i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"line {i + 1}: expected a '--- a/PATH' and '+++ b/PATH' header, got {lines[i].rstrip()!r}")
        old_path, new_path = _header_path(lines[i], "a/"), _header_path(lines[i + 1], "b/")
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@ "):
            hunk, i = _parse_hunk(lines, i)
            hunks.append(hunk)
        if not hunks:
            raise PatchError(f"{new_path}: a file header without hunks")
        files.append(FilePatch(old_path, new_path, tuple(hunks)))
    return files


def _parse_hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    header = _HUNK_HEADER.match(lines[i])
    if header is None:
        raise PatchError(f"line {i + 1}: malformed hunk header {lines[i].rstrip()!r}")
    old_start, new_start = int(header[1]), int(header[3])
    old_count = 1 if header[2] is None else int(header[2])
    new_count = 1 if header[4] is None else int(header[4])
    i += 1
    body: list[tuple[str, str]] = []
    old = new = 0
    while old < old_count or new < new_count or (i < len(lines) and lines[i].startswith("\\")):
        if i >= len(lines):
            raise PatchError(f"hunk at line {header[0]!r} is cut short")
        line = lines[i]
        tag, text = line[:1], line[1:]
        if tag == "\\":  # "\ No newline at end of file": the line above has no ending
            if not body or not body[-1][1].endswith("\n"):
                raise PatchError(f"line {i + 1}: misplaced {line.rstrip()!r}")
            body[-1] = (body[-1][0], body[-1][1][:-1])
            i += 1
            continue
        if tag == " ":
            old, new = old + 1, new + 1
        elif tag == "-":
            old += 1
        elif tag == "+":
            new += 1
        else:
            raise PatchError(f"line {i + 1}: not a hunk line: {line.rstrip()!r}")
        if old > old_count or new > new_count:
            raise PatchError(f"line {i + 1}: more lines than the hunk header {header[0]!r} announces")
        body.append((tag, text))
        i += 1
    return Hunk(old_start, old_count, new_start, new_count, tuple(body)), i


def apply_patch(lines: list[str], patch: FilePatch, reverse: bool = False) -> list[str]:
    """The lines (``split_lines``) with the patch applied, exactly at its line numbers;
    PatchError where the text around a hunk is not what the hunk expects."""
    result = list(lines)
    shift = 0  # lines added minus lines removed by the hunks applied so far
    for hunk in patch.hunks:
        before, after = (hunk.new_lines(), hunk.old_lines()) if reverse else (hunk.old_lines(), hunk.new_lines())
        start, count = (hunk.new_start, hunk.new_count) if reverse else (hunk.old_start, hunk.old_count)
        # an empty range names the line after which the new lines go
        at = (start if count == 0 else start - 1) + shift
        if result[at:at + len(before)] != before:
            raise PatchError(f"{patch.path}: the hunk at line {start} does not match the file")
        result[at:at + len(before)] = after
        shift += len(after) - len(before)
    return result
