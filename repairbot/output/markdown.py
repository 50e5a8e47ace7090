"""Renders a ``RepairReport`` as GitHub-flavoured Markdown: for a person reading a job summary
(``$GITHUB_STEP_SUMMARY``) or reviewing the pull request that proposes the fix.

Everything that comes from the user's run (exception messages, source lines, paths, values)
is either fenced, put in a code span, or escaped, so that a crafted message cannot inject
markup, HTML or links into the page. The whole document stays under GitHub's 1 MiB limit
for a step summary: the diff is cut first, and the JSON report always holds all of it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repairbot import __version__
from repairbot.output.diff import (
    FilePatch,
    PatchError,
    apply_patch,
    decode,
    parse_patch,
    split_lines,
)
from repairbot.output.report import SCHEMA, STOP_EXPLANATIONS, failing_frame, rank_note
from repairbot.results import Attempt, RepairReport
from repairbot.types import (
    Decline,
    Failure,
    ForwardStep,
    HealthFinding,
    Outcome,
    Status,
    StopReason,
)

# GitHub refuses a step summary over 1 MiB; keep a margin for the other steps' summaries.
MAX_BYTES = 900_000
_MESSAGE_LINES = 40  # an exception message longer than this is cut in the report
_MESSAGE_CHARS = 6_000
_CONTEXT = 2  # source lines shown before and after the failing line

_HEADLINES = {
    Status.FIXED: "fixed",
    Status.ALREADY_PASSING: "already passing",
    Status.GAVE_UP: "gave up",
    Status.ERROR: "could not run",
}
_ICONS = {Status.FIXED: "✅", Status.ALREADY_PASSING: "✅", Status.GAVE_UP: "❌", Status.ERROR: "⚠️"}
_EVIDENCE_KINDS = frozenset({"tensor", "module", "device", "device-string"})

# --------------------------------------------------------------------------------------------
# Safe Markdown pieces
# --------------------------------------------------------------------------------------------

# Characters that start inline markup, HTML or math in GitHub's Markdown (CommonMark lets a
# backslash escape each); the text is one line inside a paragraph, so line-start markers are
# inert. Pipes matter in tables only: ``cell`` escapes those.
_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#~&!$])")


def escape(text: str) -> str:
    """Plain text on one line, every character that could start markup escaped."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


# A code span as the repairbot's own texts write one (summaries, evidence, remedies): `...`
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def inline(text: str) -> str:
    """Text written with `code spans` (a fix's summary, a remedy): the spans rendered as code
    (their content cannot break out of them), everything else escaped."""
    text = " ".join(str(text).split())
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out += [_SPECIAL.sub(r"\\\1", text[last:match.start()]), code(match[1])]
        last = match.end()
    out.append(_SPECIAL.sub(r"\\\1", text[last:]))
    return "".join(out)


def code(text: object) -> str:
    """An inline code span that no content can break out of (on one line)."""
    value = " ".join(str(text).splitlines()) or " "
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    if value.startswith("`") or value.endswith("`") or (value.startswith(" ") and value.endswith(" ")):
        value = f" {value} "
    return f"{ticks}{value}{ticks}"


def cell(text: str) -> str:
    """A table cell's content: GFM splits cells at every unescaped pipe, code spans included."""
    return text.replace("|", "\\|")


