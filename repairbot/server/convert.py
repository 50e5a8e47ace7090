"""The lint engine's findings and fixed text as LSP values.

The engine counts 1-based lines and columns in characters (code points); LSP counts 0-based
lines and, by default, UTF-16 code units. pygls negotiates the encoding (``positionEncoding``)
and its codec converts a column of code points to the client's units.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

import repairbot
from repairbot.lint.engine import PARSE_ERROR, Finding, common_ends
from repairbot.lint.rule import Severity

SOURCE = "repairbot"
FIX_ALL_KIND = "source.fixAll.repairbot"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # LSP's line terminators (Python's splitlines knows more)

DOCS_PAGE = Path(repairbot.__file__).resolve().parent.parent / "docs" / "lint-rules.md"


SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}


def rule_page(rule: str, docs_url: str | None = None) -> str:
    """The rule's section of docs/lint-rules.md (``docs_url`` replaces the page's address)."""
    base = docs_url or DOCS_PAGE.as_uri()
    return f"{base}#{rule}"


def lsp_lines(text: str) -> list[str]:
    """The text's lines as LSP counts them, without their terminators."""
    return _LINE_BREAK.split(text)


def _line_starts(text: str) -> list[int]:
    return [0, *(match.end() for match in _LINE_BREAK.finditer(text))]


def position_at(text: str, offset: int, codec: PositionCodec, starts: Sequence[int] | None = None) -> types.Position:
    """The LSP position of a character offset into ``text``."""
    starts = starts if starts is not None else _line_starts(text)
    line = bisect.bisect_right(starts, offset) - 1
    column = text[starts[line]:offset]
    return types.Position(line=line, character=codec.client_num_units(column))


def _position(lines: Sequence[str], line: int, column: int, codec: PositionCodec) -> types.Position:
    """A 1-based line and character column of the engine as an LSP position."""
    index = min(max(line - 1, 0), len(lines) - 1)
    return types.Position(line=index, character=codec.client_num_units(lines[index][:max(column - 1, 0)]))


def diagnostic(finding: Finding, lines: Sequence[str], codec: PositionCodec, docs_url: str | None = None) -> types.Diagnostic:
    start = _position(lines, finding.line, finding.column, codec)
    end = _position(lines, finding.end_line, finding.end_column, codec)
    parse_error = finding.rule == PARSE_ERROR
    if parse_error:  # the engine gives a point: mark the rest of the line (an empty range is invisible)
        end = types.Position(line=start.line, character=codec.client_num_units(lines[start.line]))
    return types.Diagnostic(
        range=types.Range(start=start, end=end),
        message=finding.message,
        severity=SEVERITY[finding.severity],
        code=finding.rule,
        code_description=None if parse_error else types.CodeDescription(href=rule_page(finding.rule, docs_url)),
        source=SOURCE,
    )


def minimal_edit(before: str, after: str, codec: PositionCodec) -> types.TextEdit | None:
    """The one TextEdit that turns ``before`` into ``after`` (their common ends kept), or None."""
    if before == after:
        return None
    prefix, suffix = common_ends(before, after)
    # never cut a CRLF in two: a position between \r and \n does not exist in LSP
    if 0 < prefix < len(before) and before[prefix - 1] == "\r" and before[prefix] == "\n":
        prefix -= 1
    end = len(before) - suffix
    if 0 < end < len(before) and before[end - 1] == "\r" and before[end] == "\n":
        end += 1
        suffix -= 1
    starts = _line_starts(before)
    return types.TextEdit(
        range=types.Range(start=position_at(before, prefix, codec, starts), end=position_at(before, end, codec, starts)),
        new_text=after[prefix:len(after) - suffix],
    )
