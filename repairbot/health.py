"""The catalogue of the run-time health checks, read from the checks themselves.

Each check is one module of ``repairbot/trace/harness/health/`` (one ``HealthCheck`` class:
its id, title, default level, the lint rule whose fix it offers, its docstring) and runs in the
child; the main process imports those modules (they import without torch) to document and
report the checks: SARIF rules, the lint fix offered (``loop.collect_health``), the README
table and docs/health-checks.md (``scripts/gen_docs.py``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from repairbot.lint.rule import LintRule
from repairbot.trace.harness import health as harness_health
from repairbot.unit import DocFormat, Kind

# The third kind of unit (repairbot/unit.py). Its units run in the child, which cannot import
# repairbot: they are found by the harness's own walk of its health package (``checks()``) and
# read here; a check's docstring has the lint rules' sections, parsed by the one parser.
KIND = Kind(
    name="health check",
    file="repairbot/trace/harness/health/<check>.py",
    doc=DocFormat(required=LintRule.KIND.doc.required),
    one_per_file=True,
    listed_in="docs/health-checks.md",
)
SECTIONS = KIND.doc.titles


@dataclass(frozen=True)
class HealthCheckDoc:
    """One health check as the main process knows it."""

    ID: str
    TITLE: str
    LEVEL: str  # its findings' default level: "warning" or "information"
    LINT_RULE: str | None  # the lint rule whose fix a finding offers
    name: str  # the check's class name
    module: str  # the module that holds it, relative to the repository ("repairbot/...py")
    doc: str

    def documentation(self) -> dict[str, str]:
        """The docstring's sections by title (the first paragraph under ``""``)."""
        return KIND.doc.parse(self.doc)

    def undocumented(self) -> list[str]:
        """The sections the docstring lacks."""
        return KIND.doc.missing(self.documentation())


@functools.cache
def health_checks() -> tuple[HealthCheckDoc, ...]:
    """Every health check, in report order (discovered over the harness's health package)."""
    found = []
    for check in harness_health.checks():
        module = check.__module__.replace(".", "/") + ".py"
        found.append(HealthCheckDoc(
            ID=check.ID, TITLE=check.TITLE, LEVEL=check.LEVEL, LINT_RULE=check.LINT_RULE,
            name=check.__name__, module=module, doc=check.__doc__ or "",
        ))
    return tuple(found)


def checks_by_id() -> dict[str, HealthCheckDoc]:
    return {check.ID: check for check in health_checks()}


def offered_rules() -> dict[str, str]:
    """check id -> the lint rule whose fix its findings offer ("where a static rule exists, the
    same fix")."""
    return {check.ID: check.LINT_RULE for check in health_checks() if check.LINT_RULE}