def fenced(text: str, info: str = "text") -> str:
    """A fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}"


def _truncate(text: str, max_lines: int = _MESSAGE_LINES, max_chars: int = _MESSAGE_CHARS) -> str:
    lines = text.splitlines()
    kept = "\n".join(lines[:max_lines])[:max_chars]
    if len(kept) < len("\n".join(lines)):
        return f"{kept}\n[... cut here: the JSON report holds the whole message]"
    return kept


# --------------------------------------------------------------------------------------------
# Source context: the failing line in the version of the file that the failing run executed
# --------------------------------------------------------------------------------------------


class _SourceVersions:
    """Files as each attempt's run saw them: the original (read from disk, where a fix written
    into the working tree is undone with the report's diff) plus the fixes kept before it."""

    def __init__(self, report: RepairReport, root: Path | None) -> None:
        self.report = report
        self.root = root
        self.combined: dict[str, FilePatch] = {}
        with contextlib.suppress(PatchError):
            self.combined = {p.path: p for p in parse_patch(report.diff)}

    def _original(self, path: str) -> list[str] | None:
        if self.root is None:
            return None
        try:
            lines = split_lines(decode((self.root / path).read_bytes()))  # by its coding cookie or BOM
        except (OSError, SyntaxError, UnicodeDecodeError):
            return None
        patch = self.combined.get(path)
        if patch is None:
            return lines
        for reverse in (False, True):  # on disk: the original (dry run, branch) or the fixed file
            try:
                apply_patch(lines, patch, reverse=reverse)
            except PatchError:
                continue
            return apply_patch(lines, patch, reverse=True) if reverse else lines
        return None

    def at(self, attempt: Attempt, path: str) -> list[str] | None:
        lines = self._original(path)
        for earlier in self.report.attempts:
            if lines is None or earlier.n >= attempt.n:
                break
            if earlier.fix is not None and earlier.applied and earlier.fix.file == path:
                try:
                    lines = apply_patch(lines, parse_patch(earlier.fix.diff)[0])
                except (PatchError, IndexError):
                    return None
        return lines


def _context(attempt: Attempt, sources: _SourceVersions) -> str | None:
    """The failing line with a few lines around it, numbered, the failing expression underlined."""
    if attempt.failure_file is None or attempt.failure_line is None:
        return None
    line = attempt.failure_line
    frame = failing_frame(attempt)
    lines = sources.at(attempt, attempt.failure_file)
    traced = (frame.code or "").strip() if frame else ""
    if lines is None or not 0 < line <= len(lines) or (traced and lines[line - 1].strip() != traced):
        # the file is not at hand (or not as the run saw it): the traced line alone
        return f"{line:>5} | {traced}" if traced else None
    first, last = max(1, line - _CONTEXT), min(len(lines), line + _CONTEXT)
    width = len(str(last))
    out = []
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\r\n")
        out.append(f"{'>' if number == line else ' '} {number:>{width}} | {text}")
        if number == line and frame is not None and frame.col is not None:
            end = frame.end_col if frame.end_line == line and frame.end_col is not None else len(text)
            if end > frame.col:
                out.append(f"  {' ' * width} | {' ' * frame.col}{'^' * (end - frame.col)}")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Evidence
# --------------------------------------------------------------------------------------------


def _label(key: str) -> str:
    return escape(key.replace("_", " "))


def _shape(value: Sequence[Any]) -> str:
    return "x".join(str(v) for v in value) if value else "(scalar)"


def _is_shape(key: str, value: Any) -> bool:
    return "shape" in key and isinstance(value, list | tuple) and all(isinstance(v, int) for v in value)


def describe(value: Mapping[str, Any]) -> str | None:
    """One line for a traced value of the evidence vocabulary (tensor, module, device)."""
    kind = value.get("kind")
    if kind not in _EVIDENCE_KINDS:
        return None
    if kind == "tensor":
        parts = [f"tensor {_shape(value.get('shape') or [])}", str(value.get("dtype", "")).removeprefix("torch.")]
        if value.get("device"):
            parts.append(f"on {value['device']}")
        if value.get("requires_grad"):
            parts.append("requires grad")
        return " ".join(p for p in parts if p)
    if kind == "module":
        devices = value.get("devices") or []
        text = f"{value.get('type', 'module')} on {', '.join(map(str, devices)) or 'no device'}"
        return f"{text} (built at {value['site']})" if value.get("site") else text
    return str(value.get("value", ""))


