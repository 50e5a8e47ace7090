"""Lints one file: skip it unread by the rules where it cannot hold a finding, else parse it
once, walk it once for every rule, and resolve positions only when something was found.

With fixes asked for, the loop is ruff's: apply the fixes that do not overlap, parse the result
(a fix that breaks the file is thrown away), lint again, at most ``MAX_FIX_PASSES`` times; the
findings left are those of the last pass.
"""

from __future__ import annotations

import ast
import enum
import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from repairbot.analysis import ImportTable
from repairbot.cst_walk import Handler, descendants, imports, walk
from repairbot.edits import Replacement, apply_edits, edits_of
from repairbot.lint.rule import FileContext, LintRule, Report, Severity, handlers, statement_path
from repairbot.notebook import Notebook, NotebookError
from repairbot.notebook import load as load_notebook
from repairbot.sources import line_endings
from repairbot.types import Applicability

MAX_FIX_PASSES = 10
PARSE_ERROR = "parse-error"  # the pseudo-rule of a file that cannot be read or parsed

# `# repairbot: ignore` or `# repairbot: ignore[rule-id, other-id]` on a finding's first line
_SUPPRESSION = re.compile(r"#\s*repairbot:\s*ignore(?:\[([^\]]*)\])?")


class FixLevel(enum.IntEnum):
    """Which fixes to apply: none, safe ones, or safe and unsafe ones."""

    NONE = 0
    SAFE = 1
    UNSAFE = 2

    def allows(self, applicability: Applicability | None) -> bool:
        if applicability is Applicability.SAFE:
            return self >= FixLevel.SAFE
        return applicability is Applicability.UNSAFE and self >= FixLevel.UNSAFE


@dataclass(frozen=True)
class TextEdit:
    """A fix as one text replacement: 1-based lines and columns, the end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int
    text: str

    def apply(self, before: str) -> str:
        """``before`` (the text the edit was computed on) with the replacement made."""
        starts = [0, *(i + 1 for i, char in enumerate(before) if char == "\n")]
        start = starts[self.line - 1] + self.column - 1
        end = starts[self.end_line - 1] + self.end_column - 1
        return before[:start] + self.text + before[end:]


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int  # 1-based, in characters
    end_line: int
    end_column: int  # 1-based, exclusive
    rule: str
    message: str
    fix: Applicability  # SAFE | UNSAFE | NONE
    edit: TextEdit | None = None  # the fix alone, when asked for (SARIF)
    # In a notebook: the code cell (line and edit are then within it) and the .ipynb file's line
    cell: int | None = None
    source_line: int | None = None
    severity: Severity = Severity.WARNING  # the rule's (a parse error: ERROR)


@dataclass(frozen=True)
class FileResult:
    path: str
    lines: int
    parsed: bool  # False: skipped before parsing (no rule could fire)
    findings: tuple[Finding, ...] = ()
    fixed: int = 0  # fixes applied
    new_data: bytes | None = None  # the fixed file, when it changed
    notes: tuple[str, ...] = ()  # why some fix was not applied
    error: str | None = None  # an internal error (a rule crashed): a bug of repairbot


_HANDLERS: dict[type[LintRule], list[tuple[str, type[cst.CSTNode], str]]] = {}


def _handler_table(rule: type[LintRule]) -> list[tuple[str, type[cst.CSTNode], str]]:
    if rule not in _HANDLERS:
        _HANDLERS[rule] = handlers(rule)
    return _HANDLERS[rule]


@functools.lru_cache(maxsize=4096)
def package_of(directory: Path) -> str | None:
    """The top-level package a folder belongs to (folders with ``__init__.py`` upwards)."""
    top = None
    while (directory / "__init__.py").is_file():
        top = directory.name
        if directory.parent == directory:
            break
        directory = directory.parent
    return top


def import_table(module: cst.Module) -> ImportTable:
    """The file's imports (nested ones too), read without walking its expressions."""
    found = imports(module)
    # ImportTable reads a module: hand it one made of the import statements alone
    return ImportTable(cst.Module(body=[cst.SimpleStatementLine(body=found)] if found else []))


