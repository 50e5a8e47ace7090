"""The outputs of ``repairbot lint``: text, JSON, SARIF 2.1.0 and GitHub workflow commands.

Lines and columns are 1-based everywhere (columns count characters, SARIF's
``unicodeCodePoints``); paths are relative to the working directory when inside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repairbot import __version__
from repairbot.action.github import escape_data, escape_property
from repairbot.lint.engine import PARSE_ERROR, Finding
from repairbot.lint.rule import LintRule
from repairbot.lint.run import LintReport
from repairbot.output.sarif import documented_rule

FORMATS = ("text", "json", "sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ROOT_ID = "%SRCROOT%"

# The contract's shape of ``--format json``: a list of these objects.
FINDINGS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "repairbot lint findings",
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "line", "column", "rule", "message", "fix"],
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "cell": {"type": "integer", "minimum": 1, "description": "In a notebook: the code cell; line is within it."},
            "line": {"type": "integer", "minimum": 1},
            "column": {"type": "integer", "minimum": 1},
            "rule": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
            "message": {"type": "string", "minLength": 1},
            "fix": {"enum": ["safe", "unsafe", "none"]},
        },
    },
}


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def finding_json(finding: Finding) -> dict[str, Any]:
    cell = {"cell": finding.cell} if finding.cell is not None else {}
    return {
        "path": finding.path, **cell, "line": finding.line, "column": finding.column,
        "rule": finding.rule, "message": finding.message, "fix": finding.fix,
    }


def _where(finding: Finding) -> str:
    """``path:line:col``; ``NB.ipynb:cell 4:2:5`` in a notebook (as ruff writes it)."""
    cell = f":cell {finding.cell}" if finding.cell is not None else ""
    return f"{cell}:{finding.line}:{finding.column}"


def render_json(report: LintReport) -> str:
    return json.dumps([finding_json(f) for f in report.findings], indent=2) + "\n"


def render_text(report: LintReport, color: bool = False) -> str:
    """``path:line:col: rule message``, one per finding; ``path: cannot parse: reason (line L,
    column C)`` for a file that could not be checked."""

    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color else text

    def line(f: Finding) -> str:
        if f.rule == PARSE_ERROR:
            return f"{paint(f.path, '1')}: {paint(f.message, '1;31')} (line {f.line}, column {f.column})\n"
        return f"{paint(f.path, '1')}{_where(f)}: {paint(f.rule, '1;31')} {f.message}\n"

    return "".join(map(line, report.findings))


def summary(report: LintReport, verbose: bool = False) -> str:
    """The closing lines: what was found, fixed, or left, and how to fix the rest."""
    lines = [f"repairbot: note: {note}" for note in report.notes]
    lines += [f"repairbot: internal error (a bug of repairbot; please report it): {e}" for e in report.errors]
    unchecked = len(report.unchecked)
    findings = [f for f in report.findings if f.rule != PARSE_ERROR]
    files = len({f.path for f in findings})
    if report.dry_run:
        lines.append(
            f"Would fix {_plural(report.fixed, 'finding')} in {_plural(len(report.fixed_files), 'file')}; "
            f"{_plural(len(findings), 'finding')} would remain."
        )
    elif report.fixed:
        lines.append(
            f"Fixed {_plural(report.fixed, 'finding')} in {_plural(len(report.fixed_files), 'file')}; "
            f"{_plural(len(findings), 'finding')} left."
        )
    if not report.dry_run:
        if findings:
            hints = []
            if report.fixable:
                hints.append(f"{report.fixable:,} fixable with --fix")
            if report.unsafe_fixable:
                hints.append(f"{report.unsafe_fixable:,} more with --unsafe-fixes")
            extra = f" ({'; '.join(hints)})" if hints else ""
            lines.append(f"Found {_plural(len(findings), 'finding')} in {_plural(files, 'file')}{extra}.")
        elif not report.fixed and not unchecked:
            lines.append(f"All checks passed ({_plural(report.files, 'file')}).")
    if unchecked:
        lines.append(f"{_plural(unchecked, 'file')} could not be checked (not read or not parsed).")
    if verbose:
        lines.append(
            f"Checked {_plural(report.files, 'file')} ({report.parsed:,} parsed, {_plural(report.lines, 'line')}) "
            f"with {_plural(len(report.rules), 'rule')} in {report.duration_s:.2f} s on {_plural(report.jobs, 'worker')}."
        )
    return "".join(line + "\n" for line in lines)


def _github_level(finding: Finding) -> str:
    return {"error": "error", "warning": "warning"}.get(finding.severity.value, "notice")


def render_github(report: LintReport) -> str:
    """GitHub Actions workflow commands: one annotation per finding, on its file and line."""
    lines = []
    for f in report.findings:
        if f.cell is not None:  # a notebook: the annotation goes on the .ipynb's own line
            properties = ",".join([
                f"file={escape_property(f.path)}", f"line={f.source_line or 1}",
                f"title={escape_property(f'repairbot {f.rule} (cell {f.cell}, line {f.line})')}",
            ])
            text = f"{f.rule}: cell {f.cell}, line {f.line}, column {f.column}: {f.message}"
            lines.append(f"::{_github_level(f)} {properties}::{escape_data(text)}\n")
            continue
        properties = ",".join([
            f"file={escape_property(f.path)}", f"line={f.line}", f"col={f.column}",
            f"endLine={f.end_line}", f"endColumn={f.end_column}", f"title={escape_property('repairbot ' + f.rule)}",
        ])
        lines.append(f"::{_github_level(f)} {properties}::{escape_data(f'{f.rule}: {f.message}')}\n")
    return "".join(lines)


def _sarif_rule(rule: type[LintRule]) -> dict[str, Any]:
    return {
        **documented_rule(rule.ID, rule.__name__, rule.TITLE, rule.documentation(), lead=""),
        "defaultConfiguration": {"level": rule.SEVERITY.sarif_level},
        "properties": {
            "fix": rule.fix_kinds(),
            "tags": ["pytorch", "lint"],
            "problem.severity": rule.SEVERITY.sarif_level.replace("note", "recommendation"),
        },
    }


_PARSE_ERROR_RULE: dict[str, Any] = {
    "id": PARSE_ERROR,
    "name": "ParseError",
    "shortDescription": {"text": "A file that cannot be read or parsed"},
    "fullDescription": {"text": "The file could not be read or parsed as Python, so no rule checked it."},
    "help": {"text": "Fix the syntax error (or the encoding) and lint again.", "markdown": "Fix the syntax error (or the encoding) and lint again."},
    "defaultConfiguration": {"level": "error"},
    "properties": {"fix": "none", "tags": ["pytorch", "lint"], "problem.severity": "error"},
}


def _sarif_result(finding: Finding, index: dict[str, int]) -> dict[str, Any]:
    artifact = {"uri": finding.path, "uriBaseId": ROOT_ID}
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": index[finding.rule],
        "level": finding.severity.sarif_level,
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": {
            "artifactLocation": artifact,
            "region": {
                "startLine": finding.line, "startColumn": finding.column,
                "endLine": finding.end_line, "endColumn": finding.end_column,
            },
        }}],
        "properties": {"fix": finding.fix},
    }
    if finding.cell is not None:  # a notebook: lines are the code cell's (ruff's convention)
        result["locations"][0]["properties"] = {"cell": finding.cell}
        result["properties"]["cell"] = finding.cell
        result["message"]["text"] = f"cell {finding.cell}: {finding.message}"
    if finding.edit is not None:
        edit = finding.edit
        replacement: dict[str, Any] = {
            "deletedRegion": {
                "startLine": edit.line, "startColumn": edit.column, "endLine": edit.end_line, "endColumn": edit.end_column,
            },
        }
        if edit.text:
            replacement["insertedContent"] = {"text": edit.text}
        result["fixes"] = [{
            "description": {"text": f"{finding.rule} ({finding.fix} fix)"},
            "artifactChanges": [{"artifactLocation": artifact, "replacements": [replacement]}],
        }]
    return result


def render_sarif(report: LintReport, root: Path) -> str:
    """The findings as a SARIF 2.1.0 log; ``root`` is the folder their paths are relative to."""
    rules: list[dict[str, Any]] = [_sarif_rule(rule) for rule in report.rules] + [_PARSE_ERROR_RULE]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    invocation: dict[str, Any] = {
        "executionSuccessful": not report.errors,
        "exitCode": report.exit_code,
    }
    notifications = [{"level": "note", "message": {"text": note}} for note in report.notes]
    notifications += [{"level": "error", "message": {"text": error}} for error in report.errors]
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "repairbot", "version": __version__, "semanticVersion": __version__,
            "rules": rules,
        }},
        "invocations": [invocation],
        "automationDetails": {"id": "repairbot-lint/"},
        "originalUriBaseIds": {ROOT_ID: {"uri": root.resolve().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_sarif_result(f, index) for f in report.findings],
        "properties": {"files": report.files, "fixed": report.fixed},
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2) + "\n"


def render(report: LintReport, output_format: str, root: Path, color: bool = False) -> str:
    """The findings in one of FORMATS (stdout's part; ``summary`` is the rest)."""
    if output_format == "json":
        return render_json(report)
    if output_format == "sarif":
        return render_sarif(report, root)
    if output_format == "github":
        return render_github(report)
    return render_text(report, color)
