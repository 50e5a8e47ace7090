"""``repairbot lint``: static rules for the PyTorch bugs that never crash (see rule.py for the
authoring API, run.py for a run, formats.py for the outputs)."""

from __future__ import annotations

from repairbot.lint.engine import Finding, FixLevel
from repairbot.lint.rule import FileContext, Invalid, LintRule, Valid
from repairbot.lint.run import LintOptions, LintReport, run_lint

__all__ = [
    "FileContext", "Finding", "FixLevel", "Invalid", "LintOptions", "LintReport", "LintRule", "Valid", "run_lint",
]