def run_rules(
    module: cst.Module,
    rules: Sequence[type[LintRule]],
    path: Path,
    package: str | None,
    context: FileContext | None = None,
    only: Sequence[cst.BaseStatement] | None = None,
) -> list[Report]:
    """Every report of ``rules`` on a parsed module, in one walk; each report and each node its
    fix swaps carries the statement path that holds it (``Report.statements``, ``Report.held``),
    so that positions are computed for those statements alone. ``context``: the file's, where
    the caller made it (``repairbot.lint.incremental`` shares one between walks); ``only``: walk
    these top-level statements of the module alone (the rules' Module handlers still run),
    for rules whose reports in a statement depend on nothing else (``Scope.STATEMENT``)."""
    if context is None:
        context = FileContext(path=path, module=module, imports=import_table(module), package=package)
    instances = [rule(context) for rule in rules]
    visits: dict[type[cst.CSTNode], list[Handler]] = defaultdict(list)
    leaves: dict[type[cst.CSTNode], list[Handler]] = defaultdict(list)
    for instance in instances:
        for kind, node_class, name in _handler_table(type(instance)):
            (visits if kind == "visit" else leaves)[node_class].append(getattr(instance, name))
    paths: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}
    if only is None:
        walk(module, visits, leaves, context.stack, statement_path, paths)
    else:
        context.stack[:] = [module]
        for handler in visits.get(cst.Module, ()):
            handler(module)
        for statement in only:
            walk(statement, visits, leaves, context.stack, statement_path, paths)
        for handler in leaves.get(cst.Module, ()):
            handler(module)
        context.stack.clear()
    reports = [report for instance in instances for report in instance.reports]
    for report in reports:
        # a report made in leave_Module has no statement of its own: where its node was met
        held = [paths.get(node) for node in (report.node, *report.replacements())]
        report.held = tuple(path for path in held if path)
    return reports


def _suppressed(line_text: str, rule: str) -> bool:
    for match in _SUPPRESSION.finditer(line_text):
        if match.group(1) is None or rule in {part.strip() for part in match.group(1).split(",")}:
            return True
    return False


def _apply(module: cst.Module, replacements: Mapping[cst.CSTNode, Replacement]) -> cst.Module:
    return apply_edits(module, edits_of(replacements))


def _overlap(a: CodeRange, b: CodeRange) -> bool:
    return not ((a.end.line, a.end.column) <= (b.start.line, b.start.column)
                or (b.end.line, b.end.column) <= (a.start.line, a.start.column))


def common_ends(before: str, after: str) -> tuple[int, int]:
    """The lengths of the longest common prefix and (in what is left) common suffix of two
    texts: what stays when ``before`` becomes ``after`` by one replacement."""
    limit = min(len(before), len(after))
    prefix = _common_length(before, after, limit, lambda text, start, end: text[start:end])
    # the suffix, compared on the texts' ends (position i counts back from the end)
    suffix = _common_length(
        before, after, limit - prefix, lambda text, start, end: text[len(text) - end : len(text) - start],
    )
    return prefix, suffix


def _common_length(before: str, after: str, limit: int, part: Callable[[str, int, int], str]) -> int:
    """How far (at most ``limit``) ``part`` of the two texts agrees: compared a block at a time
    (a string comparison runs in C), then the first differing block a character at a time."""
    length, block = 0, 4096
    while length < limit:
        end = min(limit, length + block)
        if part(before, length, end) == part(after, length, end):
            length = end
            continue
        if block == 1:
            break
        block //= 16
    return length


def _edit(before: str, after: str) -> TextEdit:
    """The narrowest replacement that turns ``before`` into ``after``."""
    prefix, suffix = common_ends(before, after)

    def position(offset: int) -> tuple[int, int]:
        line = before.count("\n", 0, offset) + 1
        return line, offset - (before.rfind("\n", 0, offset) + 1) + 1

    start, end = position(prefix), position(len(before) - suffix)
    return TextEdit(start[0], start[1], end[0], end[1], after[prefix:len(after) - suffix])


