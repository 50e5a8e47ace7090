"""Domain values shared by every layer: frames, failures, spans, declines, run limits and statuses.

Every value is a frozen dataclass; every enum's value is the string the contract's JSON uses.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from repairbot.run_config import DEFAULTS


class Applicability(enum.StrEnum):
    """How much a fix can be trusted to keep the script's intent (ruff's vocabulary)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    # a diagnosis with the standard remedy, never an edit: the word of the reports and the
    # catalogue ("diagnose-only ids", stop reason `diagnosed`); DISPLAY_ONLY is its older name
    DIAGNOSE_ONLY = "diagnose-only"
    DISPLAY_ONLY = "diagnose-only"
    # no fix: a lint finding reported without a rewrite, a unit that only reports (the word of
    # the lint formats and the catalogue)
    NONE = "none"


class Status(enum.StrEnum):
    FIXED = "fixed"
    ALREADY_PASSING = "already-passing"
    GAVE_UP = "gave-up"
    ERROR = "error"


class StopReason(enum.StrEnum):
    PASSING = "passing"
    MAX_ATTEMPTS = "max-attempts"
    SAME_ERROR = "same-error"
    NO_PATTERN = "no-pattern"
    DIAGNOSED = "diagnosed"
    NO_USER_FRAME = "no-user-frame"
    TIMEOUT = "timeout"
    ENVIRONMENT = "environment"
    BAD_INPUT = "bad-input"
    # repairbot's tracing harness failed (its own code raised) where the script without it
    # does not fail that way: status error, exit 2, the plain run's outcome reported
    HARNESS_ERROR = "harness-error"


class Outcome(enum.StrEnum):
    """What the rerun after a fix showed."""

    PASSED = "passed"
    FAILED_SAME = "failed-same"
    FAILED_OTHER = "failed-other"
    NOT_RUN = "not-run"


class RunStatus(enum.StrEnum):
    """How one run of the script ended."""

    PASSED = "passed"  # exit 0 with no failure
    STOPPED = "stopped"  # the step budget ended it; counts as passing
    FAILED = "failed"  # uncaught exception or non-zero exit
    TIMEOUT = "timeout"  # killed at the wall-clock limit
    HARNESS_ERROR = "harness-error"  # the harness itself could not start or report


@dataclass(frozen=True)
class Frame:
    """One frame of a traceback, as printed or as traced."""

    file: str
    line: int
    function: str = ""
    code: str | None = None
    user: bool = False
    # Character columns of the failing expression (Python >= 3.11 runs only).
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Failure:
    """A failure reduced to what classification and location need."""

    exc_type: str
    message: str
    frames: tuple[Frame, ...] = ()
    # Where the exception was raised in a DataLoader worker, the worker's own frames.
    worker_frames: tuple[Frame, ...] = ()
    warning: bool = False  # a warning promoted to a failure (no traceback of its own)
    command: str | None = None  # the command that failed, where a log shows it
    # Earlier exceptions of the chain ("During handling of the above exception..." / "The
    # above exception was the direct cause..."), nearest first: causes[0] is the one printed
    # just above this failure, causes[-1] the root cause, printed first.
    causes: tuple[Failure, ...] = ()
    # The harness's own frame that raised it, where its own work did (a probe, a cut pass's
    # sampler, a hook), not the script: the failure is then repairbot's, never the script's.
    harness_frame: Frame | None = None
    # Under a launcher (torchrun, accelerate launch): the rank whose failure this is, the first
    # of the ranks to fail (the others' failures often follow from it: a peer gone).
    rank: int | None = None

    @property
    def user_frame(self) -> Frame | None:
        """The deepest frame in the user's own code (worker frames first, they are deeper)."""
        for frames in (self.worker_frames, self.frames):
            for frame in reversed(frames):
                if frame.user:
                    return frame
        return None

    @property
    def headline(self) -> str:
        first = self.message.strip().splitlines()[0].strip() if self.message.strip() else ""
        return f"{self.exc_type}: {first}" if first else self.exc_type


@dataclass(frozen=True)
class Span:
    """A node's place in a file, 1-based lines and 0-based character columns (LibCST's)."""

    line: int
    col: int
    end_line: int
    end_col: int

    def contains_line(self, line: int) -> bool:
        return self.line <= line <= self.end_line


