"""Renders a ``RepairReport`` as SARIF 2.1.0: one result per failure, the fix as replacements.

Each result's rule is the pattern that recognised the failure (``unclassified`` when none
did); its location is the fix site (else the place a diagnosis applies to, else the failing
line) and its related location the failing line. A kept fix becomes ``fixes[]``: replacements
computed from the fix's diff, each as narrow as the change itself, every ``deletedRegion``
relative to the file the attempt started from. Columns are Unicode code points, 1-based
(``run.columnKind``); paths are relative to ``%SRCROOT%``, the repository's top folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repairbot import __version__
from repairbot.classify import candidates
from repairbot.health import checks_by_id, health_checks
from repairbot.output.diff import Hunk, PatchError, parse_patch
from repairbot.output.report import evidence_line, failing_frame, report_to_json
from repairbot.pattern import Pattern
from repairbot.results import Attempt, RepairReport
from repairbot.types import Failure, Frame, HealthFinding, Span, Status

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
UNCLASSIFIED = "unclassified"
ROOT_ID = "%SRCROOT%"
_MAX_MESSAGE = 4_000

Region = dict[str, int]


# --------------------------------------------------------------------------------------------
# Rules: the pattern catalogue
# --------------------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """A docstring section as plain prose: reST literals as Markdown code, lines joined."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p).replace("``", "`")


def documented_rule(rule_id: str, name: str, title: str, doc: Mapping[str, str], lead: str) -> dict[str, Any]:
    """A SARIF rule's descriptions, from a documented class (a pattern, a lint rule): the
    docstring section ``lead`` as its full description, every section in its help."""
    sections = [(heading, _plain(doc[heading])) for heading in doc if heading and doc[heading].strip()]
    described = _plain(doc.get(lead, "")) or title
    return {
        "id": rule_id,
        "name": name,
        "shortDescription": {"text": title},
        "fullDescription": {"text": described},
        "help": {
            "text": "\n\n".join(f"{heading}: {body}" for heading, body in sections) or described,
            "markdown": "\n\n".join(f"**{heading}**\n\n{body}" for heading, body in sections) or described,
        },
    }


def _rule(pattern: Pattern) -> dict[str, Any]:
    return {
        **documented_rule(pattern.ID, type(pattern).__name__, pattern.TITLE, pattern.documentation(), "What it fixes"),
        "defaultConfiguration": {"level": "error"},
        "properties": {
            "applicability": pattern.APPLICABILITY.value,
            "fixes": pattern.FIXES,
            "tags": sorted({"pytorch", *pattern.TAGS}),
            "problem.severity": "error",
            "precision": "very-high",
        },
    }


_UNCLASSIFIED_RULE: dict[str, Any] = {
    "id": UNCLASSIFIED,
    "name": "Unclassified",
    "shortDescription": {"text": "A failure that no pattern recognises"},
    "fullDescription": {"text": "The script failed with an error that none of repairbot's patterns recognises."},
    "help": {
        "text": "repairbot has no automatic fix for this failure; the result shows the error and where the script failed.",
        "markdown": "repairbot has no automatic fix for this failure; the result shows the error and where the script failed.",
    },
    "defaultConfiguration": {"level": "error"},
    "properties": {"fixes": False, "tags": ["pytorch"], "problem.severity": "error"},
}


def _health_rule(check: str) -> dict[str, Any]:
    """A health check's rule, from its documentation (the first paragraph is what a finding
    means); an id no check declares gets a generic one."""
    name = "".join(part.capitalize() for part in check.split("-"))
    known = checks_by_id().get(check)
    rule: dict[str, Any]
    if known is None:
        text = "A run-time health check of repairbot."
        rule = {"id": check, "name": name, "shortDescription": {"text": check}, "fullDescription": {"text": text},
                "help": {"text": text, "markdown": text}}
        level = "warning"
    else:
        rule = documented_rule(check, name, known.TITLE, known.documentation(), "")
        level = known.LEVEL
    return {
        **rule,
        "defaultConfiguration": {"level": _SARIF_LEVEL[level]},
        "properties": {"tags": ["pytorch", "health"], "problem.severity": _SEVERITY[level], "kind": "health-check"},
    }


# a finding's level -> SARIF's result level, and GitHub code scanning's problem.severity
_SARIF_LEVEL = {"warning": "warning", "information": "note"}
_SEVERITY = {"warning": "warning", "information": "recommendation"}


# --------------------------------------------------------------------------------------------
# Replacements from a diff
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """A run of changed lines in a hunk: ``old`` from line ``line`` on is replaced by ``new``."""

    line: int  # first old line (where the new lines go, for a pure insertion)
    old: tuple[str, ...]
    new: tuple[str, ...]


def changes(hunk: Hunk) -> Iterator[Change]:
    old_line = hunk.old_start if hunk.old_count else hunk.old_start + 1
    old: list[str] = []
    new: list[str] = []
    start = old_line
    for tag, text in (*hunk.lines, (" ", "")):  # a sentinel context line ends the last run
        if tag == " ":
            if old or new:
                yield Change(start, tuple(old), tuple(new))
                old, new = [], []
            old_line += 1
            start = old_line
        elif tag == "-":
            old.append(text)
            old_line += 1
        else:
            new.append(text)


def _position(lines: Sequence[str], first_line: int, offset: int) -> tuple[int, int]:
    """(line, column), 1-based, of a character offset into ``lines`` that start at ``first_line``;
    an offset inside a line ending is the start of the next line."""
    for index, text in enumerate(lines):
        content = len(text.rstrip("\r\n"))
        if offset <= content:
            return first_line + index, offset + 1
        if offset < len(text):
            return first_line + index + 1, 1
        offset -= len(text)
    return first_line + len(lines), 1


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def replacement(change: Change) -> dict[str, Any]:
    """The change as one SARIF replacement, trimmed to the characters that differ."""
    old, new = "".join(change.old), "".join(change.new)
    prefix = _common_prefix(old, new)
    # the common suffix may not overlap the prefix ("a\n" -> "a\na\n" inserts one "a\n")
    suffix = min(_common_prefix(old[::-1], new[::-1]), min(len(old), len(new)) - prefix)
    start_line, start_column = _position(change.old, change.line, prefix)
    end_line, end_column = _position(change.old, change.line, len(old) - suffix)
    result: dict[str, Any] = {
        "deletedRegion": {
            "startLine": start_line,
            "startColumn": start_column,
            "endLine": end_line,
            "endColumn": end_column,
        }
    }
    inserted = new[prefix:len(new) - suffix]
    if inserted:
        result["insertedContent"] = {"text": inserted}
    return result


def replacements(diff: str) -> dict[str, list[dict[str, Any]]]:
    """Every file's replacements, in file order (as SARIF applies them)."""
    return {
        patch.path: [replacement(change) for hunk in patch.hunks for change in changes(hunk)]
        for patch in parse_patch(diff)
    }


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def _span_region(span: Span) -> Region:
    return {"startLine": span.line, "startColumn": span.col + 1, "endLine": span.end_line, "endColumn": span.end_col + 1}


def _frame_region(frame: Frame | None, line: int) -> Region:
    region = {"startLine": line}
    if frame is not None and frame.line == line and frame.col is not None:
        region["startColumn"] = frame.col + 1
        if frame.end_col is not None and frame.end_line is not None and frame.end_line >= line:
            region["endLine"] = frame.end_line
            region["endColumn"] = frame.end_col + 1
    return region


def _location(uri: str, region: Region | None = None, message: str | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": uri, "uriBaseId": ROOT_ID}}
    if region is not None:
        physical["region"] = region
    location: dict[str, Any] = {"physicalLocation": physical}
    if message:
        location["message"] = {"text": message}
    return location


def _message(failure: Failure) -> str:
    message = failure.message.strip()
    text = f"{failure.exc_type}: {message}" if message else failure.exc_type or "the script failed"
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " [...]"


class _Results:
    def __init__(self, report: RepairReport, patterns: Sequence[Pattern]) -> None:
        self.report = report
        self.patterns = patterns
        self.rules = [_rule(p) for p in patterns] + [_UNCLASSIFIED_RULE]
        known = {rule["id"] for rule in self.rules}
        health = dict.fromkeys([*(c.ID for c in health_checks()), *(f.id for f in report.health)])
        self.rules += [_health_rule(check) for check in health if check not in known]
        self.index = {rule["id"]: i for i, rule in enumerate(self.rules)}

    def _rule_id(self, pattern: str | None) -> str:
        return pattern if pattern is not None and pattern in self.index else UNCLASSIFIED

    def attempt(self, attempt: Attempt, evidence: dict[str, Any]) -> dict[str, Any]:
        """``evidence``: the attempt's evidence as the JSON report holds it."""
        failure = attempt.failure
        rule = self._rule_id(attempt.fix.site.pattern if attempt.fix else attempt.pattern)
        failing = (
            _location(attempt.failure_file, _frame_region(failing_frame(attempt), attempt.failure_line),
                      "the script failed here")
            if attempt.failure_file and attempt.failure_line else None
        )
        diagnosis = next((d for d in attempt.declines if d.diagnosis), None)
        text = _message(failure)
        properties: dict[str, Any] = {"attempt": attempt.n, "outcome": attempt.outcome.value}
        result: dict[str, Any] = {"ruleId": rule, "ruleIndex": self.index[rule], "level": "error"}
        fixes: list[dict[str, Any]] = []
        fix = attempt.fix
        if fix is not None:
            site = fix.site
            verdict = "verified" if attempt.applied else "discarded"
            text += f"\n\nFix ({verdict}, {site.applicability.value}): {site.summary}"
            if site.evidence_text:
                text += f"\nEvidence: {site.evidence_text}"
            location = _location(fix.file, _span_region(site.span), "the fix goes here")
            properties.update(applicability=site.applicability.value, applied=attempt.applied)
            if attempt.applied:
                fixes = [self._fix(site.summary, fix.diff)]
        elif diagnosis is not None and diagnosis.file and diagnosis.line:
            text += f"\n\nDiagnosis: {diagnosis.reason}\nRemedy: {diagnosis.diagnosis}"
            location = _location(diagnosis.file, {"startLine": diagnosis.line}, "the remedy applies here")
        else:
            if diagnosis is not None:
                text += f"\n\nDiagnosis: {diagnosis.reason}\nRemedy: {diagnosis.diagnosis}"
            location = failing or _location(self.report.script)
        result["message"] = {"text": text}
        result["locations"] = [location]
        if failing is not None:
            result["relatedLocations"] = [{"id": 1, **failing}]
        if fixes:
            result["fixes"] = fixes
        if evidence:
            properties["evidence"] = evidence
        result["properties"] = properties
        return result

    def _fix(self, summary: str, diff: str) -> dict[str, Any]:
        try:
            per_file = replacements(diff)
        except PatchError as error:  # never expected: repairbot wrote the diff itself
            raise ValueError(f"the fix's diff cannot be read back: {error}") from None
        return {
            "description": {"text": summary},
            "artifactChanges": [
                {"artifactLocation": {"uri": path, "uriBaseId": ROOT_ID}, "replacements": items}
                for path, items in per_file.items()
            ],
        }

    def health(self, finding: HealthFinding) -> dict[str, Any]:
        """A health finding: a warning (information: a note) at the user's line, the offered fix
        as a SARIF fix."""
        text = finding.message
        if finding.evidence:
            text += f"\nEvidence: {evidence_line(finding.evidence)}"
        location = (
            _location(finding.file, {"startLine": finding.line} if finding.line else None)
            if finding.file else _location(self.report.script)
        )
        result: dict[str, Any] = {
            "ruleId": finding.id,
            "ruleIndex": self.index[finding.id],
            "level": "warning" if finding.is_warning else "note",
            "message": {"text": text},
            "locations": [location],
        }
        fix = finding.fix
        if fix is not None and fix.get("diff"):
            result["message"]["text"] += f"\n\nOffered fix ({fix.get('rule')}, {fix.get('applicability')}): not applied."
            result["fixes"] = [self._fix(f"{fix.get('rule')}: the lint rule's fix", str(fix["diff"]))]
        result["properties"] = {"health": True, "evidence": dict(finding.evidence)}
        return result

    def remaining(self, failure: Failure) -> dict[str, Any]:
        ranked = candidates(failure, self.patterns)
        rule = self._rule_id(ranked[0].pattern.ID if ranked else None)
        frame = failure.user_frame
        location = (
            _location(frame.file, _frame_region(frame, frame.line), "the script failed here")
            if frame else _location(self.report.script)
        )
        return {
            "ruleId": rule,
            "ruleIndex": self.index[rule],
            "level": "error",
            "message": {"text": _message(failure)},
            "locations": [location],
            "properties": {"outcome": "remaining"},
        }


def render_sarif(report: RepairReport, patterns: Iterable[Pattern], root: Path | None = None) -> str:
    """The report as a SARIF 2.1.0 log; ``patterns`` is the catalogue (the rules), ``root`` the
    folder the report's paths are relative to."""
    data = report_to_json(report)
    results = _Results(report, tuple(patterns))
    items = [
        results.attempt(attempt, item["failure"]["evidence"])
        for attempt, item in zip(report.attempts, data["attempts"], strict=True)
    ]
    if report.remaining is not None:
        items.append(results.remaining(report.remaining))
    items.extend(results.health(finding) for finding in report.health)
    invocation: dict[str, Any] = {
        "executionSuccessful": report.status is not Status.ERROR,
        "exitCode": report.exit_code,
        "properties": {"status": report.status.value, "stop_reason": report.stop_reason.value},
    }
    if report.error:
        invocation["toolExecutionNotifications"] = [{"level": "error", "message": {"text": report.error}}]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "repairbot",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": results.rules,
            }
        },
        "invocations": [invocation],
        "automationDetails": {"id": f"repairbot/{report.script}/"},
        "columnKind": "unicodeCodePoints",
        "results": items,
        "properties": {
            "status": data["status"],
            "stop_reason": data["stop_reason"],
            "files_modified": data["files_modified"],
            "branch": data["branch"],
            "commit": data["commit"],
            "environment": data["environment"],
        },
    }
    if root is not None:
        run["originalUriBaseIds"] = {ROOT_ID: {"uri": root.resolve().as_uri() + "/"}}
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    if report.locations:
        log = report.locations.json(log)
    return json.dumps(log, indent=2) + "\n"