def positions(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node's range (LibCST's PositionProvider), without a MetadataWrapper: resolving
    through one also walks the whole tree for batchable providers even when there are none,
    which costs as much again as the positions themselves."""
    provider = PositionProvider()
    generate = getattr(provider, "_gen_impl", None)
    computed = getattr(provider, "_computed", None)
    if generate is None or not isinstance(computed, dict):  # a LibCST without these internals
        return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    generate(module)
    return computed


def _ast_groups(body: Sequence[cst.BaseStatement], nodes: list[ast.stmt]) -> list[ast.stmt] | None:
    """The Python AST statement that starts each LibCST statement of a body (a line of
    ``a; b`` is one LibCST statement, two AST ones); None where they do not line up."""
    firsts: list[ast.stmt] = []
    index = 0
    for statement in body:
        if index >= len(nodes):
            return None
        firsts.append(nodes[index])
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return firsts if index == len(nodes) else None


def _first_line(statement: cst.BaseStatement, node: ast.stmt) -> int:
    """Where a statement's code starts: its blank and comment lines before it included."""
    decorators = getattr(node, "decorator_list", None)
    line: int = min([node.lineno, *(d.lineno for d in decorators)]) if decorators else node.lineno
    leading: Sequence[cst.EmptyLine] = getattr(statement, "leading_lines", ())
    return line - len(leading)


def statement_positions(
    module: cst.Module, text: str, paths: set[tuple[cst.CSTNode, ...]], tree: ast.Module | None,
) -> dict[cst.CSTNode, CodeRange] | None:
    """The ranges of the nodes inside some statements (each given by its path from the top
    level down through classes and functions), generating the code of those statements alone,
    from the line where each starts (Python's own parser says where) and in the indentation of
    its block; None when that cannot be done exactly (the generated text does not match the
    file there): the caller then computes them all."""
    provider = PositionProvider()
    computed = getattr(provider, "_computed", None)
    if not isinstance(computed, dict) or tree is None:
        return None
    lines = text.splitlines(keepends=True)
    done: set[cst.CSTNode] = set()
    # each body's statements with their AST statements, paired once (many paths share a body)
    paired: dict[int, dict[cst.CSTNode, ast.stmt] | None] = {}
    for path in paths:
        body: Sequence[cst.BaseStatement] = module.body
        nodes: list[ast.stmt] = tree.body
        indents: list[str] = []
        for depth, statement in enumerate(path):
            if id(body) not in paired:
                groups = _ast_groups(body, nodes)
                paired[id(body)] = None if groups is None else dict(zip(body, groups, strict=True))
            pairs = paired[id(body)]
            node = pairs.get(statement) if pairs is not None else None
            if node is None or not isinstance(statement, cst.BaseStatement):
                return None
            if depth < len(path) - 1:
                block = getattr(statement, "body", None)
                if not isinstance(block, cst.IndentedBlock) or not isinstance(getattr(node, "body", None), list):
                    return None
                indents.append(block.indent if block.indent is not None else module.default_indent)
                body, nodes = block.body, getattr(node, "body")  # noqa: B009 (ast.stmt has no body in its type)
                continue
            if statement in done:
                break
            done.add(statement)
            first = _first_line(statement, node)
            code, end = _generate(module, statement, provider, indents, first)
            source = "".join(lines[first - 1 : end - 1])  # the code ends with its newline
            if source != code and source + module.default_newline != code:
                return None
    return computed


def _generate(
    module: cst.Module, statement: cst.BaseStatement, provider: PositionProvider, indents: Sequence[str], first: int,
) -> tuple[str, int]:
    """The code of one statement of ``module`` (inside blocks of ``indents``), generated from
    line ``first`` with ``provider`` recording its nodes' ranges; and the line after it."""
    state = PositionProvidingCodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline, provider=provider,
    )
    state.indent_tokens = list(indents)
    state.line = first
    statement._codegen(state)
    return "".join(state.tokens), state.line


