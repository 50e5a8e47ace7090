"""The catalogue as the rest of repairbot uses it: the patterns (one instance each) and the lint
rules that ``repairbot.unit.discover`` finds in the folders of ``patterns/``, chosen by id."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from repairbot.lint.rule import LintRule
from repairbot.pattern import Pattern
from repairbot.unit import discover
from repairbot.unit import select as select_units


def probe_file(pattern: Pattern | type[Pattern]) -> Path | None:
    """The pattern's own run-time probe (``probe.py`` beside ``pattern.py``), if it has one."""
    path = pattern.folder() / "probe.py"
    return path if path.is_file() else None


@functools.cache
def probe_files() -> tuple[Path, ...]:
    """The probe files of the whole catalogue, in pattern id order."""
    return tuple(path for path in map(probe_file, all_patterns()) if path is not None)


@functools.cache
def all_patterns() -> tuple[Pattern, ...]:
    """One instance of every pattern, in id order."""
    return tuple(pattern() for pattern in discover(Pattern))


def select(patterns: Iterable[Pattern], include: Iterable[str] = (), exclude: Iterable[str] = ()) -> tuple[Pattern, ...]:
    """The patterns a run may use; BadInput for an unknown id."""
    return select_units(patterns, include, exclude, Pattern.KIND)


def all_rules() -> tuple[type[LintRule], ...]:
    """Every lint rule, in id order."""
    return discover(LintRule)


def rules_by_id() -> dict[str, type[LintRule]]:
    return {rule.ID: rule for rule in all_rules()}


def select_rules(
    rules: Iterable[type[LintRule]], include: Iterable[str] = (), exclude: Iterable[str] = ()
) -> tuple[type[LintRule], ...]:
    """The rules a run uses; BadInput for an unknown id."""
    return select_units(rules, include, exclude, LintRule.KIND)
