"""The repair loop: run, classify, locate, transform, rerun; at most ``max_attempts`` fixes.

Nothing here touches the disk: candidate fixes live in an overlay that the runner serves to
the child process. The loop depends on the ``Runner`` protocol only, so tests replay recorded
runs through it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst

from repairbot.classify import Candidate, candidates, environment_problem
from repairbot.edits import Site
from repairbot.evidence import Evidence, LastBatch
from repairbot.health import offered_rules
from repairbot.launchers import Launcher
from repairbot.lint.engine import FixLevel, apply_edit, lint_bytes, package_of
from repairbot.notebook import Notebook, NotebookError
from repairbot.output.diff import unified_diff
from repairbot.output.paths import ReportPaths, harness_file
from repairbot.pattern import Pattern, TransformError
from repairbot.registry import rules_by_id
from repairbot.results import Attempt, Fix
from repairbot.sources import SourceError, Sources
from repairbot.trace.runner import Limits, Runner, RunRequest, RunResult
from repairbot.types import (
    Applicability,
    BadInput,
    Decline,
    Failure,
    HarnessFault,
    HealthFinding,
    Outcome,
    RunStatus,
    Status,
    StopReason,
)


@dataclass(frozen=True)
class LoopOptions:
    script: Path
    args: tuple[str, ...]
    cwd: Path
    root: Path  # paths in reports are relative to this (the repository's top folder)
    python: str
    limits: Limits
    timeout: float
    max_attempts: int
    patterns: tuple[Pattern, ...]
    safe_only: bool = False
    env: dict[str, str] = field(default_factory=dict)
    # notebooks among the user's files: each runs, and is fixed, as its cells' Python program
    notebooks: Mapping[Path, Notebook] = field(default_factory=dict)
    module: str | None = None  # run as `python -m module` (``script`` is its file)
    launcher: Launcher | None = None  # torchrun / accelerate launch: every run, in every rank


@dataclass(frozen=True)
class LoopResult:
    status: Status
    stop_reason: StopReason
    attempts: tuple[Attempt, ...]
    verified: dict[Path, bytes]  # files changed by fixes the reruns verified (all of them when fixed)
    last_run: RunResult
    runs: int
    limits: Limits  # the limits of the last run (batch forcing may have been dropped)
    notes: tuple[str, ...] = ()
    remaining: Failure | None = None
    imported_files: frozenset[str] = frozenset()
    # What the health checks saw in the last run (paths relative to the root, static fixes offered)
    health: tuple[HealthFinding, ...] = ()
    harness_fault: HarnessFault | None = None  # stop reason harness-error: what failed, the plain run


# Called after every run; raises BadInput to refuse (branch mode: imported files not committed).
RunCheck = Callable[[RunResult], None]


def run_request(
    options: LoopOptions, overlay: Mapping[Path, bytes], limits: Limits, probes: frozenset[str] = frozenset(),
    plain: bool = False,
) -> RunRequest:
    """One run of the script as the options describe it, with candidate sources in ``overlay``
    (the notebooks' programs always); ``plain``: without the harness's limits and probes."""
    return RunRequest(
        script=options.script,
        args=options.args,
        cwd=options.cwd,
        python=options.python,
        limits=limits,
        timeout=options.timeout,
        overlay={**{p: nb.program_bytes for p, nb in options.notebooks.items()}, **overlay},
        env=options.env,
        probes=probes,
        module=options.module,
        plain=plain,
        launcher=options.launcher,
    )


def run_ended(run: RunResult) -> StopReason | None:
    """The stop a run makes by itself, before any failure is looked at: it passed (PASSING), or
    it never reached the end of the script (TIMEOUT: killed at the time limit, or ended by the
    step budget outside the user's code); None for a failure to work on."""
    if run.passed:
        return StopReason.PASSING
    if run.status in (RunStatus.STOPPED, RunStatus.TIMEOUT) or run.failure is None:
        return StopReason.TIMEOUT
    return None


def stop_reason(run: RunResult, ranked: Sequence[Candidate], declines: Sequence[Decline]) -> StopReason:
    """Why ``fix`` (or ``doctor``'s one run) stops at ``run`` with no fix to try: the one ladder
    of stop reasons; ``ranked`` are the patterns that recognise its failure, ``declines`` their
    refusals."""
    ended = run_ended(run)
    if ended is not None:
        return ended
    failure = run.failure
    assert failure is not None
    if (ranked and not ranked[0].pattern.FIXES) or any(d.diagnosis for d in declines):
        return StopReason.DIAGNOSED
    if environment_problem(failure):
        return StopReason.ENVIRONMENT
    if failure.user_frame is None:
        return StopReason.NO_USER_FRAME
    return StopReason.NO_PATTERN


@dataclass(frozen=True)
class Rewrite:
    """A located fix whose rewrite applies: the candidate, its site and the file's new bytes."""

    candidate: Candidate
    site: Site
    new_bytes: bytes


@dataclass(frozen=True)
class Located:
    """What locating a failure's fix found: the rewrite to verify, or none; and the candidates'
    refusals before it."""

    rewrite: Rewrite | None
    declines: tuple[Decline, ...] = ()

_NUMBER = re.compile(r"\d+")
# torch's closing advice, which anomaly mode (on in a tracing rerun) words differently
_HINT = re.compile(r"\s+Hint: .*$")


def failure_key(failure: Failure | None) -> tuple[str, ...] | None:
    """Identity of a failure for "the same error recurs": type, message shape, user line's code."""
    if failure is None:
        return None
    frame = failure.user_frame
    where = (frame.file, frame.function, (frame.code or "").strip()) if frame else ("", "", "")
    first_line = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
    return (failure.exc_type, _NUMBER.sub("#", _HINT.sub("", first_line)), *where)


def _worse(before: RunResult, after: RunResult) -> bool:
    """Did the rerun fail earlier than the run before it (fewer steps, batches, forwards)?"""
    if not before.progress or not after.progress:
        return False
    return after.progress < before.progress


def _stopped_note(run: RunResult, limits: Limits) -> str:
    """Why a run the step budget ended in the middle is not a pass."""
    where = run.evidence.stopped_at if run.evidence is not None else None
    at = f" at {where.file}:{where.line}" if where is not None else ""
    return (
        f"the step budget ({limits.max_steps} optimizer steps) was spent{at} in a loop outside your "
        "code, which the harness cannot leave; the run was ended there, so the code after it never ran "
        "and the script was not verified to run to its end."
    )


def harness_fault(run: RunResult, plain: RunResult) -> HarnessFault | None:
    """The harness's fault, when its own code raised ``run``'s failure and ``plain`` (the script
    without the harness) does not fail the same way; None when the failure is the script's."""
    failure = run.failure
    if failure is None or failure.harness_frame is None or failure_key(plain.failure) == failure_key(failure):
        return None
    return HarnessFault(
        failure=failure, frame=failure.harness_frame, plain_status=plain.status,
        plain_failure=plain.failure, plain_exit_code=plain.exit_code, plain_output=plain.output_tail(),
    )


def _planned_last_batch(evidence: Evidence) -> LastBatch | None:
    """The planned last batch that the failing batch may be (its size is the rows of a tensor of
    the failing module's input or of the user's frames) and that the real run may never reach:
    another loader with a planned last batch has a shorter real pass, so iterating the two
    together (``zip``) ends first. A loader without a planned last batch cannot: its cut pass
    is shorter than any planned one; and a loader's own last batch, on its own, is the real
    run's (what the plan is for)."""
    plans = [plan for plan in evidence.limits.last_batches if plan.size and plan.dataset and plan.batch_size]
    rows = set()
    module = evidence.failing_module
    if module is not None and module.input_shape:
        rows.add(module.input_shape[0])
    for scope in evidence.scopes.values():
        for value in scope.locals.values():
            if value.kind == "tensor" and value.shape:
                rows.add(value.shape[0])

    def batches(plan: LastBatch) -> int:
        assert plan.dataset is not None and plan.batch_size is not None
        return -(-plan.dataset // plan.batch_size)

    return next(
        (plan for plan in plans if plan.size in rows and any(batches(other) < batches(plan) for other in plans)),
        None,
    )


def _artefact_note(failure: Failure, cause: str, confirmation: RunResult, timeout: float) -> str:
    """What the report says of a failure only the harness's limits made."""
    if confirmation.status is RunStatus.TIMEOUT:
        without = f"without that limit the run was still going at the {timeout:g}s time limit, with no such failure."
    elif confirmation.passed:
        without = "without that limit the script runs."
    else:
        without = "without that limit it does not happen."
    return (
        f"{failure.headline} happened only with {cause}; {without}"
        " Later runs keep the script's own batches, and nothing was changed for it."
    )


def _progress_text(progress: tuple[int, ...]) -> str:
    steps, batches, forwards = (*progress, 0, 0, 0)[:3]
    return f"{steps} optimizer steps, {batches} batches, {forwards} module calls"


class RepairLoop:
    def __init__(
        self,
        options: LoopOptions,
        runner: Runner,
        sources: Sources,
        check_run: RunCheck | None = None,
        progress: Callable[[str], None] | None = None,
        on_run: Callable[[RunRequest, RunResult], None] | None = None,
    ) -> None:
        self.options = options
        self.runner = runner
        self.sources = sources
        self.check_run = check_run
        self.say = progress or (lambda message: None)
        self.on_run = on_run  # -v: each run's command, limits, duration and output tail
        self.limits = options.limits
        self.paths = ReportPaths(options.root)
        self.overlay: dict[Path, bytes] = {}
        self.runs = 0
        self.notes: list[str] = []
        self.imported: set[str] = set()
        self.probes = frozenset().union(*(p.PROBES for p in options.patterns))

    # running ------------------------------------------------------------------------------
    def _run(
        self,
        overlay: dict[Path, bytes],
        limits: Limits | None = None,
        why: str = "",
        probes: frozenset[str] = frozenset(),
        plain: bool = False,
    ) -> RunResult:
        self.runs += 1
        self.say(f"run {self.runs}: {why}" if why else f"run {self.runs}")
        request = run_request(self.options, overlay, limits or self.limits, self.probes | probes, plain)
        result = self.runner.run(request)
        if self.on_run is not None:
            self.on_run(request, result)
        if result.status is RunStatus.HARNESS_ERROR:
            raise BadInput(result.harness_error or "the tracing harness could not start")
        if result.evidence is not None:
            self.imported.update(result.evidence.imported_files)
        if self.check_run is not None:
            self.check_run(result)
        return result

    # the loop -----------------------------------------------------------------------------
    def run(self) -> LoopResult:
        attempts: list[Attempt] = []
        run = self._run(self.overlay, why="the script as it is")
        confirmed: set[tuple[str, ...] | None] = set()
        excluded: set[tuple[str, str]] = set()  # (pattern, file:line) sites that made things worse
        # The next candidates of the last located fix, tried in order when its rerun fails
        pending: list[tuple[Candidate, Site]] = []

        while True:
            ended = run_ended(run)
            if ended is StopReason.PASSING:
                status = Status.FIXED if self.overlay else Status.ALREADY_PASSING
                return self._result(status, ended, attempts, run)
            if ended is not None:
                if run.status is RunStatus.STOPPED:
                    # passing means the whole script ran: a run ended in the middle proves nothing
                    self.notes.append(_stopped_note(run, self.limits))
                return self._result(Status.GAVE_UP, ended, attempts, run)
            failure = run.failure
            assert failure is not None
            key = failure_key(failure)
            if failure.harness_frame is not None and key not in confirmed:
                # raised by the harness's own code: the script without the harness tells whose it is
                confirmed.add(key)
                plain = self._run(
                    self.overlay, why="the script without the harness (the harness's own code raised the failure)",
                    plain=True,
                )
                fault = harness_fault(run, plain)
                if fault is not None:
                    return self._harness_failed(attempts, run, fault)
                self.notes.append(
                    f"{failure.headline} was raised inside repairbot's harness "
                    f"({harness_file(failure.harness_frame.file)}:{failure.harness_frame.line}), "
                    "but the script fails the same way without the harness: it is the script's failure."
                )
            ranked = candidates(failure, self.options.patterns)

            artefact = self._artefact(run, ranked, key) if key not in confirmed else None
            confirmed.add(key)
            if artefact is not None:
                confirmation, limits, cause = artefact
                self.notes.append(_artefact_note(failure, cause, confirmation, self.options.timeout))
                self.limits = limits
                run = confirmation
                continue

            if len(attempts) >= self.options.max_attempts:
                return self._result(Status.GAVE_UP, StopReason.MAX_ATTEMPTS, attempts, run, failure)

            started = time.monotonic()
            located = Located(self._next_candidate(pending) if pending else None)
            if located.rewrite is None:
                evidence = self._evidence_for(run, ranked, key)
                located = self._locate(failure, ranked, evidence, excluded)
                if located.rewrite is not None:
                    found = located.rewrite
                    pending = [(found.candidate, alternative) for alternative in found.site.alternatives]
            if located.rewrite is None:
                declines = located.declines
                attempts.append(self._attempt_without_fix(len(attempts) + 1, failure, ranked, run.evidence, declines))
                return self._result(Status.GAVE_UP, stop_reason(run, ranked, declines), attempts, run, failure)
            candidate, site, new_bytes = located.rewrite.candidate, located.rewrite.site, located.rewrite.new_bytes
            declines = located.declines

            candidate_overlay = {**self.overlay, Path(site.file): new_bytes}
            fix = self._fix(site, new_bytes)
            rerun = self._run(candidate_overlay, why=f"verifying the {site.pattern} fix")
            outcome, keep = self._judge(run, rerun, key)
            if outcome is Outcome.FAILED_SAME:
                moved = self._culprit_moved(located.rewrite, candidate_overlay, rerun, key)
                if moved is not None:
                    outcome, keep, rerun = Outcome.FAILED_OTHER, True, moved
            attempt = Attempt(
                n=len(attempts) + 1,
                failure=failure,
                failure_file=self.paths.file(failure.user_frame.file) if failure.user_frame else None,
                failure_line=failure.user_frame.line if failure.user_frame else None,
                pattern=candidate.pattern.ID,
                evidence=dict(site.evidence),
                fix=fix,
                outcome=outcome,
                declines=self.paths.declines(declines),
                duration_s=time.monotonic() - started + rerun.duration_s,
                applied=keep,
            )
            attempts.append(attempt)
            if not keep and pending and rerun.status is not RunStatus.TIMEOUT:
                self.notes.append(
                    f"The {site.pattern} fix ({site.evidence.get('candidate', 'first candidate')}) was discarded: "
                    f"its rerun failed ({rerun.failure.headline if rerun.failure else 'no failure recorded'}); "
                    "the next candidate was tried."
                )
                continue
            pending = [] if keep else pending
            if outcome is Outcome.FAILED_SAME:
                self.notes.append(f"The {site.pattern} fix was discarded: the same error came back.")
                return self._result(Status.GAVE_UP, StopReason.SAME_ERROR, attempts, run, failure)
            if rerun.status is RunStatus.STOPPED:
                self.notes.append(f"The {site.pattern} fix was not verified: " + _stopped_note(rerun, self.limits))
                return self._result(Status.GAVE_UP, StopReason.TIMEOUT, attempts, rerun, failure)
            if rerun.status is RunStatus.TIMEOUT:
                got_past = bool(rerun.progress) and rerun.progress > run.progress
                self.notes.append(
                    f"The {site.pattern} fix was not verified: the rerun was still running at the "
                    f"{self.options.timeout:g}s time limit"
                    + (f", past the point of the old failure ({_progress_text(rerun.progress)})" if got_past else "")
                    + ". A smaller --max-steps or a larger --timeout lets it finish."
                )
                return self._result(Status.GAVE_UP, StopReason.TIMEOUT, attempts, rerun, failure)
            if not keep:
                self.notes.append(
                    f"The {site.pattern} fix was discarded: the rerun failed earlier than before "
                    f"({rerun.failure.headline if rerun.failure else 'no failure recorded'})."
                )
                excluded.add((site.pattern, f"{site.file}:{site.span.line}"))
                continue
            self.overlay = candidate_overlay
            self.sources.set(Path(site.file), new_bytes)
            run = rerun

    # steps --------------------------------------------------------------------------------
    def _evidence_for(self, run: RunResult, ranked: Sequence[Candidate], key: tuple[str, ...] | None) -> Evidence | None:
        """The run's evidence, or that of a rerun with the costly probes the candidates need."""
        had = run.evidence.probes if run.evidence else frozenset()
        needed = frozenset().union(*(c.pattern.rerun_probes(c.match) for c in ranked)) - had
        if not needed:
            return run.evidence
        traced = self._run(
            self.overlay, probes=needed,
            why=f"tracing the failure again with {', '.join(sorted(needed))} for {ranked[0].pattern.ID}",
        )
        if failure_key(traced.failure) == key and traced.evidence is not None:
            return traced.evidence
        self.notes.append(
            f"The rerun with {', '.join(sorted(needed))} did not fail the same way "
            f"({traced.failure.headline if traced.failure else 'it passed'}); its evidence was not used."
        )
        return run.evidence

    def _next_candidate(self, pending: list[tuple[Candidate, Site]]) -> Rewrite | None:
        """The next of a located fix's other candidates whose rewrite applies (popped from
        ``pending``); None when none is left."""
        while pending:
            candidate, site = pending.pop(0)
            if self.options.safe_only and site.applicability is not Applicability.SAFE:
                continue
            if not self.paths.inside(Path(site.file)):
                continue
            try:
                return Rewrite(candidate, site, self._transform(candidate.pattern, site))
            except (TransformError, SourceError, cst.ParserSyntaxError):
                continue
        return None

    def _batch_dependent(self, run: RunResult, ranked: Sequence[Candidate]) -> bool:
        """Could the batches the harness served have made this failure?"""
        if not ranked:
            # a missing package, file or GPU does not depend on the batch size
            return run.failure is None or environment_problem(run.failure) is None
        best = ranked[0]
        return best.pattern.needs_confirmation(best.failure, run.evidence)

    def _artefact(
        self, run: RunResult, ranked: Sequence[Candidate], key: tuple[str, ...] | None
    ) -> tuple[RunResult, Limits, str] | None:
        """The confirmation run that does not fail like ``run``, its limits and the limit that
        made the failure (in words); None when the failure is confirmed (or nothing needed it).

        Each confirmation lifts one more limit: the forced batch size, then the cut passes when
        the confirmation's own failing batch is a planned last batch (a script whose loaders'
        batch sizes come from a forced ``--batch-size`` plans them only at its own)."""
        limits, checked = self.limits, run
        while (confirming := self._artefact_check(checked, ranked, limits)) is not None:
            limits, cause, why = confirming
            confirmation = self._run(self.overlay, limits, why=why)
            if failure_key(confirmation.failure) != key:
                return confirmation, limits, cause
            checked = confirmation
        return None

    def _artefact_check(
        self, run: RunResult, ranked: Sequence[Candidate], limits: Limits
    ) -> tuple[Limits, str, str] | None:
        """The run that confirms a failure the harness's limits may have caused, before any edit
        (limits, the cause in words, why for the progress line); None when no limit can have.

        A cut pass ends with its loader's real last batch, so that a batch of one the real run
        reaches is seen in two batches; but where passes are consumed together (``zip(a, b)``
        stops at the shorter), the real run may never reach the longer loader's last batch.
        When the failing batch may be such a one (``_planned_last_batch``), only a run of the
        real length (no cut passes, the script's batch sizes) tells which."""
        evidence = run.evidence
        if evidence is None:
            return None
        planned = _planned_last_batch(evidence) if limits.cut_batches else None
        if planned is not None and self._batch_dependent(run, ranked):
            where = f" of the DataLoader at {self.paths.location(planned.site)}" if planned.site else ""
            return (
                replace(limits, force_batch_size=False, cut_batches=False),
                f"the harness's cut passes, which end with each loader's last batch (the batch of {planned.size}"
                f"{where})",
                "confirming the failure at the real run's length (whole DataLoader passes, the script's batch size)",
            )
        if limits.force_batch_size and evidence.limits.forced and self._batch_dependent(run, ranked):
            return (
                limits.without_batch_forcing(),
                f"the batch size forced to {limits.batch_size}",
                "confirming the failure at the script's own batch size",
            )
        return None

    def _harness_failed(self, attempts: list[Attempt], run: RunResult, fault: HarnessFault) -> LoopResult:
        """The stop where the harness's own code raised the failure and the plain run does not."""
        self.notes.append(
            "This is a bug in repairbot, not in the script: nothing was changed. Please report it with this output."
        )
        result = self._result(Status.ERROR, StopReason.HARNESS_ERROR, attempts, run)
        return replace(result, harness_fault=fault)

    def _locate(
        self,
        failure: Failure,
        ranked: Sequence[Candidate],
        evidence: Evidence | None,
        excluded: set[tuple[str, str]],
    ) -> Located:
        declines: list[Decline] = []
        for candidate in ranked:
            try:
                found = candidate.pattern.locate(candidate.failure, candidate.match, evidence, self.sources)
            except SourceError as error:
                declines.append(candidate.pattern.decline(str(error)))
                continue
            except Exception as error:  # a bug in one pattern never crashes the repair
                declines.append(candidate.pattern.decline(
                    f"the pattern failed while locating the fix ({type(error).__name__}: {error}); "
                    "this is a bug in repairbot, please report it"
                ))
                self.notes.append(f"The {candidate.pattern.ID} pattern raised {type(error).__name__} and was skipped.")
                continue
            if isinstance(found, Decline):
                declines.append(found)
                continue
            if (found.pattern, f"{found.file}:{found.span.line}") in excluded:
                declines.append(candidate.pattern.decline("this fix was tried and made things worse"))
                continue
            if self.options.safe_only and found.applicability is not Applicability.SAFE:
                declines.append(candidate.pattern.decline(
                    f"the fix is {found.applicability.value} and --safe-only is set", diagnosis=found.summary
                ))
                continue
            if not self.paths.inside(Path(found.file)):
                declines.append(candidate.pattern.decline("the fix site is outside the project"))
                continue
            try:
                new_bytes = self._transform(candidate.pattern, found)
            except (TransformError, SourceError, cst.ParserSyntaxError) as error:
                declines.append(candidate.pattern.decline(f"the rewrite failed: {error}"))
                continue
            return Located(Rewrite(candidate, found, new_bytes), tuple(declines))
        return Located(None, tuple(declines))

    def _transform(self, pattern: Pattern, site: Site) -> bytes:
        path = Path(site.file)
        new_module = pattern.transform(site, self.sources.metadata(path))
        new_bytes = new_module.bytes
        if new_bytes == self.sources.current(path):
            raise TransformError("the rewrite changed nothing")
        # a fix must leave a file the interpreter accepts and LibCST can edit again
        compile(new_bytes, str(path), "exec", dont_inherit=True)
        notebook = self.options.notebooks.get(path)
        if notebook is not None:
            try:  # one cell, no IPython line: or it could not be written back
                notebook.check_edit(new_bytes)
            except NotebookError as error:
                raise TransformError(str(error)) from None
        self.sources.module(path, new_bytes)
        return new_bytes

    def _fix(self, site: Site, new_bytes: bytes) -> Fix:
        path = Path(site.file)
        rel = self.paths.file(site.file)
        notebook = self.options.notebooks.get(path)
        differ = notebook.diff if notebook is not None else unified_diff
        diff, changed = differ(self.sources.current(path), new_bytes, rel)
        return Fix(site=site, file=rel, diff=diff, changed_lines=changed)

    def _judge(self, before: RunResult, after: RunResult, key: tuple[str, ...] | None) -> tuple[Outcome, bool]:
        """The attempt's outcome, and whether the fix is kept."""
        if after.passed:
            return Outcome.PASSED, True
        if after.status in (RunStatus.TIMEOUT, RunStatus.STOPPED):
            return Outcome.FAILED_OTHER, False
        if failure_key(after.failure) == key:
            return Outcome.FAILED_SAME, False
        return Outcome.FAILED_OTHER, not _worse(before, after)

    def _culprit_moved(
        self, fixed: Rewrite, overlay: dict[Path, bytes], rerun: RunResult, key: tuple[str, ...] | None
    ) -> RunResult | None:
        """Whether a rerun that failed the same way as before made progress all the same: the
        same mistake made twice (two residual ``x += ...`` lines) fails with the same message
        after the first is fixed, and only the culprit the pattern locates in the rerun tells
        the two apart. The rerun (traced again with the pattern's costly probes when it needs
        them) when its culprit is at another site than the fix; None when it is the fixed site
        again, or cannot be located (then the fix did not work)."""
        pattern, site = fixed.candidate.pattern, fixed.site
        failure = rerun.failure
        ranked = candidates(failure, (pattern,)) if failure is not None else []
        if not ranked or rerun.evidence is None:
            return None
        again = ranked[0]
        needed = pattern.rerun_probes(again.match) - rerun.evidence.probes
        if needed:
            rerun = self._run(
                overlay, probes=needed,
                why=f"tracing the rerun with {', '.join(sorted(needed))} to see whether the culprit moved",
            )
            if failure_key(rerun.failure) != key or rerun.failure is None or rerun.evidence is None:
                return None
            ranked = candidates(rerun.failure, (pattern,))
            if not ranked:
                return None
            again = ranked[0]
        path = Path(site.file)
        before = self.sources.current(path)
        self.sources.set(path, fixed.new_bytes)
        try:
            found = pattern.locate(again.failure, again.match, rerun.evidence, self.sources)
        except Exception:  # a pattern that cannot locate it again proves nothing either way
            return None
        finally:
            self.sources.set(path, before)
        if isinstance(found, Decline):
            return None
        # The fixed statement's lines in the new file (a fix may add lines: a no_grad block)
        added = max(0, fixed.new_bytes.count(b"\n") - before.count(b"\n"))
        if Path(found.file).resolve() == path.resolve() and (
            site.span.line <= found.span.end_line and found.span.line <= site.span.end_line + added
        ):
            return None
        # Another candidate for the same culprit (the fix's alternatives) is the first fix having
        # missed, not a second mistake
        if any(
            Path(other.file).resolve() == Path(found.file).resolve() and other.span.line == found.span.line
            for other in site.alternatives
        ):
            return None
        self.notes.append(
            f"The {site.pattern} fix at {self.paths.file(site.file)}:{site.span.line} was kept: the rerun failed "
            f"with the same error, but its culprit is another site ({self.paths.file(found.file)}:{found.span.line}), "
            "the same mistake made again there."
        )
        return rerun

    def _attempt_without_fix(
        self, n: int, failure: Failure, ranked: Sequence[Candidate], evidence: Evidence | None, declines: Sequence[Decline]
    ) -> Attempt:
        frame = failure.user_frame
        return Attempt(
            n=n,
            failure=failure,
            failure_file=self.paths.file(frame.file) if frame else None,
            failure_line=frame.line if frame else None,
            pattern=ranked[0].pattern.ID if ranked else None,
            evidence={},
            fix=None,
            outcome=Outcome.NOT_RUN,
            declines=self.paths.declines(declines),
        )

    def _result(
        self, status: Status, reason: StopReason, attempts: list[Attempt], run: RunResult, remaining: Failure | None = None
    ) -> LoopResult:
        return LoopResult(
            status=status,
            stop_reason=reason,
            attempts=tuple(attempts),
            verified=dict(self.overlay),
            last_run=run,
            runs=self.runs,
            limits=self.limits,
            notes=tuple(self.notes),
            remaining=remaining,
            imported_files=frozenset(self.imported),
            health=self._health(run),
        )

    def _health(self, run: RunResult) -> tuple[HealthFinding, ...]:
        findings = run.evidence.health if run.evidence is not None else None
        return collect_health(findings or (), self.options.root, self.sources.current)


# --------------------------------------------------------------------------------------------
# Health findings: from the child's absolute paths to the report's, with the static fix offered

# The lint rule whose fix a health check offers ("where a static rule exists, the same fix").
HEALTH_RULES = offered_rules()


def collect_health(
    findings: Sequence[HealthFinding], root: Path, read: Callable[[Path], bytes]
) -> tuple[HealthFinding, ...]:
    """The findings as reports show them: paths relative to ``root`` (``file:line`` strings in
    the evidence too), and the lint rule's fix where one exists; ``read`` gives a file's
    current bytes (the verified fixes included)."""
    collected = []
    paths = ReportPaths(root)
    for finding in findings:
        rel = paths.file(finding.file) if finding.file else None
        fix = finding.fix
        if fix is None and finding.file and finding.line and finding.id in HEALTH_RULES:
            fix = offered_fix(HEALTH_RULES[finding.id], Path(finding.file), finding.line, rel or finding.file, read)
        collected.append(replace(
            finding, file=rel, evidence=paths.evidence(finding.evidence), fix=fix,
        ))
    return tuple(collected)


def offered_fix(
    rule_id: str, path: Path, line: int, display: str, read: Callable[[Path], bytes]
) -> dict[str, str] | None:
    """The fix of the lint rule's finding whose span (a loop) holds ``line``: {rule,
    applicability, diff}; None when the rule finds nothing there or has no fix for it."""
    rule = rules_by_id().get(rule_id)
    if rule is None:
        return None
    try:
        data = read(path)
    except (OSError, SourceError):
        return None
    result = lint_bytes(data, path, display, [rule], FixLevel.NONE, edits=True, package=package_of(path.parent))
    around = [f for f in result.findings if f.rule == rule_id and f.line <= line <= f.end_line and f.edit]
    if not around:
        return None
    finding = max(around, key=lambda f: (f.line, f.column))  # the innermost loop
    assert finding.edit is not None
    fixed = apply_edit(data, finding.edit)
    diff, _ = unified_diff(data, fixed, display)
    return {"rule": rule_id, "applicability": finding.fix, "diff": diff}