def top_level_ranges(module: cst.Module, statement: cst.BaseStatement, first: int) -> dict[cst.CSTNode, CodeRange] | None:
    """The ranges of the nodes of one top-level statement of ``module`` whose code (its blank
    and comment lines before it included) starts on line ``first``; None with a LibCST
    without the internals this reads (the caller then computes every position)."""
    provider = PositionProvider()
    computed = getattr(provider, "_computed", None)
    if not isinstance(computed, dict):
        return None
    _generate(module, statement, provider, (), first)
    return computed


def needed_positions(
    module: cst.Module, text: str, nodes: set[cst.CSTNode], hints: set[tuple[cst.CSTNode, ...]],
) -> Mapping[cst.CSTNode, CodeRange]:
    """Ranges for at least ``nodes``: those of the statements that hold them (the ``hints``,
    then the top-level statements a walk finds them in), or of the whole module where that
    fails."""
    try:
        tree: ast.Module | None = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        tree = None
    found = statement_positions(module, text, hints, tree) if hints else {}
    if found is not None and all(node in found for node in nodes):
        return found
    missing = {node for node in nodes if found is None or node not in found}
    holders = set(hints)
    for statement in module.body:
        if not missing:
            break
        held = missing.intersection(descendants(statement))
        if held:
            holders.add((statement,))
            missing -= held
    if not missing:
        partial = statement_positions(module, text, holders, tree)
        if partial is not None and all(node in partial for node in nodes):
            return partial
    return positions(module)


# where nodes are: (the nodes, the statement paths that hold them) -> ranges of at least those
Locate = Callable[[set[cst.CSTNode], set[tuple[cst.CSTNode, ...]]], Mapping[cst.CSTNode, CodeRange]]


class _Pass:
    """One lint of one version of the file: its reports with positions, minus suppressed ones."""

    def __init__(self, module: cst.Module, text: str, reports: list[Report], locate: Locate | None = None) -> None:
        self.module = module
        self.reports: list[tuple[Report, CodeRange]] = []
        self.positions: Mapping[cst.CSTNode, CodeRange] = {}
        if not reports:
            return
        needed = {node for report in reports for node in (report.node, *report.replacements())}
        hints = {path for report in reports for path in (report.statements, *report.held) if path}
        self.positions = (locate or functools.partial(needed_positions, module, text))(needed, hints)
        lines = text.split("\n")
        for report in reports:
            where = self.positions[report.node]
            if _suppressed(lines[where.start.line - 1], report.rule):
                continue
            self.reports.append((report, where))

    def findings(self, display: str, edits: bool) -> tuple[Finding, ...]:
        found = []
        code = self.module.code if edits else ""
        for report, where in self.reports:
            edit = None
            if edits and report.replacement is not None:
                edit = _edit(code, _apply(self.module, report.replacements()).code)
            found.append(Finding(
                path=display, line=where.start.line, column=where.start.column + 1,
                end_line=where.end.line, end_column=where.end.column + 1,
                rule=report.rule, message=report.message, fix=report.fix, edit=edit, severity=report.severity,
            ))
        return tuple(sorted(found, key=lambda f: (f.line, f.column, f.rule)))

    def fixes(self, level: FixLevel) -> dict[cst.CSTNode, Replacement]:
        """The replacements to apply now: allowed by ``level``, not overlapping each other."""
        chosen: dict[cst.CSTNode, Replacement] = {}
        taken: list[CodeRange] = []
        candidates = [
            (report, [self.positions[node] for node in report.replacements()]) for report, _ in self.reports
            if report.replacement is not None and level.allows(report.applicability)
        ]
        for report, ranges in sorted(candidates, key=lambda c: (c[1][0].start.line, c[1][0].start.column)):
            if any(_overlap(where, other) for where in ranges for other in taken):
                continue  # the next pass gets it, on the fixed file
            chosen.update(report.replacements())
            taken.extend(ranges)
        return chosen


def _text(data: bytes, module: cst.Module) -> str:
    return data.decode(module.encoding, errors="replace")


