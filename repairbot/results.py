"""What a repair did: each attempt with its judged fix (the ``Site`` a pattern located, with its
rewrite), and the report of the whole run that every output format renders.

These hold a ``Site``, so they sit above ``repairbot.edits`` (``repairbot.types`` holds the
values they are made of).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from repairbot.edits import Site
from repairbot.types import (
    Decline,
    Failure,
    HarnessFault,
    HealthFinding,
    Outcome,
    RunLimits,
    Status,
    StopReason,
    exit_code_for,
)


@dataclass(frozen=True)
class Fix:
    """A located, transformed and (once the rerun has spoken) judged fix."""

    site: Site
    file: str  # path relative to the report's root
    diff: str
    changed_lines: int


@dataclass(frozen=True)
class Attempt:
    n: int
    failure: Failure
    failure_file: str | None  # relative location of the failure, as reported
    failure_line: int | None
    pattern: str | None
    evidence: Mapping[str, Any]
    fix: Fix | None
    outcome: Outcome
    declines: tuple[Decline, ...] = ()
    duration_s: float = 0.0
    applied: bool = False  # the fix was kept: the rerun got past its failure


class Locations(Protocol):
    """Where a report's lines really are (a notebook's program lines as cells and their lines)."""

    def text(self, rendered: str) -> str: ...

    def json(self, value: Any) -> Any: ...


@dataclass(frozen=True)
class RepairReport:
    script: str
    status: Status
    stop_reason: StopReason
    attempts: tuple[Attempt, ...]
    diff: str
    files_modified: tuple[str, ...]
    run_limits: RunLimits
    environment: Mapping[str, Any]
    duration_s: float
    branch: str | None = None
    commit: str | None = None
    scratch: str | None = None
    notes: tuple[str, ...] = ()
    remaining: Failure | None = None  # a failure left at the stop that no attempt describes
    error: str | None = None  # one-line reason of a bad-input stop
    root: str | None = None  # the folder the report's paths are relative to (not in the JSON)
    health: tuple[HealthFinding, ...] = ()
    command: str = "fix"  # fix | doctor (doctor: one traced run, health checks only)
    # the last run's output (stdout, then stderr) when it ended in environment, timeout or
    # no-user-frame: what the script said is often the only clue
    output_tail: str | None = None
    strict_health: bool = False  # --strict-health: findings make the exit code 1
    dry_run: bool = False  # --dry-run: files_modified are the files the diff would change
    locations: Locations | None = None  # notebooks' lines by cell (repairbot.notebook.Locator); not in the JSON
    harness_fault: HarnessFault | None = None  # stop reason harness-error: the harness's failure, the plain run's outcome

    @property
    def warnings(self) -> tuple[HealthFinding, ...]:
        """The health findings that are bugs (information never changes an exit code)."""
        return tuple(h for h in self.health if h.is_warning)

    @property
    def exit_code(self) -> int:
        code = exit_code_for(self.status)
        if self.command == "doctor" and code == 0:
            # doctor: 0 only for a run with no crash and no finding
            return 1 if self.warnings or self.attempts or self.remaining is not None else 0
        if code == 0 and self.strict_health and self.warnings:
            return 1
        return code