class ForwardStep(str):
    """One layer along a traced forward pass, in a fix's evidence: the layer, where it was built
    and the input shape it received. It is its own one-line text in the JSON report and the text
    report (``Linear(3136, 128) at train.py:39 <- 2x4096``); the Markdown report tabulates its
    parts."""

    layer: str
    site: str  # file:line
    input_shape: str  # 2x4096, or ? when not traced

    def __new__(cls, layer: str, site: str, input_shape: str) -> ForwardStep:
        step = super().__new__(cls, f"{layer} at {site} <- {input_shape}")
        step.layer, step.site, step.input_shape = layer, site, input_shape
        return step

    def __getnewargs__(self) -> tuple[str, str, str]:  # type: ignore[override]  # copy and pickle
        return self.layer, self.site, self.input_shape


@dataclass(frozen=True)
class Decline:
    """A pattern's reasoned refusal to fix a failure it recognised."""

    pattern: str
    reason: str
    diagnosis: str | None = None  # a remedy for the report when nothing can be edited
    file: str | None = None  # where the remedy applies (absolute), when the pattern knows
    line: int | None = None


@dataclass(frozen=True)
class HealthFinding:
    """A silent training bug a run showed (a health check's finding; never a crash)."""

    id: str  # the check: nan-loss, grad-accumulation, dead-parameters, ...
    message: str
    file: str | None = None  # the user's source line (absolute in evidence, relative in reports)
    line: int | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)  # what the run measured (JSON)
    # The same fix a static rule offers ({rule, applicability, diff}); offered, never applied.
    fix: Mapping[str, Any] | None = None
    # "warning": a bug; "information": what the run could not rule out (a branch of a module
    # that selects among its children, not sampled in the steps run): never fails an exit code.
    level: str = "warning"

    @property
    def is_warning(self) -> bool:
        return self.level != "information"

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else (self.file or "(no source line)")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id, "file": self.file, "line": self.line, "message": self.message,
            "evidence": dict(self.evidence), "level": self.level,
        }
        if self.fix is not None:
            data["fix"] = dict(self.fix)
        return data


@dataclass(frozen=True)
class RunLimits:
    """The limits a report states (the run configuration's, repairbot/run_config.py)."""

    batch_size: int = DEFAULTS.batch_size
    max_batches: int = DEFAULTS.max_batches
    max_steps: int = DEFAULTS.max_steps
    stopped_at: str | None = None
    # the loops the step budget left early in the last run: {loop, kind, step, steps} (file:line)
    left_loops: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class HarnessFault:
    """A failure that repairbot's tracing harness raised (its own code, not the script's), and
    how the script ends without the harness (the plain run, which tells the two apart)."""

    failure: Failure  # the traced run's failure (paths relative to the report's root in reports)
    frame: Frame  # the harness's own frame that raised it (its file relative to repairbot's folder)
    plain_status: RunStatus  # how the plain run ended: passed, failed, timeout
    plain_failure: Failure | None = None
    plain_exit_code: int | None = None
    plain_output: str = ""  # the last lines the plain run printed

    @property
    def plain_outcome(self) -> str:
        """The plain run's outcome in words."""
        if self.plain_status is RunStatus.PASSED:
            return "the script runs to its end (exit 0)"
        if self.plain_status is RunStatus.TIMEOUT:
            return "the script was still running at the time limit, with no error until then"
        if self.plain_failure is None:
            return f"the script ends with exit code {self.plain_exit_code}"
        frame = self.plain_failure.user_frame
        return f"the script fails with {self.plain_failure.headline}" + (f" at {frame.location}" if frame else "")

    @property
    def summary(self) -> str:
        """One line: what failed in the harness, and where."""
        return (
            f"repairbot's tracing harness failed: {self.failure.exc_type} raised by its own code at "
            f"{self.frame.location} ({self.frame.function}), not by the script; without the harness, "
            f"{self.plain_outcome}"
        )


def exit_code_for(status: Status) -> int:
    """The contract's exit code for a final status."""
    return {Status.FIXED: 0, Status.ALREADY_PASSING: 0, Status.GAVE_UP: 1, Status.ERROR: 2}[status]


class BadInput(Exception):
    """Input repairbot refuses with one clear line and exit code 2."""
