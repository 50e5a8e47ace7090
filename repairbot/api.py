"""repairbot's API: one function per command, returning data (the CLI renders it).

``repair`` is ``repairbot fix``: validate the input, run the repair loop, then deliver the
verified result as the user asked: a diff (``dry_run``), the files rewritten in place
(``no_branch``), or one commit on a new branch that leaves the user's checkout untouched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from repairbot import notebook as notebooks
from repairbot import registry
from repairbot.classify import Classification, candidates, classify_log
from repairbot.evidence import Evidence
from repairbot.launchers import Launcher
from repairbot.lint import LintOptions, LintReport, run_lint
from repairbot.loop import (
    LoopOptions,
    LoopResult,
    RepairLoop,
    collect_health,
    harness_fault,
    run_request,
    stop_reason,
)
from repairbot.output import git
from repairbot.output.diff import unified_diff
from repairbot.output.paths import ReportPaths
from repairbot.output.report import render_text
from repairbot.pattern import Pattern
from repairbot.results import Attempt, RepairReport
from repairbot.run_config import RunConfig
from repairbot.sources import Sources, check_syntax, write_all_atomic
from repairbot.trace.runner import (
    Limits,
    Runner,
    RunRequest,
    RunResult,
    SubprocessRunner,
    WarmRunner,
)
from repairbot.types import (
    BadInput,
    Decline,
    Failure,
    Outcome,
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
    config: RunConfig = field(default_factory=RunConfig)  # the limits (repairbot/run_config.py)
    dry_run: bool = False
    no_branch: bool = False
    branch: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    safe_only: bool = False
    keep_scratch: bool = False
    strict_health: bool = False  # --strict-health: health findings make the exit code 1
    module: str | None = None  # -m MODULE: run as `python -m MODULE` (``script`` is then unused)
    launcher: Launcher | None = None  # --launcher: torchrun / accelerate launch, every rank traced


@dataclass(frozen=True)
class DoctorOptions:
    """``repairbot doctor``: one traced run with the health checks, no repair."""

    script: Path
    args: tuple[str, ...] = ()
    cwd: Path = field(default_factory=Path.cwd)
    python: str = sys.executable
    config: RunConfig = field(default_factory=RunConfig)  # the limits doctor has options for
    keep_scratch: bool = False
    module: str | None = None
    launcher: Launcher | None = None

    def as_fix(self) -> FixOptions:
        """The same run described as a ``fix --dry-run`` (validation and setup are shared)."""
        return FixOptions(
            script=self.script, args=self.args, cwd=self.cwd, python=self.python, config=self.config,
            dry_run=True, keep_scratch=self.keep_scratch, module=self.module, launcher=self.launcher,
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
    config = options.config
    if config.max_attempts < 1:
        raise BadInput("--max-attempts must be at least 1")
    if min(config.batch_size, config.max_batches, config.max_steps) < 1:
        raise BadInput("--batch-size, --max-batches and --max-steps must be at least 1")
    if config.timeout <= 0:
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
            paths = ReportPaths(root)
            where = paths.file(package if package.is_dir() else folder / f"{top}.py")
            parent = paths.file(folder) if folder != root else "."
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
    """Forked runs from a warm server (torch imported once), unless REPAIRBOT_FRESH_RUNS=1 or a
    launcher starts the runs (its ranks are fresh processes it starts itself)."""
    if os.environ.get("REPAIRBOT_FRESH_RUNS") == "1" or options.launcher is not None:
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


@dataclass(frozen=True)
class _Setup:
    """What fix and doctor set up alike before the first run."""

    script: Path  # resolved
    notebook: notebooks.Notebook | None
    delivery: Delivery
    sources: Sources
    loop: LoopOptions  # the runs: script, interpreter, limits, patterns
    runner: Runner

    @property
    def paths(self) -> ReportPaths:
        return ReportPaths(self.delivery.root)

    def scratch(self, options: FixOptions) -> str | None:
        """The scratch folder the report names (--keep-scratch)."""
        runner = self.runner
        return str(runner.scratch_root) if isinstance(runner, SubprocessRunner) and options.keep_scratch else None


@contextlib.contextmanager
def _setup(
    options: FixOptions, runner: Runner | None, patterns: tuple[Pattern, ...] | None,
    progress: Callable[[str], None] | None,
) -> Iterator[_Setup]:
    """The input checked, the runner started (closed on the way out unless it was given), the
    patterns chosen, the repository opened as the delivery needs it."""
    script = _validate_script(options)
    notebook = notebooks.for_script(script, options.script)
    own_runner = runner is None
    active = runner or _runner(options)
    try:
        chosen = registry.select(patterns or registry.all_patterns(), options.include, options.exclude)
        delivery = _delivery(options, script)
        if progress is not None and isinstance(active, WarmRunner):
            progress(f"runs: {active.mode}")
        config = options.config
        loop = LoopOptions(
            script=script,
            args=options.args,
            cwd=options.cwd.resolve(),
            root=delivery.root,
            python=options.python,
            limits=Limits.of(config),
            timeout=config.timeout,
            max_attempts=config.max_attempts,
            patterns=chosen,
            safe_only=options.safe_only,
            env=run_environment(),
            notebooks={script: notebook} if notebook else {},
            module=options.module,
            launcher=options.launcher,
        )
        sources = Sources({script: notebook.program_bytes} if notebook else None)
        yield _Setup(script, notebook, delivery, sources, loop, active)
    finally:
        if own_runner and isinstance(active, SubprocessRunner):
            active.close()


def repair(
    options: FixOptions,
    runner: Runner | None = None,
    patterns: tuple[Pattern, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    on_run: Callable[[RunRequest, RunResult], None] | None = None,
) -> RepairReport:
    """``repairbot fix``: BadInput escapes for the CLI to report (exit 2)."""
    started = time.monotonic()
    with _setup(options, runner, patterns, progress) as setup:
        result = RepairLoop(
            setup.loop, setup.runner, setup.sources, _import_check(setup.delivery), progress, on_run
        ).run()
    script, notebook, delivery, sources = setup.script, setup.notebook, setup.delivery, setup.sources
    report = _report(
        options, script, delivery, sources, result, time.monotonic() - started, setup.scratch(options), notebook
    )
    report = notebooks.place_report(report, notebook)  # a fix that changed a cell's line count
    if report.status is Status.FIXED and not options.dry_run:
        report = _deliver(options, delivery, sources, result, report, notebook)
    return report


def _report(
    options: FixOptions, script: Path, delivery: Delivery, sources: Sources, result: LoopResult,
    duration: float, scratch: str | None, notebook: notebooks.Notebook | None = None,
) -> RepairReport:
    paths = ReportPaths(delivery.root)
    files = sorted(result.verified, key=paths.file)
    diffs = [
        (notebook.diff if notebook and p == notebook.path else unified_diff)(
            sources.original(p), result.verified[p], paths.file(p)
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
        script=paths.file(script),
        root=str(delivery.root),
        status=result.status,
        stop_reason=result.stop_reason,
        attempts=result.attempts,
        diff="".join(diffs),
        files_modified=tuple(paths.file(p) for p in files) if fixed else (),
        run_limits=_run_limits(result.limits, evidence, paths),
        environment=evidence.environment.to_json() if evidence else {},
        duration_s=duration,
        scratch=scratch,
        notes=notes + (notebook.notes() if notebook else ()),
        output_tail=_output_tail(result.stop_reason, result.last_run),
        # the failure left at the stop, unless an attempt's block already describes it
        remaining=(
            paths.failure(result.remaining)
            if result.remaining is not None and not any(a.failure is result.remaining for a in result.attempts)
            else None
        ),
        health=notebooks.cell_health(result.health, notebook),
        strict_health=options.strict_health,
        dry_run=options.dry_run,
        locations=notebooks.locator(notebook, delivery.root),
        harness_fault=paths.harness_fault(result.harness_fault) if result.harness_fault is not None else None,
        error=paths.harness_fault(result.harness_fault).summary if result.harness_fault is not None else None,
    )


def _run_limits(limits: Limits, evidence: Evidence | None, paths: ReportPaths) -> RunLimits:
    """The limits a report states, with the loops the step budget left early in the last run
    (and where a run was ended in a loop outside the user's code)."""
    stopped = evidence.stopped_at if evidence else None
    rel = paths.location
    left = tuple(
        {"loop": rel(item.loop), "kind": item.kind, "step": rel(item.step), "steps": item.steps}
        for item in (evidence.limits.left_loops if evidence else ())
        if rel(item.loop)
    )
    return RunLimits(
        batch_size=limits.batch_size, max_batches=limits.max_batches, max_steps=limits.max_steps,
        stopped_at=f"{paths.file(stopped.file)}:{stopped.line}" if stopped else None,
        left_loops=left,
    )


# Stop reasons whose report shows the script's own output: the traceback says too little
_SHOW_OUTPUT = (StopReason.ENVIRONMENT, StopReason.TIMEOUT, StopReason.NO_USER_FRAME)


def _output_tail(reason: StopReason, run: RunResult) -> str | None:
    return (run.output_tail() or "(the script printed nothing)") if reason in _SHOW_OUTPUT else None


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
            raise BadInput(f"{ReportPaths(delivery.root).file(path)}: cannot read it back: {error.strerror}") from None
        if current != (notebook.data if notebook and path == notebook.path else sources.original(path)):
            raise BadInput(
                f"{ReportPaths(delivery.root).file(path)} changed on disk during the repair; nothing was written"
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
    with _setup(fix_options, runner, patterns, progress) as setup:
        if progress is not None:
            progress("run 1: the script with the health checks")
        request = run_request(setup.loop, {}, setup.loop.limits)
        run = setup.runner.run(request)
        if on_run is not None:
            on_run(request, run)
        fault = None
        if run.failure is not None and run.failure.harness_frame is not None:
            if progress is not None:
                progress("run 2: the script without the harness (the harness's own code raised the failure)")
            plain_request = run_request(setup.loop, {}, setup.loop.limits, plain=True)
            plain = setup.runner.run(plain_request)
            if on_run is not None:
                on_run(plain_request, plain)
            fault = harness_fault(run, plain)
    if run.status is RunStatus.HARNESS_ERROR:
        raise BadInput(run.harness_error or "the tracing harness could not start")
    if fault is not None:
        fault = setup.paths.harness_fault(fault)
        return replace(
            error_report(setup.paths.file(setup.script), fault.summary, time.monotonic() - started),
            stop_reason=StopReason.HARNESS_ERROR, harness_fault=fault, command="doctor", root=str(setup.delivery.root),
            environment=run.evidence.environment.to_json() if run.evidence else {},
            notes=("This is a bug in repairbot, not in the script. Please report it with this output.",),
        )
    script, notebook, paths, root = setup.script, setup.notebook, setup.paths, setup.delivery.root
    health = collect_health(
        (run.evidence.health or ()) if run.evidence is not None else (), root, setup.sources.current
    )
    status, reason, attempts = _doctor_outcome(run, paths, setup.loop.patterns)
    evidence = run.evidence
    return RepairReport(
        script=paths.file(script),
        root=str(root),
        status=status,
        stop_reason=reason,
        attempts=attempts,
        diff="",
        files_modified=(),
        run_limits=_run_limits(setup.loop.limits, evidence, paths),
        environment=evidence.environment.to_json() if evidence else {},
        duration_s=time.monotonic() - started,
        scratch=setup.scratch(fix_options),
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
    run: RunResult, paths: ReportPaths, patterns: tuple[Pattern, ...]
) -> tuple[Status, StopReason, tuple[Attempt, ...]]:
    """How doctor's one run ended; a crash becomes a diagnosed attempt (never a fix)."""
    failure = run.failure
    if run.passed or failure is None:
        reason = stop_reason(run, (), ())
        return (Status.ALREADY_PASSING if reason is StopReason.PASSING else Status.GAVE_UP), reason, ()
    ranked = candidates(failure, patterns)
    frame = failure.user_frame
    declines: tuple[Decline, ...] = ()
    if ranked:
        best = ranked[0].pattern
        how = "`repairbot fix` can rewrite it" if best.FIXES else "it is diagnosed, never edited"
        declines = (Decline(
            pattern=best.ID, reason=f"{best.TITLE} (doctor repairs nothing; {how})", diagnosis=best.remedy(),
        ),)
    attempt = Attempt(
        n=1,
        failure=paths.failure(failure),
        failure_file=paths.file(Path(frame.file)) if frame else None,
        failure_line=frame.line if frame else None,
        pattern=ranked[0].pattern.ID if ranked else None,
        evidence={},
        fix=None,
        outcome=Outcome.NOT_RUN,
        declines=declines,
    )
    return Status.GAVE_UP, stop_reason(run, ranked, declines), (attempt,)


def classify(text: str, patterns: tuple[Pattern, ...] | None = None) -> Classification:
    """``repairbot classify``: the failure a log reports and the patterns that recognise it."""
    return classify_log(text, patterns or registry.all_patterns())


def lint(options: LintOptions) -> LintReport:
    """``repairbot lint``: the lint rules' findings over files and folders, fixed on request."""
    return run_lint(options)
