"""repairbot's API: one function per command, returning data (the CLI renders it).

``repair`` is ``repairbot fix``: validate the input, run the repair loop, then deliver the
verified result as the user asked: a diff (``dry_run``), the files rewritten in place
(``no_branch``), or one commit on a new branch that leaves the user's checkout untouched.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from repairbot import notebook as notebooks
from repairbot import registry
from repairbot.classify import Classification, candidates, classify_log, environment_problem
from repairbot.evidence import Evidence
from repairbot.lint import LintOptions, LintReport, run_lint
from repairbot.loop import LoopOptions, LoopResult, RepairLoop, collect_health
from repairbot.output import git
from repairbot.output.diff import unified_diff
from repairbot.output.report import render_text
from repairbot.pattern import Pattern
from repairbot.sources import Sources, check_syntax, relative_path, write_all_atomic
from repairbot.trace.runner import (
    Limits,
    Runner,
    RunRequest,
    RunResult,
    SubprocessRunner,
    WarmRunner,
)
from repairbot.types import (
    Attempt,
    BadInput,
    Decline,
    Failure,
    Frame,
    Outcome,
    RepairReport,
    RunLimits,
    RunStatus,
    Status,
    StopReason,
)


@dataclass(frozen=True)
class FixOptions:
    script: Path
    args: tuple[str, ...] = ()
    cwd: Path = field(default_factory=Path.cwd)
    python: str = sys.executable
    dry_run: bool = False
    no_branch: bool = False
    branch: str | None = None
    max_attempts: int = 3
    batch_size: int = 2
    max_batches: int = 2
    max_steps: int = 20
    timeout: float = 300.0
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    safe_only: bool = False
    keep_scratch: bool = False
    no_health: bool = False  # --no-health: the run-time health checks are off
    strict_health: bool = False  # --strict-health: health findings make the exit code 1
    module: str | None = None  # -m MODULE: run as `python -m MODULE` (``script`` is then unused)


@dataclass(frozen=True)
class DoctorOptions:
    """``repairbot doctor``: one traced run with the health checks, no repair."""

    script: Path
    args: tuple[str, ...] = ()
    cwd: Path = field(default_factory=Path.cwd)
    python: str = sys.executable
    batch_size: int = 2
    max_batches: int = 2
    max_steps: int = 20
    timeout: float = 300.0
    keep_scratch: bool = False
    module: str | None = None

    def as_fix(self) -> FixOptions:
        """The same run described as a ``fix --dry-run`` (validation and runner are shared)."""
        return FixOptions(
            script=self.script, args=self.args, cwd=self.cwd, python=self.python, dry_run=True,
            max_attempts=1, batch_size=self.batch_size, max_batches=self.max_batches,
            max_steps=self.max_steps, timeout=self.timeout, keep_scratch=self.keep_scratch,
            module=self.module,
        )


@dataclass(frozen=True)
class Delivery:
    """How the verified result reaches the user's repository."""

    root: Path
    repo: git.RepoState | None  # set in branch mode


def _validate_script(options: FixOptions) -> Path:
    if options.module is not None:
        options = replace(options, script=module_file(options.module, options.python, options.cwd))
    script = (options.cwd / options.script).absolute()
    if not script.exists():
        raise BadInput(f"{options.script}: no such file")
    if script.is_dir():
        raise BadInput(f"{options.script}: is a directory, not a Python script")
    try:
        data = script.read_bytes()
    except OSError as error:
        raise BadInput(f"{options.script}: cannot read: {error.strerror}") from None
    if not data.strip():
        raise BadInput(f"{options.script}: the file is empty")
    if not notebooks.is_notebook(script):  # a notebook's program is checked by notebooks.for_script
        check_syntax(script, data)
    if options.max_attempts < 1:
        raise BadInput("--max-attempts must be at least 1")
    if min(options.batch_size, options.max_batches, options.max_steps) < 1:
        raise BadInput("--batch-size, --max-batches and --max-steps must be at least 1")
    if options.timeout <= 0:
        raise BadInput("--timeout must be positive")
    if not Path(options.python).exists() and not _on_path(options.python):
        raise BadInput(f"--python {options.python}: no such interpreter")
    return script.resolve()


_FIND_MODULE = """
import importlib.machinery, importlib.util, json, sys
name = sys.argv[1]
parts = name.split(".")
try:
    spec = importlib.util.find_spec(parts[0])  # a top-level name: nothing is imported
except (ImportError, ValueError):
    spec = None
for part in parts[1:] + ["__main__"]:
    if spec is None or spec.submodule_search_locations is None:
        break
    spec = importlib.machinery.PathFinder.find_spec(
        spec.name + "." + part, list(spec.submodule_search_locations))
print(json.dumps(spec.origin if spec is not None and spec.origin not in (None, "built-in", "frozen") else None))
"""