def _value(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_shape(key, value):
        return code(_shape(value))
    return code(value)


def _evidence_items(evidence: Mapping[str, Any], depth: int = 0) -> list[str]:
    """Nested bullets, generic for any pattern; known shapes of data get a readable form."""
    pad = "  " * depth
    out: list[str] = []
    for key, value in evidence.items():
        key = str(key)
        if isinstance(value, Mapping):
            described = describe(value)
            if described is not None:
                name = value.get("name")
                prefix = f"{code(name)}: " if name and key != "name" else ""
                out.append(f"{pad}- {_label(key)}: {prefix}{code(described)}")
            else:
                out.append(f"{pad}- {_label(key)}:")
                out.extend(_evidence_items(value, depth + 1))
        elif isinstance(value, list | tuple) and not _is_shape(key, value) and value:
            out.append(f"{pad}- {_label(key)}:")
            for item in value:
                if isinstance(item, Mapping):
                    out.append(f"{pad}  - {code(describe(item) or item)}")
                else:
                    out.append(f"{pad}  - {code(item)}")
        else:
            out.append(f"{pad}- {_label(key)}: {_value(key, value)}")
    return out


def _forward_pass_table(steps: Sequence[Any]) -> str | None:
    """The Linear layers along the forward pass, with the shape each received."""
    rows = []
    for step in steps:
        if not isinstance(step, ForwardStep):
            return None
        rows.append(f"| {cell(code(step.layer))} | {cell(code(step.site))} | {cell(code(step.input_shape))} |")
    header = "| layer | built at | traced input |\n| --- | --- | --- |"
    return "\n".join([header, *rows])


def _evidence(evidence: Mapping[str, Any]) -> str | None:
    if not evidence:
        return None
    rest = dict(evidence)
    parts = []
    steps = rest.get("forward_pass")
    table = _forward_pass_table(steps) if isinstance(steps, list) and steps else None
    if table is not None:
        del rest["forward_pass"]
        parts.append(f"Linear layers along the forward pass:\n\n{table}")
    if rest:
        parts.append("\n".join(_evidence_items(rest)))
    body = "\n\n".join(parts)
    return f"<details><summary>Traced evidence</summary>\n\n{body}\n\n</details>"


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _where(file: str | None, line: int | None) -> str:
    return code(f"{file}:{line}") if file else "no frame in the project's code"


def _attempt_title(report: RepairReport, attempt: Attempt) -> str:
    failure = attempt.failure
    where = _where(attempt.failure_file, attempt.failure_line)
    if attempt.fix is not None:
        pattern = code(attempt.fix.site.pattern)
        if attempt.outcome is Outcome.PASSED:
            result = f"fixed by {pattern}"
        elif attempt.applied:
            result = f"fixed by {pattern}; the rerun went on to the next failure"
        elif attempt.outcome is Outcome.FAILED_SAME:
            result = f"the fix by {pattern} was discarded: the same failure came back"
        else:
            result = f"the fix by {pattern} was discarded: the rerun did worse"
    elif report.stop_reason is StopReason.DIAGNOSED:
        result = f"diagnosed by {code(attempt.pattern)}" if attempt.pattern else "diagnosed"
    elif attempt.pattern:
        result = f"recognised by {code(attempt.pattern)}, not fixed"
    else:
        result = "no pattern for this failure"
    return f"### {attempt.n}. {code(failure.exc_type or 'failure')} at {where}{rank_note(failure)}: {result}"


def _failure_block(failure: Failure) -> str:
    message = _truncate(failure.message.strip())
    text = f"{failure.exc_type}: {message}" if message else failure.exc_type
    return fenced(text)


def _declines(declines: Sequence[Decline]) -> list[str]:
    """Diagnoses (what the user should do) first, then the plain refusals as one list."""
    out = []
    for decline in declines:
        if decline.diagnosis:
            place = f" at {_where(decline.file, decline.line)}" if decline.file else ""
            out.append(f"**Diagnosis** ({code(decline.pattern)}{place}): {inline(decline.reason)}")
            out.append(f"**Remedy:** {inline(decline.diagnosis)}")
    refusals = [f"- {code(d.pattern)} declined: {inline(d.reason)}" for d in declines if not d.diagnosis]
    if refusals:
        out.append("\n".join(refusals))
    return out


def _attempt(report: RepairReport, attempt: Attempt, sources: _SourceVersions) -> str:
    parts = [_attempt_title(report, attempt), _failure_block(attempt.failure)]
    context = _context(attempt, sources)
    if context is not None:
        parts.append(f"Failing line, {_where(attempt.failure_file, attempt.failure_line)}:\n\n{fenced(context, 'python')}")
    if attempt.fix is not None:
        site = attempt.fix.site
        if not attempt.applied:
            state = "discarded"
        elif report.status is Status.FIXED:
            state = "verified"
        else:
            state = "verified, not applied: the repair gave up later"
        parts.append(
            f"**Fix** at {_where(attempt.fix.file, site.span.line)} "
            f"({state}; applicability: **{escape(site.applicability.value)}**): {inline(site.summary)}"
        )
        if site.evidence_text:
            parts.append(f"**Evidence:** {inline(site.evidence_text)}")
        parts.extend(f"**Note:** {inline(note)}" for note in site.notes)
    parts.extend(_declines(attempt.declines))
    evidence = _evidence(attempt.evidence)
    if evidence is not None:
        parts.append(evidence)
    return "\n\n".join(p for p in parts if p)


def _files_modified(report: RepairReport) -> str:
    files = ", ".join(code(f) for f in report.files_modified)
    if report.dry_run and files:
        return f"none (dry run; would modify {files})"
    return files or "none"


def _summary_table(report: RepairReport) -> str:
    fixed = len([a for a in report.attempts if a.applied]) if report.status is Status.FIXED else 0
    rows = [
        ("Status", f"**{escape(report.status.value)}** ({code(report.stop_reason.value)}: {escape(STOP_EXPLANATIONS[report.stop_reason])})"),
        ("Script", code(report.script)),
        ("Errors fixed", str(fixed)),
        ("Files modified", _files_modified(report)),
    ]
    if report.branch:
        rows.append(("Branch", f"{code(report.branch)} at {code(report.commit or '')}"))
    limits = report.run_limits
    budget = (
        f"batch size {limits.batch_size}, {limits.max_batches} batches per DataLoader pass, "
        f"{limits.max_steps} optimizer steps outside DataLoader loops"
    )
    if limits.stopped_at:
        budget += f"; the last run was ended by the step budget at {code(limits.stopped_at)}, in a loop outside your code (not a pass)"
    if limits.left_loops:
        budget += "; loops left by the step budget (the script went on after them): " + ", ".join(
            f"{code(str(item.get('loop')))} ({item.get('kind')}, after {item.get('steps')} steps)" for item in limits.left_loops
        )
    rows.append(("Run limits", budget))
    rows.append(("Duration", f"{report.duration_s:.1f} s"))
    lines = ["| | |", "| --- | --- |", *(f"| {name} | {cell(value)} |" for name, value in rows)]
    return "\n".join(lines)


def _health_finding(finding: HealthFinding) -> str:
    head = f"⚠️ {code(finding.id)}" if finding.is_warning else f"ℹ️ {code(finding.id)} (information)"
    parts = [
        f"#### {head} at {_where(finding.file, finding.line) if finding.file else 'no source line'}",
        inline(finding.message),
    ]
    if finding.evidence:
        parts.append("<details><summary>Measured in the run</summary>\n\n"
                     + "\n".join(_evidence_items(finding.evidence)) + "\n\n</details>")
    fix = finding.fix
    if fix is not None:
        parts.append(
            f"Offered fix ({code(fix.get('rule', ''))}, {escape(str(fix.get('applicability', '')))}; not applied, "
            f"{code('repairbot lint --fix')} applies it):\n\n{fenced(str(fix.get('diff', '')), 'diff')}"
        )
    return "\n\n".join(parts)


def _health(report: RepairReport) -> str:
    """The health checks' findings: silent bugs the run showed (nothing crashed for them)."""
    if not report.health:
        return "### Health checks\n\nNo health check found anything in the run."
    count = len(report.health)
    intro = (
        f"{count} finding{'s' if count != 1 else ''} of the run-time health checks: bugs that do not "
        "crash the script, seen in the steps it ran."
    )
    return "\n\n".join(["### Health checks", intro, *(_health_finding(f) for f in report.health)])


def _environment(environment: Mapping[str, Any]) -> str | None:
    if not environment:
        return None
    names = {"python": "Python", "torch": "torch", "cuda_available": "CUDA available"}
    rows = [
        f"| {names.get(str(key)) or _label(str(key))} | {cell(_value(str(key), value))} |"
        for key, value in environment.items()
    ]
    return "### Environment\n\n| | |\n| --- | --- |\n" + "\n".join(rows)


def _remaining(failure: Failure) -> str:
    frame = failure.user_frame
    where = _where(frame.file, frame.line) if frame else _where(None, None)
    return f"### Remaining failure at {where}\n\n{_failure_block(failure)}"


def _diff_section(diff: str, budget: int, caption: str = "") -> str:
    title = f"### Diff\n\n{caption}".rstrip()
    block = fenced(diff, "diff")
    if len(block.encode()) + len(title) + 2 <= budget:
        return f"{title}\n\n{block}"
    # cut at a line boundary, leaving room for the fence and the note
    room = max(0, budget - len(title) - 400)
    cut = diff.encode()[:room].decode("utf-8", "ignore")
    cut = cut[: cut.rfind("\n") + 1]
    return (
        f"{title}\n\n{fenced(cut, 'diff')}\n\n"
        f"The diff is cut here ({len(diff.encode())} bytes in all): the patch file and the JSON report hold all of it."
    )


def render_markdown(report: RepairReport, root: Path | None = None) -> str:
    """The report as Markdown; ``root`` is the folder the report's paths are relative to (the
    source lines around each failure are read from there; without it, only the traced line)."""
    if report.command == "doctor":
        icon = "✅" if report.exit_code == 0 else "⚠️"
        verdict = "healthy" if report.exit_code == 0 else (
            "crashed" if report.attempts or report.status is not Status.ALREADY_PASSING
            else f"{len(report.warnings)} health finding{'s' if len(report.warnings) != 1 else ''}"
        )
        head = [f"## {icon} repairbot doctor: {code(report.script)} {verdict}"]
    else:
        head = [f"## {_ICONS[report.status]} repairbot: {code(report.script)} {_HEADLINES[report.status]}"]
    if report.harness_fault is not None:
        head.append(f"repairbot's tracing harness failed (a bug in repairbot, not in the script):\n\n{fenced(report.error or '')}")
    elif report.status is Status.ERROR:
        head.append(f"repairbot refused to run:\n\n{fenced(report.error or 'bad input')}")
    head.append(_summary_table(report))
    if report.status is Status.ALREADY_PASSING:
        head.append(
            "The script runs without error under the harness."
            if report.command == "doctor" else "The script runs without error under the harness: nothing to fix."
        )
    sources = _SourceVersions(report, root)
    head.extend(_attempt(report, attempt, sources) for attempt in report.attempts)
    if report.remaining is not None:
        head.append(_remaining(report.remaining))
    if report.health or report.command == "doctor":
        head.append(_health(report))
    if report.output_tail is not None:
        head.append("### Output of the last run\n\n" + fenced(report.output_tail))
    tail = []
    environment = _environment(report.environment)
    if environment is not None:
        tail.append(environment)
    notes = list(report.notes)
    if report.scratch:
        notes.append(f"the runs' scratch folder was kept: {report.scratch}")
    if notes:
        tail.append("### Notes\n\n" + "\n".join(f"- {inline(note)}" for note in notes))
    tail.append(f"<sub>repairbot {__version__}, report schema {code(SCHEMA)}</sub>")
    if report.diff:
        used = sum(len(p.encode()) + 2 for p in [*head, *tail])
        caption = (
            "" if report.status is Status.FIXED
            else "The verified fixes of the earlier failures (not applied: the repair gave up later):"
        )
        head.append(_diff_section(report.diff, MAX_BYTES - used - len(caption), caption))
    text = "\n\n".join([*head, *tail]) + "\n"
    return report.locations.text(text) if report.locations else text
