"""Lints a document again after an edit, redoing only what the edit can change: the server's
linter (``repairbot.lint.engine.lint_bytes`` stays the one full path, and the result here is
the one it gives on the new text, exactly).

- Parse: the top-level statements the changed text touches (with the neighbour on a side where
  the change reaches their edge) are parsed again alone and spliced into the last module; the
  others are kept, the same node objects. Where anything is doubtful the whole text is parsed:
  a change in the module's header, its first statement or first two lines (an encoding
  declaration), a chunk that does not parse or whose code does not come back exactly, comment
  lines whose owner could change, a change of the indentation the file is written in.
- Rules: ``Scope.MODULE`` rules run on the whole module every time; ``Scope.STATEMENT`` rules
  run on the new statements alone, their reports on the other statements kept, unless what
  such rules read of the rest of the file changed (the active rules, an import statement, the
  quote the file mostly uses, which of the kept classes are LightningModules): then on all.
- Positions: each top-level statement's node ranges are generated once, then shifted by the
  lines that came or went above it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from repairbot.cst_walk import descendants, imports
from repairbot.frameworks import class_defs, lightning_among
from repairbot.lint.engine import (
    FileResult,
    Finding,
    _parse_error,
    _Pass,
    common_ends,
    count_lines,
    import_table,
    lint_bytes,
    positions,
    run_rules,
    top_level_ranges,
)
from repairbot.lint.rule import FileContext, LintRule, Report, Scope, majority_quote, quote_counts

# how often a chunk may grow by a statement (comment lines whose owner is doubtful) before
# the whole text is parsed instead
MAX_WIDENINGS = 8


@dataclass(frozen=True)
class Version:
    """One parsed version of the document: its text, module, and where each top-level
    statement is (its code's length and newlines; the code starts with its comment lines)."""

    text: str
    module: cst.Module
    header: tuple[int, int]  # the module header's length and newlines
    sizes: tuple[int, ...]
    newlines: tuple[int, ...]
    first_indented: int | None  # the first statement holding an indented block (it sets the indent)

    def starts(self) -> list[int]:
        return list(itertools.accumulate(self.sizes[:-1], initial=self.header[0]))

    def first_lines(self) -> list[int]:
        return list(itertools.accumulate(self.newlines[:-1], initial=self.header[1] + 1))


def _codes(module: cst.Module, nodes: Sequence[cst.CSTNode]) -> list[str]:
    return [module.code_for_node(node) for node in nodes]


def _reproduces(text: str, parts: Sequence[str], trailing_newline: bool) -> bool:
    """Whether ``parts`` joined are ``text`` (less the last newline for a module without one)."""
    joined = "".join(parts)
    if trailing_newline:
        return joined == text
    return joined.startswith(text) and joined[len(text):] in ("\n", "\r\n", "\r")


def _line_breaks(code: str) -> int:
    """How many lines a code ends: line feeds, CR LFs and bare CRs, as Python and LibCST count."""
    return code.count("\n") + code.count("\r") - code.count("\r\n")


def _indented(statement: cst.CSTNode) -> bool:
    return any(type(node) is cst.IndentedBlock for node in descendants(statement))


def _first_indented(body: Sequence[cst.BaseStatement], offset: int = 0) -> int | None:
    return next((offset + index for index, statement in enumerate(body) if _indented(statement)), None)


def full_version(text: str, module: cst.Module) -> Version | None:
    """The version of a module parsed whole; None where its code does not give back ``text``."""
    header = "".join(_codes(module, module.header))
    codes = _codes(module, module.body)
    if not _reproduces(text, [header, *codes, *_codes(module, module.footer)], module.has_trailing_newline):
        return None
    return Version(
        text, module, (len(header), _line_breaks(header)), tuple(map(len, codes)),
        tuple(map(_line_breaks, codes)), _first_indented(module.body),
    )


def _doubtful_lines(statement: cst.BaseStatement) -> bool:
    """Whether a statement's comment lines before it could belong to the block above instead
    (an indented comment or blank line: LibCST gives the previous block those indented deeper
    than the statement)."""
    leading: Sequence[cst.EmptyLine] = getattr(statement, "leading_lines", ())
    return any(line.whitespace.value for line in leading)


def splice(last: Version, text: str) -> tuple[Version, list[cst.BaseStatement]] | None:
    """``text`` parsed by parsing again only the top-level statements its change from
    ``last.text`` touches, with the new statements; None where that cannot be done surely."""
    body = list(last.module.body)
    if len(body) < 2:
        return None
    prefix, suffix = common_ends(last.text, text)
    starts = last.starts()
    footer_start = starts[-1] + last.sizes[-1]
    # the statement with the last character before the change, and the one with the first after
    first = bisect.bisect_right(starts, prefix - 1) - 1
    change_end = len(last.text) - suffix
    final = len(body) - 1 if change_end >= footer_start else bisect.bisect_right(starts, change_end) - 1
    delta = len(text) - len(last.text)
    lines = last.first_lines()
    for _ in range(MAX_WIDENINGS):
        if first < 1 or lines[first] <= 2:
            return None  # the header, the first statement, a possible encoding line
        to_end = final == len(body) - 1
        chunk = text[starts[first] : len(text) if to_end else starts[final + 1] + delta]
        attempt = _parse_chunk(last.module, chunk, to_end)
        if attempt is None:
            return None
        new, parsed, widen = attempt
        if widen == "left":
            first -= 1
        elif widen == "right" or (not to_end and _doubtful_lines(body[final + 1])):
            final += 1
        else:
            return _spliced(last, text, chunk, first, final, new, parsed)
    return None


def _parse_chunk(
    module: cst.Module, chunk: str, to_end: bool,
) -> tuple[list[cst.BaseStatement], cst.Module, str | None] | None:
    """The statements of a chunk of top-level statements, parsed after a line of its own that
    keeps the chunk's comments off the module header; and which way the chunk must grow
    ("left": its first comment lines may belong to the block above; "right": its last ones
    belong to the statement after it), or None where it does not parse or come back exactly."""
    anchor = "pass" + module.default_newline
    try:
        parsed = cst.parse_module(anchor + chunk)
    except Exception:  # a syntax error, a parser limit: the whole text says which
        return None
    if parsed.header or not parsed.body or parsed.code_for_node(parsed.body[0]) != anchor:
        return None
    new: list[cst.BaseStatement] = list(parsed.body[1:])
    if new and _doubtful_lines(new[0]):
        return new, parsed, "left"
    if parsed.footer and not to_end:
        return new, parsed, "right"
    return new, parsed, None


def _spliced(
    last: Version, text: str, chunk: str, first: int, final: int, new: list[cst.BaseStatement], parsed: cst.Module,
) -> tuple[Version, list[cst.BaseStatement]] | None:
    """The module of ``text``: ``last``'s with statements ``first`` to ``final`` replaced by
    ``new`` (parsed from ``chunk``), where the new module's code is surely ``text``."""
    module = last.module
    to_end = final == len(module.body) - 1
    indent = _default_indent(last, first, final, new, parsed)
    if indent is None:
        return None
    # the new statements' code as the spliced module prints it, which must be the chunk's text
    printer = cst.Module(body=[], default_indent=indent, default_newline=module.default_newline)
    codes = _codes(printer, new)
    footer = parsed.footer if to_end else module.footer
    trailing = parsed.has_trailing_newline if to_end else module.has_trailing_newline
    if not _reproduces(chunk, [*codes, *(_codes(printer, footer) if to_end else ())], trailing or not to_end):
        return None
    body = [*module.body[:first], *new, *module.body[final + 1 :]]
    spliced = module.with_changes(body=body, footer=footer, has_trailing_newline=trailing, default_indent=indent)
    kept_after = len(module.body) - final - 1
    if last.first_indented is not None and last.first_indented < first:
        first_indented: int | None = last.first_indented
    else:
        first_indented = _first_indented(new, first)
        if first_indented is None and last.first_indented is not None:
            first_indented = last.first_indented - (final + 1 - first) + len(new)
    version = Version(
        text, spliced, last.header,
        (*last.sizes[:first], *map(len, codes), *last.sizes[len(last.sizes) - kept_after :]),
        (*last.newlines[:first], *map(_line_breaks, codes), *last.newlines[len(last.newlines) - kept_after :]),
        first_indented,
    )
    return version, new


def _default_indent(
    last: Version, first: int, final: int, new: Sequence[cst.BaseStatement], parsed: cst.Module,
) -> str | None:
    """The indentation the new text is written in (LibCST's ``default_indent``: that of the
    first indented block), where the kept statements were read with it; None otherwise."""
    before = last.module.default_indent
    chunk_indented = any(_indented(statement) for statement in new)
    if last.first_indented is not None and last.first_indented < first:
        # set above the chunk: the chunk's blocks must have been read with it too
        return before if not chunk_indented or parsed.default_indent == before else None
    if chunk_indented:
        # set in the chunk: the kept blocks below were read with the old one
        return parsed.default_indent if parsed.default_indent == before or last.first_indented is None else None
    # set below the chunk, as it was, or nowhere; not where it was set by the replaced statements
    return before if last.first_indented is None or last.first_indented > final else None


@dataclass(frozen=True)
class _Summary:
    """What ``Scope.STATEMENT`` rules may read of a top-level statement from elsewhere: its
    strings' quotes (``FileContext.string_literal``) and its classes (``lightning_hook``)."""

    quotes: tuple[int, int]
    classes: tuple[cst.ClassDef, ...]


class IncrementalLinter:
    """One document's lints, each from the last one (``lint_bytes``'s result, exactly); the
    server keeps one per open document. Not thread-safe: one lint at a time."""

    def __init__(self, path: Path, display: str, rules: Sequence[type[LintRule]], package: str | None) -> None:
        self.path, self.display, self.rules, self.package = path, display, tuple(rules), package
        self.last: Version | None = None
        self.env: tuple[object, ...] | None = None
        self.lightning: set[cst.ClassDef] = set()
        self.summaries: dict[cst.BaseStatement, _Summary] = {}
        # the STATEMENT rules' reports on each top-level statement, by rule id
        self.reports: dict[cst.CSTNode, dict[str, list[Report]]] = {}
        # each top-level statement's node ranges, from the line it started on then
        self.ranges: dict[cst.BaseStatement, tuple[int, dict[cst.CSTNode, CodeRange]]] = {}

    def lint(self, data: bytes, edits: bool = False) -> FileResult:
        """``lint_bytes(data, ...)`` (without fixes) for the document's new bytes."""
        lines = count_lines(data)
        active = tuple(rule for rule in self.rules if rule.applies(data, self.package))
        if not active:
            return FileResult(self.display, lines, parsed=False)
        parsed = self._parse(data)
        if isinstance(parsed, Exception):
            return FileResult(self.display, lines, parsed=True, findings=(_parse_error(self.display, data, parsed),))
        if parsed is None:  # a module whose code does not give back its text: no version to build on
            self.last = None
            return lint_bytes(data, self.path, self.display, self.rules, edits=edits, package=self.package)
        version, changed = parsed
        try:
            return FileResult(self.display, lines, parsed=True, findings=self._lint(version, changed, active, edits))
        except Exception as error:  # a rule's bug: as lint_bytes reports it
            self.last = None
            return FileResult(self.display, lines, parsed=True, error=f"{type(error).__name__}: {error}")

    def _parse(self, data: bytes) -> tuple[Version, set[cst.BaseStatement]] | Exception | None:
        """The new version and its top-level statements that are not the last version's; the
        error where the text does not parse; None where its module does not reproduce it."""
        if self.last is not None:
            try:
                text = data.decode(self.last.module.encoding)
            except (UnicodeDecodeError, LookupError):
                text = None
            if text == self.last.text:
                return self.last, set()
            found = splice(self.last, text) if text is not None else None
            if found is not None:
                return found[0], set(found[1])
        try:
            module = cst.parse_module(data)
        except Exception as error:  # a syntax error, an undecodable file, a parser limit
            return error
        version = full_version(data.decode(module.encoding, errors="replace"), module)
        return None if version is None else (version, set(module.body))

    def _lint(
        self, version: Version, changed: set[cst.BaseStatement], active: Sequence[type[LintRule]], edits: bool,
    ) -> tuple[Finding, ...]:
        module = version.module
        body = module.body
        present = set(body)
        removed = [statement for statement in self.summaries if statement not in present]
        for statement in changed:
            self.summaries[statement] = _Summary(quote_counts(statement), tuple(class_defs(statement)))
        summaries = [self.summaries[statement] for statement in body]
        self.summaries = dict(zip(body, summaries, strict=True))
        table = import_table(module)
        lightning = lightning_among([c for summary in summaries for c in summary.classes], table)
        quote = majority_quote(sum(s.quotes[0] for s in summaries), sum(s.quotes[1] for s in summaries))
        context = FileContext(self.path, module, table, self.package, _quote=quote, _lightning=lightning)
        env = (active, quote)
        kept = {c for statement in body if statement not in changed for c in self.summaries[statement].classes}
        rerun = present if (
            env != self.env
            # an import came, went or moved: the file's table, or the imports a statement sees
            or any(imports(statement) for statement in (*changed, *removed))
            or any(statement not in self.reports for statement in body if statement not in changed)
            or {c for c in self.lightning if c in kept} != {c for c in lightning.values() if c in kept}
        ) else changed
        self.env, self.lightning, self.last = env, set(lightning.values()), None

        by_scope = {scope: [rule for rule in active if rule.SCOPE is scope] for scope in Scope}
        module_reports: dict[str, list[Report]] = {rule.ID: [] for rule in by_scope[Scope.MODULE]}
        if by_scope[Scope.MODULE]:
            for report in run_rules(module, by_scope[Scope.MODULE], self.path, self.package, context=context):
                module_reports[report.rule].append(report)
        fresh: dict[cst.CSTNode, dict[str, list[Report]]] = {statement: {} for statement in rerun}
        if by_scope[Scope.STATEMENT] and rerun:
            only = [statement for statement in body if statement in rerun]
            for report in run_rules(module, by_scope[Scope.STATEMENT], self.path, self.package, context, only):
                if not report.statements:
                    raise TypeError(f"{report.rule}: a Scope.STATEMENT rule reported outside a statement")
                fresh[report.statements[0]].setdefault(report.rule, []).append(report)
        self.reports = {
            statement: fresh[statement] if statement in fresh else self.reports[statement] for statement in body
        }
        reports = [
            report for rule in active
            for report in (module_reports[rule.ID] if rule.SCOPE is Scope.MODULE else (
                report for statement in body for report in self.reports[statement].get(rule.ID, ())
            ))
        ]
        findings = _Pass(module, version.text, reports, _Locator(self, version).locate).findings(self.display, edits)
        self.last = version
        self.ranges = {statement: self.ranges[statement] for statement in body if statement in self.ranges}
        return findings


class _Locator:
    """Node ranges from each top-level statement's ranges, generated once and shifted."""

    def __init__(self, linter: IncrementalLinter, version: Version) -> None:
        self.linter, self.version = linter, version
        self.lines: dict[cst.CSTNode, int] = dict(zip(version.module.body, version.first_lines(), strict=True))

    def locate(self, nodes: set[cst.CSTNode], hints: set[tuple[cst.CSTNode, ...]]) -> Mapping[cst.CSTNode, CodeRange]:
        found: dict[cst.CSTNode, CodeRange] = {}
        missing = set(nodes)
        for statement in {path[0] for path in hints}:
            if not missing:
                break
            line = self.lines.get(statement)
            if line is None or not isinstance(statement, cst.BaseStatement):
                continue
            then, ranges = self._ranges(statement, line)
            for node in [node for node in missing if node in ranges]:
                found[node] = _shifted(ranges[node], line - then)
                missing.discard(node)
        return found if not missing else positions(self.version.module)

    def _ranges(self, statement: cst.BaseStatement, line: int) -> tuple[int, dict[cst.CSTNode, CodeRange]]:
        cached = self.linter.ranges.get(statement)
        if cached is None:
            generated = top_level_ranges(self.version.module, statement, line)
            cached = self.linter.ranges[statement] = (line, generated if generated is not None else {})
        return cached


def _shifted(where: CodeRange, lines: int) -> CodeRange:
    if not lines:
        return where
    return CodeRange(
        CodePosition(where.start.line + lines, where.start.column), CodePosition(where.end.line + lines, where.end.column),
    )
