"""Renders a ``RepairReport``: the contract's text blocks and JSON (``repairbot.report/1``).

Renderers return strings; the CLI decides where they go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from repairbot.results import Attempt, RepairReport
from repairbot.types import (
    Failure,
    Frame,
    HarnessFault,
    HealthFinding,
    Outcome,
    RunLimits,
    Status,
    StopReason,
)

SCHEMA = "repairbot.report/1"

# Why a repair stopped, in words (the text and Markdown reports)
STOP_EXPLANATIONS = {
    StopReason.PASSING: "the script runs without error under the harness",
    StopReason.MAX_ATTEMPTS: "the attempt limit was reached with a failure left",
    StopReason.SAME_ERROR: "the same failure came back after the fix",
    StopReason.NO_PATTERN: "no pattern can fix this failure",
    StopReason.DIAGNOSED: "the failure is recognised, but not fixed automatically",
    StopReason.NO_USER_FRAME: "the failure happened outside the project's own code",
    StopReason.TIMEOUT: "a run reached the time limit",
    StopReason.ENVIRONMENT: "the environment is missing something (data, a package, the network, a GPU)",
    StopReason.BAD_INPUT: "bad input",
    StopReason.HARNESS_ERROR: "repairbot's tracing harness failed, not the script",
}


def failing_frame(attempt: Attempt) -> Frame | None:
    """The traced frame of the line an attempt's failure is reported at (with its columns)."""
    frame = attempt.failure.user_frame
    return frame if frame is not None and frame.line == attempt.failure_line else None


def _where(attempt: Attempt) -> str:
    if attempt.failure_file:
        return f"{attempt.failure_file}:{attempt.failure_line}"
    return "(no frame in the project's code)"


def rank_note(failure: Failure) -> str:
    """Under a launcher: which rank the failure is from (`` (in rank 1, the first to fail)``)."""
    return f" (in rank {failure.rank}, the first to fail)" if failure.rank is not None else ""


def _failure_line(failure: Failure, where: str) -> str:
    return f"Error: {failure.headline} at {where}{rank_note(failure)}"


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

    if report.harness_fault is not None:
        blocks.append(harness_fault_block(report.harness_fault))

    if report.remaining is not None:
        # the loop ended on a failure that no block describes yet (the attempt limit, say)
        frame = report.remaining.user_frame
        where = f"{frame.file}:{frame.line}" if frame else "(no frame in the project's code)"
        blocks.append(f"[FAILED] {where}\n{_failure_line(report.remaining, where)}\nRemaining errors: 1")

    blocks.extend(health_block(finding) for finding in report.health)

    files = modified_files(report)
    if report.command == "doctor":
        status = _doctor_status(report, blocks)
    elif report.status in (Status.FIXED, Status.ALREADY_PASSING):
        errors_fixed = len([a for a in report.attempts if a.applied])
        if report.status is Status.ALREADY_PASSING:
            blocks.append("The script runs without error under the harness: nothing to fix.")
        status = f"Status: SUCCESS | Errors Fixed: {errors_fixed} | Files Modified: {files}"
    else:
        reason = report.stop_reason
        status = (
            f"Status: {'ERROR' if report.status is Status.ERROR else 'FAILED'} | "
            f"Stop reason: {reason.value} ({STOP_EXPLANATIONS[reason]}) | "
            f"Errors Fixed: 0 | Files Modified: none"
        )
    if report.command != "doctor" and report.strict_health and report.warnings and report.exit_code:
        status += f" | Health findings: {len(report.warnings)} (--strict-health)"
    notes = [f"Note: {note}" for note in report.notes]
    if report.branch:
        notes.append(f"Branch: {report.branch} ({report.commit})")
    if report.run_limits.stopped_at:
        notes.append(
            f"Run ended by the step budget at {report.run_limits.stopped_at}, in a loop outside your code "
            "(not a pass: the code after it never ran)"
        )
    if report.run_limits.left_loops:
        notes.append("Loops left by the step budget (the script went on after them): " + left_loops_text(report.run_limits))
    if report.output_tail is not None:
        notes.append("Output of the last run:\n" + "\n".join("  " + line for line in report.output_tail.splitlines()))
    body = "\n\n".join(blocks)
    tail = "\n".join([*notes, status])
    text = f"{body}\n\n{tail}\n" if body else f"{tail}\n"
    return report.locations.text(text) if report.locations else text


def harness_fault_block(fault: HarnessFault) -> str:
    """The block of a failure that repairbot's harness raised: where in the harness, where it
    surfaced in the script, and how the script ends without the harness."""
    frame = fault.failure.user_frame
    surfaced = f" at {frame.location}" if frame else ""
    lines = [
        f"[HARNESS ERROR] {fault.frame.location}",
        f"Error: {fault.failure.headline}{surfaced}, raised by repairbot's tracing harness "
        f"({fault.frame.function} at {fault.frame.location}), not by the script",
        f"Without the harness: {fault.plain_outcome}",
    ]
    if fault.plain_output:
        lines.append("Output of the run without the harness:\n" + "\n".join("  " + line for line in fault.plain_output.splitlines()))
    return "\n".join(lines)


