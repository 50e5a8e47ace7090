"""``repairbot lint``: find the files, lint them over every core, write or show the fixes.

Files are spread over worker processes (forked where that is safe, so the rules are imported
once), largest first so that no worker is left with a big file at the end. A run over a few
files stays in this process: starting workers would cost more than it saves.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from repairbot import registry  # a module: it imports this package
from repairbot.lint.engine import (
    PARSE_ERROR,
    FileResult,
    Finding,
    FixLevel,
    _parse_error,
    lint_many,
)
from repairbot.lint.files import config_for, discover
from repairbot.lint.rule import LintRule
from repairbot.lint.selection import Layer, unknown
from repairbot.notebook import file_diff
from repairbot.output.diff import unified_diff
from repairbot.sources import write_atomic
from repairbot.types import Applicability, BadInput

PARALLEL_MIN_FILES = 16
CHUNK_FILES = 8


@dataclass(frozen=True)
class LintOptions:
    paths: tuple[Path, ...]
    cwd: Path = field(default_factory=Path.cwd)
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False  # what --fix would change, as a diff; nothing is written
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    jobs: int | None = None  # worker processes (default: the cores this process may use)
    edits: bool = False  # describe each finding's fix as a text edit (SARIF)
    force_exclude: bool = False  # the exclusions apply to the paths named too (ruff's --force-exclude)

    @property
    def fix_level(self) -> FixLevel:
        if not (self.fix or self.diff):
            return FixLevel.NONE
        return FixLevel.UNSAFE if self.unsafe_fixes else FixLevel.SAFE


@dataclass(frozen=True)
class LintReport:
    rules: tuple[type[LintRule], ...]  # the rules that ran
    findings: tuple[Finding, ...]  # what is left (after --fix; with --diff, what --fix would leave)
    files: int  # files checked
    parsed: int  # files parsed (the others could not hold a finding)
    lines: int
    fixed: int  # fixes applied (with --diff: that --fix would apply)
    fixed_files: tuple[str, ...]
    diff: str  # with --diff
    dry_run: bool  # --diff: nothing was written
    notes: tuple[str, ...]  # fixes that were not applied, and why
    errors: tuple[str, ...]  # internal errors (a rule crashed on a file)
    duration_s: float
    jobs: int

    @property
    def fixable(self) -> int:
        """Findings left that --fix would fix."""
        return sum(f.fix is Applicability.SAFE for f in self.findings)

    @property
    def unsafe_fixable(self) -> int:
        """Findings left that only --unsafe-fixes would fix."""
        return sum(f.fix is Applicability.UNSAFE for f in self.findings)

    @property
    def unchecked(self) -> tuple[Finding, ...]:
        """The files that could not be read or parsed, so were not checked."""
        return tuple(f for f in self.findings if f.rule == PARSE_ERROR)

    @property
    def exit_code(self) -> int:
        if self.errors or self.unchecked:
            return 2
        if self.dry_run:
            return 1 if self.findings or self.diff else 0
        return 1 if self.findings else 0


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _syntax_checked(items: list[tuple[Path, str]], results: list[FileResult]) -> list[FileResult]:
    """The results, where a file was skipped unparsed (no rule could fire in it) and does not
    even parse, with that parse error: a file that cannot be checked is always reported.
    Python's own parser answers that at a fraction of LibCST's cost."""
    checked = []
    for (path, _), result in zip(items, results, strict=True):
        if not result.parsed and not result.findings:
            try:
                compile(path.read_bytes(), result.path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            except (SyntaxError, ValueError, UnicodeDecodeError) as error:
                result = replace(result, findings=(_parse_error(result.path, path.read_bytes(), error),))
            except OSError:
                pass  # gone since it was read: nothing more to say of it
        checked.append(result)
    return checked


def _lint_many(
    items: list[tuple[Path, str]], rules: Sequence[type[LintRule]], level: FixLevel, edits: bool
) -> list[FileResult]:
    return _syntax_checked(items, lint_many(items, rules, level, edits))


def _chunk_worker(args: tuple[list[tuple[Path, str]], tuple[str, ...], FixLevel, bool]) -> list[FileResult]:
    items, rule_ids, level, edits = args
    known = registry.rules_by_id()  # inherited from the parent when forked; imported once per worker otherwise
    return _lint_many(items, [known[i] for i in rule_ids], level, edits)


def _by_size(items: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    def size(item: tuple[Path, str]) -> int:
        try:
            return item[0].stat().st_size
        except OSError:
            return 0

    return sorted(items, key=size, reverse=True)


def lint_files(
    items: list[tuple[Path, str]], rules: Sequence[type[LintRule]], level: FixLevel, edits: bool, jobs: int
) -> list[FileResult]:
    """Every file's result, in the order of ``items``."""
    if jobs <= 1 or len(items) < PARALLEL_MIN_FILES:
        return _lint_many(items, rules, level, edits)
    ordered = _by_size(items)
    chunks = [ordered[i:i + CHUNK_FILES] for i in range(0, len(ordered), CHUNK_FILES)]
    ids = tuple(rule.ID for rule in rules)
    # fork: the workers start with the rules already imported; elsewhere fork is unsafe
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(chunks)), mp_context=context) as pool:
        results = [r for chunk in pool.map(_chunk_worker, [(c, ids, level, edits) for c in chunks]) for r in chunk]
    position = {display: index for index, (_, display) in enumerate(items)}
    return sorted(results, key=lambda result: position[result.path])