def apply_edit(data: bytes, edit: TextEdit) -> bytes:
    """The file's bytes with one finding's edit made, decoded and encoded as the engine read
    them (the edit's columns count characters of the file's own encoding)."""
    module = cst.parse_module(data)
    return edit.apply(_text(data, module)).encode(module.encoding)


def uniform_line_endings(data: bytes) -> bool:
    """Whether fixes may be written to a file with these bytes: one kind of line ending, and
    not a bare CR (the fixed file could not keep the endings exactly)."""
    endings = line_endings(data)
    return "\r" not in endings and len(endings) <= 1


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def lint_bytes(
    data: bytes,
    path: Path,
    display: str,
    rules: Sequence[type[LintRule]],
    fix: FixLevel = FixLevel.NONE,
    edits: bool = False,
    package: str | None = None,
) -> FileResult:
    """Lints (and with ``fix``, fixes) one file's bytes; ``display`` is the path findings show,
    ``package`` the top-level package the file belongs to (None for a script)."""
    lines = count_lines(data)
    active = [rule for rule in rules if rule.applies(data, package)]
    if not active:
        return FileResult(display, lines, parsed=False)
    try:
        module = cst.parse_module(data)
    except Exception as error:  # a syntax error, an undecodable file, a parser limit
        return FileResult(display, lines, parsed=True, findings=(_parse_error(display, data, error),))
    try:
        current = _Pass(module, _text(data, module), run_rules(module, active, path, package))
        notes: list[str] = []
        fixed = 0
        new_data: bytes | None = None
        if fix is not FixLevel.NONE and current.fixes(fix):
            if module.bytes != data or not uniform_line_endings(data):
                notes.append("not fixed: the file mixes line endings or cannot be reproduced exactly")
            else:
                current, fixed, new_data = _fix_loop(current, data, path, active, package, fix, notes)
        return FileResult(
            display, lines, parsed=True, findings=current.findings(display, edits), fixed=fixed,
            new_data=new_data, notes=tuple(notes),
        )
    except Exception as error:  # a rule's bug must not end the run over the other files
        return FileResult(display, lines, parsed=True, error=f"{type(error).__name__}: {error}")


def _fix_loop(
    current: _Pass, data: bytes, path: Path, rules: Sequence[type[LintRule]], package: str | None,
    fix: FixLevel, notes: list[str],
) -> tuple[_Pass, int, bytes | None]:
    fixed = 0
    text = data
    for _ in range(MAX_FIX_PASSES):
        replacements = current.fixes(fix)
        if not replacements:
            return current, fixed, (text if text != data else None)
        candidate = _apply(current.module, replacements).bytes
        try:
            module = cst.parse_module(candidate)
        except Exception:
            notes.append("a fix produced code that does not parse; it was not applied")
            return current, fixed, (text if text != data else None)
        if candidate == text:
            break  # a fix that changes nothing: stop rather than loop
        fixed += len(replacements)
        text = candidate
        current = _Pass(module, _text(candidate, module), run_rules(module, rules, path, package))
    else:
        notes.append(f"fixes did not converge after {MAX_FIX_PASSES} passes")
    return current, fixed, (text if text != data else None)