def _harness_fault_json(fault: HarnessFault) -> dict[str, Any]:
    frame = fault.failure.user_frame
    plain = fault.plain_failure
    plain_frame = plain.user_frame if plain is not None else None
    return {
        "exc_type": fault.failure.exc_type,
        "message": fault.failure.message,
        "harness_file": fault.frame.file,
        "harness_line": fault.frame.line,
        "harness_function": fault.frame.function,
        "file": frame.file if frame else None,
        "line": frame.line if frame else None,
        "plain_run": {
            "status": fault.plain_status.value,
            "exit_code": fault.plain_exit_code,
            "exc_type": plain.exc_type if plain is not None else None,
            "message": plain.message if plain is not None else None,
            "file": plain_frame.file if plain_frame else None,
            "line": plain_frame.line if plain_frame else None,
            "output_tail": fault.plain_output,
        },
    }


def modified_files(report: RepairReport) -> str:
    """The status line's "Files Modified": with --dry-run none, and the files it would modify."""
    files = ", ".join(report.files_modified)
    if report.dry_run and files:
        return f"none (dry run; would modify {files})"
    return files or "none"


def status_line(report: RepairReport) -> str:
    """The one line ``-q`` prints: the status line, with the fix branch where one was made."""
    last = render_text(report).rstrip("\n").splitlines()[-1]
    return f"{last} | Branch: {report.branch}" if report.branch else last


def left_loops_text(limits: RunLimits) -> str:
    """``train.py:57 (for, after 20 steps at train.py:63)``, for each loop the budget left."""
    return "; ".join(
        f"{item.get('loop')} ({item.get('kind')}, after {item.get('steps')} steps at {item.get('step')})"
        for item in limits.left_loops
    )


def _doctor_status(report: RepairReport, blocks: list[str]) -> str:
    """doctor's status line: SUCCESS only for a run with no crash and no finding."""
    findings = f"Health findings: {len(report.warnings)}"
    if len(report.health) > len(report.warnings):
        findings += f" (+{len(report.health) - len(report.warnings)} information)"
    if report.status is Status.ALREADY_PASSING:
        if not report.warnings:
            blocks.append("The script runs without error under the harness and no health check found anything.")
        verdict = "SUCCESS" if report.exit_code == 0 else "FAILED"
        return f"Status: {verdict} | {findings} | Files Modified: none"
    reason = report.stop_reason
    return (
        f"Status: {'ERROR' if report.status is Status.ERROR else 'FAILED'} | "
        f"Stop reason: {reason.value} ({STOP_EXPLANATIONS[reason]}) | {findings} | "
        "Files Modified: none"
    )


def evidence_line(evidence: Mapping[str, Any], limit: int = 400) -> str:
    """A finding's evidence on one line for people: ``key=value`` pairs, a nested record as
    ``(key=value, ...)``, a list as ``[a, b]`` (the JSON report keeps the structure)."""
    text = ", ".join(f"{key}={_compact(value)}" for key, value in evidence.items())
    return text if len(text) <= limit else text[: limit - 5] + " [...]"


def _compact(value: Any) -> str:
    if isinstance(value, Mapping):
        return "(" + ", ".join(f"{key}={_compact(item)}" for key, item in value.items()) + ")"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_compact(item) for item in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def health_block(finding: HealthFinding) -> str:
    """A health finding as a ``[WARNING] file:line`` block (``[INFO]`` for information; the
    offered fix's diff indented)."""
    lines = [
        f"[{'WARNING' if finding.is_warning else 'INFO'}] {finding.location}",
        f"Health: {finding.id}",
        f"Problem: {finding.message}",
    ]
    if finding.evidence:
        lines.append(f"Evidence: {evidence_line(finding.evidence)}")
    fix = finding.fix
    if fix is not None:
        lines.append(
            f"Offered fix ({fix.get('rule')}, {fix.get('applicability')}; not applied, "
            f"`repairbot lint --fix` applies it):"
        )
        lines.extend(f"  {line}" for line in str(fix.get("diff", "")).rstrip("\n").splitlines())
    return "\n".join(lines)


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
        **({"rank": failure.rank} if failure.rank is not None else {}),
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
            "left_loops": [dict(item) for item in limits.left_loops],
        },
        "health": [h.to_json() for h in report.health],
        "environment": dict(report.environment),
        "duration_s": round(report.duration_s, 3),
        "notes": list(report.notes),
        "scratch": report.scratch,
    }
    if report.command != "fix":
        data["command"] = report.command
    if report.output_tail is not None:
        data["output_tail"] = report.output_tail
    if report.error:
        data["error"] = report.error
    if report.harness_fault is not None:
        data["harness_error"] = _harness_fault_json(report.harness_fault)
    if report.remaining is not None:
        frame = report.remaining.user_frame
        data["remaining"] = {
            "exc_type": report.remaining.exc_type,
            "message": report.remaining.message,
            "file": frame.file if frame else None,
            "line": frame.line if frame else None,
        }
    return report.locations.json(_jsonable(data)) if report.locations else _jsonable(data)  # type: ignore[no-any-return]
