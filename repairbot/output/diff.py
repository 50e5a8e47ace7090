"""Unified diffs of user files, as ``git apply`` and reviewers expect them."""

from __future__ import annotations

import difflib
import io
import tokenize

NO_NEWLINE = "\\ No newline at end of file\n"


def decode(data: bytes) -> str:
    """A Python source's text, by its coding cookie or BOM (as the interpreter reads it)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def unified_diff(before: bytes, after: bytes, path: str, context: int = 3) -> tuple[str, int]:
    """The diff of one file (``a/path`` -> ``b/path``) and the number of lines it changes."""
    old = decode(before).splitlines(keepends=True)
    new = decode(after).splitlines(keepends=True)
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