def _parse_error(display: str, data: bytes, error: Exception) -> Finding:
    """The finding of a file that does not parse, placed where Python places the error."""
    line, column, message = 1, 1, str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    try:
        compile(data, display, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as syntax:
        line, column, message = syntax.lineno or 1, syntax.offset or 1, f"syntax error: {syntax.msg}"
    except (ValueError, UnicodeDecodeError) as other:  # NUL bytes, an undecodable file
        message = str(other)
    else:
        if isinstance(error, cst.ParserSyntaxError):  # valid Python that LibCST cannot read
            line, column = error.raw_line, error.raw_column + 1
    return Finding(
        display, line, column, line, column, PARSE_ERROR, f"cannot parse: {message}", Applicability.NONE,
        severity=Severity.ERROR,
    )


def lint_file(
    path: Path, display: str, rules: Sequence[type[LintRule]], fix: FixLevel = FixLevel.NONE, edits: bool = False,
) -> FileResult:
    if path.suffix == ".ipynb":
        return lint_notebook(path, display, rules, fix, edits, package_of(path.absolute().parent))
    try:
        data = path.read_bytes()
    except OSError as error:
        return FileResult(
            display, 0, parsed=False,
            findings=(Finding(
                display, 1, 1, 1, 1, PARSE_ERROR, f"cannot read: {error.strerror}", Applicability.NONE,
                severity=Severity.ERROR,
            ),),
        )
    return lint_bytes(data, path, display, rules, fix, edits, package_of(path.absolute().parent))


def lint_notebook(
    path: Path, display: str, rules: Sequence[type[LintRule]], fix: FixLevel, edits: bool, package: str | None = None,
) -> FileResult:
    """``repairbot lint`` of one notebook: its program linted (and fixed) as a file, findings
    placed by cell (``Finding.cell``, lines within the cell), a fix written back into the
    edited cells only. A notebook of another kernel language is skipped with a note; one that
    cannot be read is a parse-error finding, as a ``.py`` file with a syntax error is."""
    try:
        return _lint_notebook(path, display, rules, fix, edits, package)
    except NotebookError:
        raise
    except Exception as error:  # a bug of ours must not end the run over the other files
        return FileResult(display, 0, parsed=True, error=f"{type(error).__name__}: {error}")


def _lint_notebook(
    path: Path, display: str, rules: Sequence[type[LintRule]], fix: FixLevel, edits: bool, package: str | None,
) -> FileResult:
    try:
        notebook = load_notebook(path, display)
    except NotebookError as error:
        message = str(error).removeprefix(f"{display}: ")
        if "kernel is" in message or "no code cells" in message:
            return FileResult(display, 0, parsed=False, notes=(f"skipped: {message}",) if "kernel" in message else ())
        return FileResult(
            display, 0, parsed=True,
            findings=(Finding(
                display, 1, 1, 1, 1, PARSE_ERROR, f"cannot read the notebook: {message}", Applicability.NONE,
                severity=Severity.ERROR,
            ),),
        )
    result = lint_bytes(notebook.program_bytes, path, display, rules, fix, edits, package)
    findings = place_findings(notebook, result.findings)
    new_data, notes = None, list(result.notes)
    if result.new_data is not None:
        try:
            new_data = notebook.write_back(result.new_data)
        except NotebookError as error:
            notes.append(f"not fixed: {str(error).removeprefix(display + ': ')}")
    return replace(result, findings=findings, new_data=new_data, notes=tuple(notes), fixed=result.fixed if new_data else 0)



def place_findings(notebook: Notebook, findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """The lint findings of a notebook's program placed in its code cells (``Finding.cell``,
    lines and edits within the cell); a finding on a prelude line is dropped."""

    def place(finding: Finding) -> Finding | None:
        start, end = notebook.locate(finding.line), notebook.locate(finding.end_line)
        if start is None:
            if finding.rule == PARSE_ERROR:
                return replace(finding, message=f"{finding.message} (in the repairbot prelude line)")
            return None
        if finding.rule == PARSE_ERROR:
            # a cell that is not Python (an IPython construct repairbot does not map)
            return replace(
                finding, cell=start.cell, line=start.line, end_line=start.line,
                message=finding.message + notebook.syntax_hint(start),
            )
        edit = finding.edit
        if edit is not None:
            edit_start, edit_end = notebook.locate(edit.line), notebook.locate(edit.end_line)
            if edit_start is None or edit_end is None or edit_start.cell != edit_end.cell:
                edit = None
            else:
                edit = replace(edit, line=edit_start.line, end_line=edit_end.line)
        return replace(
            finding, cell=start.cell, line=start.line,
            end_line=end.line if end is not None and end.cell == start.cell else start.line,
            edit=edit, source_line=notebook.file_line(start),
        )


    return tuple(f for f in map(place, findings) if f is not None)

def lint_many(
    items: Iterable[tuple[Path, str]], rules: Sequence[type[LintRule]], fix: FixLevel, edits: bool,
) -> list[FileResult]:
    return [lint_file(path, display, rules, fix, edits) for path, display in items]