def run_lint(options: LintOptions) -> LintReport:
    """``repairbot lint``: BadInput escapes for the CLI to report (exit 2)."""
    started = time.monotonic()
    if not options.paths:
        raise BadInput("no path to lint")
    if options.jobs is not None and options.jobs < 1:
        raise BadInput("--jobs must be at least 1")
    every = registry.all_rules()
    override = Layer(options.select or None, options.ignore)
    wrong = unknown(override, (rule.ID for rule in every))
    if wrong:
        raise BadInput(f"unknown lint rule id: {', '.join(wrong)} (see docs/lint-rules.md)")
    items = discover(options.paths, options.cwd, options.force_exclude)
    jobs = options.jobs or available_cores()
    level = options.fix_level
    groups: dict[tuple[type[LintRule], ...], list[tuple[Path, str]]] = {}
    for item in items:
        config = config_for(item[0].parent)
        problems = config.problems(every)
        if problems:
            raise BadInput(problems[0])
        groups.setdefault(config.rules_for(item[0], every, override), []).append(item)
    results = [result for rules, group in groups.items() for result in lint_files(group, rules, level, options.edits, jobs)]
    order = {display: index for index, (_, display) in enumerate(items)}
    results.sort(key=lambda result: order[result.path])
    rules = [rule for rule in every if any(rule in chosen for chosen in groups)] or config_for(options.cwd).rules_for(
        options.cwd, every, override,
    )
    paths = dict((display, path) for path, display in items)
    diffs: list[str] = []
    fixed_files: list[str] = []
    for result in results:
        if result.new_data is None:
            continue
        path = paths[result.path]
        fixed_files.append(result.path)
        if options.diff:
            if path.suffix == ".ipynb":  # per cell, as ruff shows it
                diffs.append(file_diff(path, path.read_bytes(), result.new_data, result.path))
            else:
                diffs.append(unified_diff(path.read_bytes(), result.new_data, result.path)[0])
        else:
            write_atomic(path, result.new_data)
    return LintReport(
        rules=tuple(rules),
        findings=tuple(f for result in results for f in result.findings),
        files=len(results),
        parsed=sum(result.parsed for result in results),
        lines=sum(result.lines for result in results),
        fixed=sum(result.fixed for result in results),
        fixed_files=tuple(fixed_files),
        diff="".join(diffs),
        dry_run=options.diff,
        notes=tuple(f"{result.path}: {note}" for result in results for note in result.notes),
        errors=tuple(f"{result.path}: {result.error}" for result in results if result.error),
        duration_s=time.monotonic() - started,
        jobs=jobs,
    )