def module_file(module: str, python: str, cwd: Path) -> Path:
    """The file ``python -m module`` runs, found as the interpreter finds it (from ``cwd``,
    without importing anything), else in the project's own folders (a src layout that is not
    installed: the run then fails to import it, and the report says how to fix that)."""
    import json
    import subprocess

    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise BadInput(f"-m {module}: not a module name")
    try:
        found = subprocess.run(
            [python, "-c", _FIND_MODULE, module], cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
        )
        origin = json.loads(found.stdout.strip().splitlines()[-1]) if found.returncode == 0 and found.stdout.strip() else None
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        origin = None
    if origin:
        return Path(origin)
    relative = Path(*module.split("."))
    for base in (cwd, cwd / "src"):
        for candidate in (base / relative.with_suffix(".py"), base / relative / "__main__.py"):
            if candidate.is_file():
                return candidate
    raise BadInput(f"-m {module}: no module named {module} (from {cwd})")


def package_remedy(failure: Failure, root: Path) -> str | None:
    """For ``No module named 'pkg'`` where pkg is this repository's own package: how to make it
    importable (install the project, or its src folder on PYTHONPATH)."""
    import re

    match = re.search(r"No module named '?([\w.]+)'?", failure.message)
    if match is None or not any(t in failure.exc_type for t in ("ModuleNotFoundError", "ImportError")):
        return None
    top = match.group(1).split(".")[0]
    skip = {".git", ".venv", "venv", "node_modules", "site-packages", "build", "dist", "__pycache__"}
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        package = folder / top
        if (package / "__init__.py").is_file() or (folder / f"{top}.py").is_file():
            where = relative_path(root, package if package.is_dir() else folder / f"{top}.py")
            parent = relative_path(root, folder) if folder != root else "."
            remedy = (
                f"`{top}` is this repository's own package ({where}), but the interpreter cannot import it: "
                "install the project (`pip install -e .`)"
            )
            if parent != ".":
                remedy += f" or put its folder on the path (`PYTHONPATH={parent} repairbot fix ...`)"
            return remedy + "."
        if depth < 3:
            try:
                children = [c for c in folder.iterdir() if c.is_dir() and c.name not in skip and not c.name.startswith(".")]
            except OSError:
                continue
            stack.extend((child, depth + 1) for child in children)
    return None


def _on_path(program: str) -> bool:
    return shutil.which(program) is not None


def run_environment() -> dict[str, str]:
    """What every run adds to the environment: one intra-op thread unless the user chose.

    At the harness's batch size a tiny model's step is dominated by thread start-up and
    synchronisation (bench/run.py measures it); the thread count never changes what the script
    computes. The report's environment shows the threads the runs used.
    """
    return {} if "OMP_NUM_THREADS" in os.environ else {"OMP_NUM_THREADS": "1"}


def _runner(options: FixOptions) -> SubprocessRunner:
    """Forked runs from a warm server (torch imported once), unless REPAIRBOT_FRESH_RUNS=1."""
    if os.environ.get("REPAIRBOT_FRESH_RUNS") == "1":
        return SubprocessRunner(keep_scratch=options.keep_scratch)
    runner = WarmRunner(python=options.python, keep_scratch=options.keep_scratch, env=run_environment())
    runner.start()  # its torch import overlaps the checks and parsing that come before the first run
    return runner


def _delivery(options: FixOptions, script: Path) -> Delivery:
    if options.dry_run or options.no_branch:
        try:
            return Delivery(root=git.open_repo(script).root, repo=None)
        except BadInput:
            return Delivery(root=options.cwd.resolve(), repo=None)
    repo = git.open_repo(script)
    if options.branch is not None:
        git.check_branch_name(repo, options.branch)
    dirty = git.unclean_files(repo, [script])
    if dirty:
        raise BadInput(
            f"{git.relative(repo, script)} is {dirty[script]}: commit it first, or use --no-branch or --dry-run"
        )
    return Delivery(root=repo.root, repo=repo)


