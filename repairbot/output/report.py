"""Renders a ``RepairReport``: the contract's text blocks and JSON (``repairbot.report/1``);
reads unified diffs back as data for the Markdown and SARIF renderers.

Renderers return strings; the CLI decides where they go.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from repairbot.types import Attempt, Failure, Frame, Outcome, RepairReport, Status, StopReason

SCHEMA = "repairbot.report/1"

_STOP_EXPLANATIONS = {
    StopReason.MAX_ATTEMPTS: "the attempt limit was reached with a failure left",
    StopReason.SAME_ERROR: "the same failure came back after the fix",
    StopReason.NO_PATTERN: "no pattern can fix this failure",
    StopReason.DIAGNOSED: "the failure is recognised, but not fixed automatically",
    StopReason.NO_USER_FRAME: "the failure happened outside the project's own code",
    StopReason.TIMEOUT: "a run reached the time limit",
    StopReason.ENVIRONMENT: "the environment is missing something (data, a package, the network, a GPU)",
    StopReason.BAD_INPUT: "bad input",
}


def failing_frame(attempt: Attempt) -> Frame | None:
    """The traced frame of the line an attempt's failure is reported at (with its columns)."""
    frame = attempt.failure.user_frame
    return frame if frame is not None and frame.line == attempt.failure_line else None


def _where(attempt: Attempt) -> str:
    if attempt.failure_file:
        return f"{attempt.failure_file}:{attempt.failure_line}"
    return "(no frame in the project's code)"


def _failure_line(failure: Failure, where: str) -> str:
    return f"Error: {failure.headline} at {where}"


def render_text(report: RepairReport) -> str:
    """The human report: one block per failure, then the status line."""
    blocks: list[str] = []
    committed = report.status is Status.FIXED
    for attempt in report.attempts:
        lines: list[str] = []
        if attempt.fix is not None:
            site = attempt.fix.site
            lines.append(f"[{'FIXED' if attempt.applied else 'FAILED'}] {attempt.fix.file}:{site.span.line}")
            lines.append(_failure_line(attempt.failure, _where(attempt)))
            if not attempt.applied:
                verb = "Fix (discarded)"
            elif committed:
                verb = "Fix"
            else:
                verb = "Fix (verified, not applied: the repair gave up later)"
            lines.append(f"{verb}: {site.summary}")
            lines.append(f"Applicability: {site.applicability.value}")
            if site.evidence_text:
                lines.append(f"Evidence: {site.evidence_text}")
            for note in site.notes:
                lines.append(f"Note: {note}")
            remaining = 0 if attempt.outcome is Outcome.PASSED else 1
            lines.append(f"Remaining errors: {remaining}")
        else:
            diagnosis = next((d for d in attempt.declines if d.diagnosis), None)
            tag = "DIAGNOSED" if report.stop_reason is StopReason.DIAGNOSED else "FAILED"
            place = f"{diagnosis.file}:{diagnosis.line}" if diagnosis and diagnosis.file else _where(attempt)
            lines.append(f"[{tag}] {place}")
            lines.append(_failure_line(attempt.failure, _where(attempt)))
            if attempt.pattern:
                lines.append(f"Pattern: {attempt.pattern}")
            if diagnosis is not None:
                lines.append(f"Diagnosis: {diagnosis.reason}")
                lines.append(f"Remedy: {diagnosis.diagnosis}")
            for decline in attempt.declines:
                if decline is not diagnosis:
                    lines.append(f"Declined ({decline.pattern}): {decline.reason}")
            lines.append("Remaining errors: 1")
        blocks.append("\n".join(lines))

    if report.remaining is not None:
        # the loop ended on a failure that no block describes yet (the attempt limit, say)
        frame = report.remaining.user_frame
        where = f"{frame.file}:{frame.line}" if frame else "(no frame in the project's code)"
        blocks.append(f"[FAILED] {where}\n{_failure_line(report.remaining, where)}\nRemaining errors: 1")

    files = ", ".join(report.files_modified) or "none"
    if report.status in (Status.FIXED, Status.ALREADY_PASSING):
        errors_fixed = len([a for a in report.attempts if a.applied])
        if report.status is Status.ALREADY_PASSING:
            blocks.append("The script runs without error under the harness: nothing to fix.")
        status = f"Status: SUCCESS | Errors Fixed: {errors_fixed} | Files Modified: {files}"
    else:
        reason = report.stop_reason
        status = (
            f"Status: FAILED | Stop reason: {reason.value} ({_STOP_EXPLANATIONS[reason]}) | "
            f"Errors Fixed: 0 | Files Modified: none"
        )
    notes = [f"Note: {note}" for note in report.notes]
    if report.branch:
        notes.append(f"Branch: {report.branch} ({report.commit})")
    if report.run_limits.stopped_at:
        notes.append(f"Run stopped by the step budget at {report.run_limits.stopped_at} (counts as passing)")
    body = "\n\n".join(blocks)
    tail = "\n".join([*notes, status])
    return f"{body}\n\n{tail}\n" if body else f"{tail}\n"


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``repairbot.report/1``, shipped with the package."""
    text = resources.files("repairbot").joinpath("schemas/report.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def render_json(report: RepairReport) -> str:
    return json.dumps(report_to_json(report), indent=2) + "\n"


def _failure_json(attempt: Attempt) -> dict[str, Any]:
    failure = attempt.failure
    return {
        "exc_type": failure.exc_type,
        "message": failure.message,
        "file": attempt.failure_file,
        "line": attempt.failure_line,
        "pattern": attempt.pattern,
        "evidence": dict(attempt.evidence),
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def report_to_json(report: RepairReport) -> dict[str, Any]:
    attempts = []
    for attempt in report.attempts:
        item: dict[str, Any] = {"n": attempt.n, "failure": _failure_json(attempt)}
        if attempt.fix is not None:
            site = attempt.fix.site
            item["fix"] = {
                "pattern": site.pattern,
                "applicability": site.applicability.value,
                "file": attempt.fix.file,
                "line": site.span.line,
                "summary": site.summary,
                "diff": attempt.fix.diff,
            }
        if attempt.declines:
            item["declined"] = [
                {"pattern": d.pattern, "reason": d.reason, "diagnosis": d.diagnosis, "file": d.file, "line": d.line}
                for d in attempt.declines
            ]
        item["outcome"] = attempt.outcome.value
        item["duration_s"] = round(attempt.duration_s, 3)
        attempts.append(item)
    limits = report.run_limits
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "script": report.script,
        "status": report.status.value,
        "stop_reason": report.stop_reason.value,
        "attempts": attempts,
        "diff": report.diff,
        "files_modified": list(report.files_modified),
        "branch": report.branch,
        "commit": report.commit,
        "run_limits": {
            "batch_size": limits.batch_size,
            "max_batches": limits.max_batches,
            "max_steps": limits.max_steps,
            "stopped_at": limits.stopped_at,
        },
        "health": [dict(h) for h in report.health],
        "environment": dict(report.environment),
        "duration_s": round(report.duration_s, 3),
        "notes": list(report.notes),
        "scratch": report.scratch,
    }
    if report.error:
        data["error"] = report.error
    if report.remaining is not None:
        frame = report.remaining.user_frame
        data["remaining"] = {
            "exc_type": report.remaining.exc_type,
            "message": report.remaining.message,
            "file": frame.file if frame else None,
            "line": frame.line if frame else None,
        }
    return _jsonable(data)  # type: ignore[no-any-return]


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
