"""Discovers the lint rules: every ``LintRule`` subclass in a ``lint.py`` of a pattern folder.

The same package as the runtime patterns (``repairbot.patterns``, see repairbot/registry.py);
a folder with only a ``lint.py`` is a home for rules, not a runtime pattern.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from collections.abc import Iterable
from pathlib import Path

from repairbot.lint.rule import LintRule
from repairbot.registry import _patterns_package
from repairbot.types import BadInput


def rule_folder(rule: type[LintRule]) -> Path:
    """The folder a rule lives in."""
    return Path(inspect.getfile(rule)).parent


@functools.cache
def all_rules() -> tuple[type[LintRule], ...]:
    """Every lint rule, in id order."""
    package = _patterns_package()
    found: list[type[LintRule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.ispkg or not any((Path(folder) / info.name / "lint.py").is_file() for folder in package.__path__):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}.lint")
        classes = [
            obj for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, LintRule) and obj is not LintRule
            and obj.__module__ == module.__name__
        ]
        if not classes:
            raise RuntimeError(f"{module.__name__}: no LintRule class")
        found.extend(classes)
    ids = [rule.ID for rule in found]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise RuntimeError(f"lint rule ids defined twice: {', '.join(duplicates)}")
    return tuple(sorted(found, key=lambda rule: rule.ID))


def rules_by_id() -> dict[str, type[LintRule]]:
    return {rule.ID: rule for rule in all_rules()}


def select(
    rules: Iterable[type[LintRule]], include: Iterable[str] = (), exclude: Iterable[str] = ()
) -> tuple[type[LintRule], ...]:
    """The rules a run uses; BadInput for an unknown id."""
    rules = tuple(rules)
    known = {rule.ID for rule in rules}
    include, exclude = set(include), set(exclude)
    unknown = sorted((include | exclude) - known)
    if unknown:
        raise BadInput(f"unknown lint rule id: {', '.join(unknown)} (see docs/lint-rules.md)")
    return tuple(r for r in rules if (not include or r.ID in include) and r.ID not in exclude)