def _import_check(delivery: Delivery) -> Callable[[RunResult], None] | None:
    """Branch mode: every user file the runs imported must be committed as it is."""
    repo = delivery.repo
    if repo is None:
        return None
    checked: set[str] = set()

    def check(result: RunResult) -> None:
        if result.evidence is None:
            return
        new = [f for f in result.evidence.imported_files if f not in checked]
        checked.update(new)
        dirty = git.unclean_files(repo, [Path(f) for f in new])
        if dirty:
            path, state = next(iter(dirty.items()))
            raise BadInput(
                f"{git.relative(repo, path)} is {state} and the script imports it: the fix commit would not be "
                "what was verified; commit it first, or use --no-branch or --dry-run"
            )

    return check


def repair(
    options: FixOptions,
    runner: Runner | None = None,
    patterns: tuple[Pattern, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    on_run: Callable[[RunRequest, RunResult], None] | None = None,
) -> RepairReport:
    """``repairbot fix``: BadInput escapes for the CLI to report (exit 2)."""
    started = time.monotonic()
    script = _validate_script(options)
    notebook = notebooks.for_script(script, options.script)
    own_runner = runner is None
    active = runner or _runner(options)
    try:
        chosen = registry.select(patterns or registry.all_patterns(), options.include, options.exclude)
        delivery = _delivery(options, script)
        if progress is not None and isinstance(active, WarmRunner):
            progress(f"runs: {active.mode}")
        limits = Limits(
            batch_size=options.batch_size, max_batches=options.max_batches, max_steps=options.max_steps,
            health=not options.no_health,
        )
        sources = Sources({script: notebook.program_bytes} if notebook else None)
        loop_options = LoopOptions(
            script=script,
            args=options.args,
            cwd=options.cwd.resolve(),
            root=delivery.root,
            python=options.python,
            limits=limits,
            timeout=options.timeout,
            max_attempts=options.max_attempts,
            patterns=chosen,
            safe_only=options.safe_only,
            env=run_environment(),
            notebooks={script: notebook} if notebook else {},
            module=options.module,
        )
        result = RepairLoop(loop_options, active, sources, _import_check(delivery), progress, on_run).run()
    finally:
        if own_runner and isinstance(active, SubprocessRunner):
            active.close()
    scratch = str(active.scratch_root) if isinstance(active, SubprocessRunner) and options.keep_scratch else None
    report = _report(options, script, delivery, sources, result, time.monotonic() - started, scratch, notebook)
    report = notebooks.place_report(report, notebook)  # a fix that changed a cell's line count
    if report.status is Status.FIXED and not options.dry_run:
        report = _deliver(options, delivery, sources, result, report, notebook)
    return report


def _relative(root: Path, path: Path) -> str:
    return relative_path(root, path)


def _report(
    options: FixOptions, script: Path, delivery: Delivery, sources: Sources, result: LoopResult,
    duration: float, scratch: str | None, notebook: notebooks.Notebook | None = None,
) -> RepairReport:
    files = sorted(result.verified, key=lambda p: _relative(delivery.root, p))
    diffs = [
        (notebook.diff if notebook and p == notebook.path else unified_diff)(
            sources.original(p), result.verified[p], _relative(delivery.root, p)
        )[0]
        for p in files
    ]
    evidence = result.last_run.evidence
    fixed = result.status is Status.FIXED
    notes = result.notes
    failure = result.remaining or (result.attempts[-1].failure if result.attempts else None)
    if result.stop_reason is StopReason.ENVIRONMENT and failure is not None:
        remedy = package_remedy(failure, delivery.root)
        if remedy:
            notes = (*notes, remedy)
    return RepairReport(
        script=_relative(delivery.root, script),
        root=str(delivery.root),
        status=result.status,
        stop_reason=result.stop_reason,
        attempts=result.attempts,
        diff="".join(diffs),
        files_modified=tuple(_relative(delivery.root, p) for p in files) if fixed else (),
        run_limits=_run_limits(result.limits, evidence, delivery.root),
        environment=evidence.environment.to_json() if evidence else {},
        duration_s=duration,
        scratch=scratch,
        notes=notes + (notebook.notes() if notebook else ()),
        output_tail=_output_tail(result.stop_reason, result.last_run),
        # the failure left at the stop, unless an attempt's block already describes it
        remaining=(
            _relative_failure(delivery.root, result.remaining)
            if result.remaining is not None and not any(a.failure is result.remaining for a in result.attempts)
            else None
        ),
        health=notebooks.cell_health(result.health, notebook),
        strict_health=options.strict_health,
        dry_run=options.dry_run,
        locations=notebooks.locator(notebook, delivery.root),
    )


def _run_limits(limits: Limits, evidence: Evidence | None, root: Path) -> RunLimits:
    """The limits a report states, with the loops the step budget left early in the last run
    (and where a run was ended in a loop outside the user's code)."""
    stopped = evidence.stopped_at if evidence else None

    def rel(where: object) -> str | None:
        if not isinstance(where, str) or ":" not in where:
            return None
        file, _, line = where.rpartition(":")
        return f"{_relative(root, Path(file))}:{line}"

    left = tuple(
        {"loop": rel(item.loop), "kind": item.kind, "step": rel(item.step), "steps": item.steps}
        for item in (evidence.limits.left_loops if evidence else ())
        if rel(item.loop)
    )
    return RunLimits(
        batch_size=limits.batch_size, max_batches=limits.max_batches, max_steps=limits.max_steps,
        stopped_at=f"{_relative(root, Path(stopped.file))}:{stopped.line}" if stopped else None,
        left_loops=left,
    )


# Stop reasons whose report shows the script's own output: the traceback says too little
_SHOW_OUTPUT = (StopReason.ENVIRONMENT, StopReason.TIMEOUT, StopReason.NO_USER_FRAME)


def _output_tail(reason: StopReason, run: RunResult) -> str | None:
    return (run.output_tail() or "(the script printed nothing)") if reason in _SHOW_OUTPUT else None


def _relative_failure(root: Path, failure: Failure) -> Failure:
    """The failure with the paths of the project's files relative to its root, as reports show them."""

    def rebase(frame: Frame) -> Frame:
        return replace(frame, file=_relative(root, Path(frame.file))) if frame.user else frame

    return replace(
        failure,
        frames=tuple(map(rebase, failure.frames)),
        worker_frames=tuple(map(rebase, failure.worker_frames)),
    )


def _commit_message(report: RepairReport) -> str:
    patterns = list(dict.fromkeys(a.fix.site.pattern for a in report.attempts if a.fix and a.applied))
    subject = f"repairbot: fix {', '.join(patterns)} in {', '.join(report.files_modified)}"
    trailers = "\n".join(f"Repairbot-Pattern: {p}" for p in patterns)
    return f"{subject}\n\n{render_text(report)}\n{trailers}\n"


def _deliver(
    options: FixOptions, delivery: Delivery, sources: Sources, result: LoopResult, report: RepairReport,
    notebook: notebooks.Notebook | None = None,
) -> RepairReport:
    # a notebook's verified program goes back into its JSON, only the edited cell's lines changed
    files = notebooks.file_bytes(result.verified, notebook)
    # The files on disk must still be what the runs started from: a file edited meanwhile
    # would be overwritten with a fix of its old content.
    for path in files:
        try:
            current = path.read_bytes()
        except OSError as error:
            raise BadInput(f"{_relative(delivery.root, path)}: cannot read it back: {error.strerror}") from None
        if current != (notebook.data if notebook and path == notebook.path else sources.original(path)):
            raise BadInput(
                f"{_relative(delivery.root, path)} changed on disk during the repair; nothing was written"
            )
    if options.no_branch:
        # all files or none: a read-only one is refused before anything is written
        write_all_atomic(files)
        return report
    assert delivery.repo is not None
    # a notebook's name often has spaces ("Part 3 - Training (Solution).ipynb"): not in a branch name
    stem = options.module.rpartition(".")[2] if options.module else options.script.stem
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-.") or "script"
    name: str | Callable[[str], str] = options.branch or (lambda sha: f"repairbot/fix-{stem}-{sha[:8]}")
    branch, commit = git.commit_on_new_branch(delivery.repo, files, _commit_message(report), name)
    return replace(report, branch=branch, commit=commit)


def error_report(script: str, message: str, duration: float = 0.0) -> RepairReport:
    """The report of a run refused as bad input."""
    return RepairReport(
        script=script,
        status=Status.ERROR,
        stop_reason=StopReason.BAD_INPUT,
        attempts=(),
        diff="",
        files_modified=(),
        run_limits=RunLimits(),
        environment={},
        duration_s=duration,
        error=message,
    )


def doctor(
    options: DoctorOptions,
    runner: Runner | None = None,
    patterns: tuple[Pattern, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    on_run: Callable[[RunRequest, RunResult], None] | None = None,
) -> RepairReport:
    """``repairbot doctor``: one traced run with the health checks; no repair, nothing written.

    A crash is reported with its classification (the pattern and its remedy, as a diagnosis);
    the exit code is 1 when the run crashed or a check found something (RepairReport.exit_code).
    """
    started = time.monotonic()
    fix_options = options.as_fix()
    script = _validate_script(fix_options)
    notebook = notebooks.for_script(script, options.script)
    root = _delivery(fix_options, script).root
    limits = Limits(batch_size=options.batch_size, max_batches=options.max_batches, max_steps=options.max_steps)
    own_runner = runner is None
    active = runner or _runner(fix_options)
    try:
        if progress is not None and isinstance(active, WarmRunner):
            progress(f"runs: {active.mode}")
        if progress is not None:
            progress("run 1: the script with the health checks")
        request = RunRequest(
            script=script, args=options.args, cwd=options.cwd.resolve(), python=options.python,
            limits=limits, timeout=options.timeout, env=run_environment(), module=options.module,
            overlay={script: notebook.program_bytes} if notebook else {},
        )
        run = active.run(request)
        if on_run is not None:
            on_run(request, run)
    finally:
        if own_runner and isinstance(active, SubprocessRunner):
            active.close()
    if run.status is RunStatus.HARNESS_ERROR:
        raise BadInput(run.harness_error or "the tracing harness could not start")
    sources = Sources({script: notebook.program_bytes} if notebook else None)
    health = collect_health(
        (run.evidence.health or ()) if run.evidence is not None else (), root, sources.current
    )
    status, reason, attempts = _doctor_outcome(run, root, patterns or registry.all_patterns())
    evidence = run.evidence
    scratch = str(active.scratch_root) if isinstance(active, SubprocessRunner) and options.keep_scratch else None
    return RepairReport(
        script=_relative(root, script),
        root=str(root),
        status=status,
        stop_reason=reason,
        attempts=attempts,
        diff="",
        files_modified=(),
        run_limits=_run_limits(limits, evidence, root),
        environment=evidence.environment.to_json() if evidence else {},
        duration_s=time.monotonic() - started,
        scratch=scratch,
        notes=_doctor_notes(run, root, reason) + (notebook.notes() if notebook else ()),
        health=notebooks.cell_health(health, notebook),
        command="doctor",
        locations=notebooks.locator(notebook, root),
        output_tail=_output_tail(reason, run),
    )


def _doctor_notes(run: RunResult, root: Path, reason: StopReason) -> tuple[str, ...]:
    if run.status is RunStatus.TIMEOUT:
        return ("the run reached the time limit",)
    if run.status is RunStatus.STOPPED:
        return ("the step budget was spent in a loop outside your code, which the harness cannot leave: "
                "the run was ended there and the code after it never ran",)
    remedy = package_remedy(run.failure, root) if reason is StopReason.ENVIRONMENT and run.failure else None
    return (remedy,) if remedy else ()


def _doctor_outcome(
    run: RunResult, root: Path, patterns: tuple[Pattern, ...]
) -> tuple[Status, StopReason, tuple[Attempt, ...]]:
    """How doctor's one run ended; a crash becomes a diagnosed attempt (never a fix)."""
    if run.passed:
        return Status.ALREADY_PASSING, StopReason.PASSING, ()
    if run.status is RunStatus.TIMEOUT or run.failure is None:
        return Status.GAVE_UP, StopReason.TIMEOUT, ()
    failure = run.failure
    ranked = candidates(failure, patterns)
    frame = failure.user_frame
    declines: tuple[Decline, ...] = ()
    if ranked:
        best = ranked[0].pattern
        how = "`repairbot fix` can rewrite it" if best.FIXES else "it is diagnosed, never edited"
        declines = (Decline(
            pattern=best.ID, reason=f"{best.TITLE} (doctor repairs nothing; {how})", diagnosis=best.remedy(),
        ),)
        reason = StopReason.DIAGNOSED
    elif environment_problem(failure):
        reason = StopReason.ENVIRONMENT
    elif frame is None:
        reason = StopReason.NO_USER_FRAME
    else:
        reason = StopReason.NO_PATTERN
    attempt = Attempt(
        n=1,
        failure=_relative_failure(root, failure),
        failure_file=_relative(root, Path(frame.file)) if frame else None,
        failure_line=frame.line if frame else None,
        pattern=ranked[0].pattern.ID if ranked else None,
        evidence={},
        fix=None,
        outcome=Outcome.NOT_RUN,
        declines=declines,
    )
    return Status.GAVE_UP, reason, (attempt,)


def classify(text: str, patterns: tuple[Pattern, ...] | None = None) -> Classification:
    """``repairbot classify``: the failure a log reports and the patterns that recognise it."""
    return classify_log(text, patterns or registry.all_patterns())


def lint(options: LintOptions) -> LintReport:
    """``repairbot lint``: the lint rules' findings over files and folders, fixed on request."""
    return run_lint(options)
