"""Stage A of the GitHub Action, in the user's own CI job after the training command failed.

``install``: creates repairbot's own virtual environment under ``$RUNNER_TEMP`` (the action's
checkout and its dependencies, never torch: repairbot's process does not import it) and
names its interpreter in the step output ``python``. The project's interpreter gets nothing:
repairbot runs the script under it with ``--python``, so it may be any Python 3.8+ with torch.
``analyse``: runs ``repairbot fix --dry-run`` on the failing command, writes the patch and the
reports into ``$RUNNER_TEMP/repairbot/`` (the artifact Stage B consumes), adds the Markdown
report to the job summary, annotates the failing and fixed lines, and sets the step outputs.
Nothing is pushed and no token is used: this stage runs the user's (possibly untrusted) code.

Inputs come as environment variables (``INPUT_COMMAND``, ``INPUT_PYTHON``, ``INPUT_SAFE_ONLY``,
...; ``INPUT_OPTIONS`` maps them to ``repairbot fix``'s options); ``action.yml`` passes them
that way so that no input is ever expanded into a shell command. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run by path, as action.yml does
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from repairbot.action.github import annotation, append_summary, group, set_outputs
from repairbot.launchers import Launcher, LauncherError, split_command
from repairbot.run_config import BY_NAME

ACTION_ROOT = Path(__file__).resolve().parents[2]
REPORT = "report.json"
MARKDOWN = "report.md"
SARIF = "report.sarif"
PATCH = "fix.patch"
VENV = "repairbot-venv"
# A command may start with the interpreter; repairbot runs the script with its own --python.
_PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?(?:\.exe)?$")
_PYTHON_FLAGS = ("-u", "-B", "-O", "-OO", "-s", "-E")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PATTERN_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# What the script's runs must not see: the runner's tokens and the files that set outputs,
# environment and summaries of later steps.
_HIDDEN = frozenset({
    "GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_RESULTS_URL",
    "ACTIONS_CACHE_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
    "GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
})

# `repairbot fix`'s options and the action input that sets each one (tests/test_action.py checks
# this against the CLI: an option must be here or in NOT_INPUTS).
INPUT_OPTIONS = {
    "--python": "python", "--max-attempts": "max-attempts", "--timeout": "timeout",
    "--batch-size": "batch-size", "--max-batches": "max-batches", "--max-steps": "max-steps",
    "--safe-only": "safe-only", "--pattern": "pattern", "--exclude": "exclude",
    "--no-health": "no-health", "--strict-health": "strict-health",
}
# The options the action sets itself or that have no use in CI, and why.
NOT_INPUTS = {
    "--dry-run": "always on: Stage A changes nothing, Stage B publishes",
    "--json": "set by the action (the artifact's report.json)",
    "--markdown": "set by the action (report.md, the job summary)",
    "--sarif": "set by the action (report.sarif)",
    "--branch": "Stage B names the branch",
    "--no-branch": "Stage A never writes into the checkout",
    "--keep-scratch": "the scratch folder is not part of the artifact",
    "-m": "from the command: `python -m MODULE ARGS`",
    "--module": "from the command: `python -m MODULE ARGS`",
    "--verbose": "log detail, not behaviour", "--quiet": "log detail, not behaviour",
    "--color": "the log is never a terminal", "--no-color": "always on",
    "--help": "not an option of a run",
    "--launcher": "from the command: `torchrun OPTIONS SCRIPT ARGS`, `accelerate launch OPTIONS SCRIPT ARGS`",
}


class InputError(Exception):
    """An input of the action that cannot be used; the step fails with this one line."""


@dataclass(frozen=True)
class Inputs:
    script: str | None  # the script, or None for a module
    module: str | None  # `python -m MODULE`
    args: tuple[str, ...]
    python: str  # the project's interpreter, resolved to a path
    max_attempts: int
    timeout: float
    batch_size: int
    max_batches: int
    max_steps: int
    safe_only: bool
    patterns: tuple[str, ...]
    excludes: tuple[str, ...]
    no_health: bool
    strict_health: bool
    launcher: Launcher | None = None  # the command's launcher (torchrun, accelerate launch), if any


def _raw(name: str, default: str) -> str:
    return os.environ.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip() or default


def _number(setting: str) -> Any:
    """The input of a numeric setting of the run configuration (its default where it is empty)."""
    name, default, kind = BY_NAME[setting].input, BY_NAME[setting].input_default, BY_NAME[setting].type
    raw = _raw(name, default)
    try:
        value = kind(raw)
    except ValueError:
        raise InputError(f"input {name}: {raw!r} is not a number") from None
    if value <= 0:
        raise InputError(f"input {name}: must be positive, got {raw!r}")
    return value


def _flag(name: str, default: str) -> bool:
    raw = _raw(name, default).lower()
    if raw not in ("true", "false"):
        raise InputError(f"input {name}: {raw!r} is neither 'true' nor 'false'")
    return raw == "true"


def _ids(name: str) -> tuple[str, ...]:
    """A list of pattern ids, separated by commas, spaces or newlines."""
    ids = tuple(word for word in re.split(r"[\s,]+", _raw(name, "")) if word)
    for pattern in ids:
        if not _PATTERN_ID.match(pattern):
            raise InputError(f"input {name}: {pattern!r} is not a pattern id (see `repairbot patterns`)")
    return ids


def parse_command(command: str) -> tuple[str | None, str | None, tuple[str, ...], Launcher | None]:
    """The failing command as (script, module, arguments, launcher): `[python [flags]] SCRIPT ARGS`,
    `python -m MODULE ARGS` (which repairbot runs as `repairbot fix -m MODULE -- ARGS`), or either
    after a launcher, `torchrun OPTIONS SCRIPT ARGS` or `accelerate launch OPTIONS SCRIPT ARGS`
    (`repairbot fix SCRIPT --launcher 'torchrun OPTIONS' -- ARGS`)."""
    if not command:
        raise InputError("input command: the failing training command is required (e.g. 'train.py --epochs 1')")
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise InputError(f"input command: {error}") from None
    try:
        launched = split_command(words, f"input command: {command!r}")
    except LauncherError as error:
        raise InputError(str(error)) from None
    launcher, runs_modules = None, False  # `-m MODULE` after an interpreter or a launcher only
    if launched is not None:
        (launcher, words), runs_modules = launched, True
    elif words and _PYTHON.match(words[0]):
        words.pop(0)
        while words and words[0] in _PYTHON_FLAGS:
            words.pop(0)
        runs_modules = True
    if runs_modules and words[:1] == ["-m"]:
        if len(words) < 2 or not _MODULE.match(words[1]):
            raise InputError(f"input command: {command!r}: -m needs a module name (e.g. 'python -m pkg.train')")
        return None, words[1], tuple(words[2:]), launcher
    if not words or words[0].startswith("-"):
        raise InputError(f"input command: {command!r} does not name a script or `-m MODULE` (python -c is not supported)")
    return words[0], None, tuple(words[1:]), launcher


def _project_python(name: str) -> str:
    """The project's interpreter as a path (repairbot's own venv comes first on no PATH)."""
    found = shutil.which(name)
    if found is None:
        raise InputError(f"input python: {name!r} is not an interpreter on PATH (set up the project's Python first)")
    return os.path.abspath(found)


def read_inputs() -> Inputs:
    script, module, args, launcher = parse_command(os.environ.get("INPUT_COMMAND", "").strip())
    inputs = Inputs(
        script=script, module=module, args=args, launcher=launcher,
        python=_project_python(_raw("python", "python")),
        max_attempts=_number("max_attempts"),
        timeout=_number("timeout"),
        batch_size=_number("batch_size"),
        max_batches=_number("max_batches"),
        max_steps=_number("max_steps"),
        safe_only=_flag("safe-only", "true"),
        patterns=_ids("pattern"),
        excludes=_ids("exclude"),
        no_health=_flag(BY_NAME["health"].input, BY_NAME["health"].input_default),
        strict_health=_flag("strict-health", "false"),
    )
    if inputs.no_health and inputs.strict_health:
        raise InputError("inputs no-health and strict-health exclude each other")
    return inputs


def output_dir() -> Path:
    return Path(os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()) / "repairbot"


def _script_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _HIDDEN and not k.startswith("INPUT_")}


def fix_command(inputs: Inputs, out: Path) -> list[str]:
    """``repairbot fix`` as this interpreter (repairbot's own environment) runs it."""
    target = ["-m", inputs.module] if inputs.module else [inputs.script or ""]
    command = [
        sys.executable, "-m", "repairbot", "fix", *target, "--dry-run", "--no-color",
        "--json", str(out / REPORT), "--markdown", str(out / MARKDOWN), "--sarif", str(out / SARIF),
        "--python", inputs.python, "--max-attempts", str(inputs.max_attempts), "--timeout", str(inputs.timeout),
        "--batch-size", str(inputs.batch_size), "--max-batches", str(inputs.max_batches),
        "--max-steps", str(inputs.max_steps),
    ]
    command += ["--safe-only"] if inputs.safe_only else []
    command += [f"--pattern={pattern}" for pattern in inputs.patterns]
    command += [f"--exclude={pattern}" for pattern in inputs.excludes]
    command += ["--no-health"] if inputs.no_health else []
    command += ["--strict-health"] if inputs.strict_health else []
    command += ["--launcher", inputs.launcher.text()] if inputs.launcher else []
    return [*command, "--", *inputs.args]


def shown_command(inputs: Inputs) -> str:
    """The failing command as the log shows it (the interpreter's word as `python`)."""
    runner = shlex.split(inputs.launcher.text()) if inputs.launcher else ["python"]
    return shlex.join([*runner, *(["-m", inputs.module] if inputs.module else [inputs.script or ""]), *inputs.args])


def _patterns(report: dict[str, Any]) -> list[str]:
    """Every pattern id the report names: the fixes', then the recognised failures'."""
    ids: list[str] = []
    for attempt in report.get("attempts", []):
        for pattern in ((attempt.get("fix") or {}).get("pattern"), attempt["failure"].get("pattern")):
            if pattern and pattern not in ids:
                ids.append(pattern)
    return ids


def _annotate(report: dict[str, Any]) -> None:
    for attempt in report.get("attempts", []):
        failure = attempt["failure"]
        headline = f"{failure['exc_type']}: {(failure['message'].strip().splitlines() or [''])[0]}"
        fix = attempt.get("fix")
        if fix and attempt["outcome"] != "failed-same":
            annotation("notice", f"{fix['summary']} (the script failed with {headline})",
                       fix["file"], fix["line"], f"repairbot: {fix['pattern']}")
        else:
            annotation("error", headline, failure.get("file"), failure.get("line"),
                       f"repairbot: {failure.get('pattern') or 'no automatic fix'}")


_ARTIFACT_NOTE = (
    "\nThe patch and the reports are in this run's `{artifact}` artifact: apply the patch with "
    "`git apply fix.patch`, or let the repairbot publishing workflow open a pull request with it.\n"
)


def _fail(message: str, stop_reason: str = "") -> None:
    annotation("error", message, title="repairbot")
    append_summary(f"## repairbot: could not run\n\n{message}\n")
    set_outputs({"status": "error", "stop-reason": stop_reason, "patterns": "", "patch-path": "", "report-dir": ""})


def analyse() -> int:
    """Stage A's main step; the exit code fails the step only when repairbot could not report."""
    out = output_dir()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        inputs = read_inputs()
    except InputError as error:
        _fail(str(error), "bad-input")
        return 2
    command = fix_command(inputs, out)
    with group(f"repairbot fix: {shown_command(inputs)}"):
        completed = subprocess.run(command, env=_script_env(), check=False)
    report_path = out / REPORT
    if not report_path.is_file():
        _fail(f"repairbot ended with exit code {completed.returncode} and wrote no report")
        return completed.returncode or 2
    report = json.loads(report_path.read_text(encoding="utf-8"))
    patch = out / PATCH
    if report["diff"]:
        patch.write_text(report["diff"], encoding="utf-8")
    markdown = out / MARKDOWN
    if markdown.is_file():
        note = _ARTIFACT_NOTE.format(artifact=_raw("artifact-name", "repairbot")) if report["diff"] else ""
        append_summary(markdown.read_text(encoding="utf-8") + note)
    _annotate(report)
    set_outputs({
        "status": report["status"],
        "stop-reason": report["stop_reason"],
        "patterns": ",".join(_patterns(report)),
        "patch-path": str(patch) if report["diff"] else "",
        "report-dir": str(out),
    })
    return 2 if report["status"] == "error" else 0


def _dependencies() -> list[str]:
    """The package's dependencies but torch: repairbot's own process never imports it, and the
    script's runs use the project's torch (a second one here could be a multi-GB CUDA build)."""
    project = tomllib.loads((ACTION_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [d for d in project.get("dependencies", []) if re.split(r"[\s<>=!~\[;]", d, maxsplit=1)[0].lower() != "torch"]


def install() -> int:
    """repairbot's own environment, ``$RUNNER_TEMP/repairbot-venv``: the action's checkout and its
    dependencies; an environment made by an earlier step of the job for this checkout is reused."""
    home = Path(os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()) / VENV
    python = home / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    stamp = home / "repairbot-action-root"
    if not (python.is_file() and stamp.is_file() and stamp.read_text(encoding="utf-8") == str(ACTION_ROOT)):
        shutil.rmtree(home, ignore_errors=True)
        venv.create(home, with_pip=True, clear=True)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
        for step in ([*pip, *_dependencies()], [*pip, "--no-deps", str(ACTION_ROOT)]):
            if subprocess.run(step, check=False).returncode != 0:
                print(f"repairbot: installing into {home} failed: {shlex.join(step)}", file=sys.stderr)
                return 1
        stamp.write_text(str(ACTION_ROOT), encoding="utf-8")
    set_outputs({"python": str(python)})
    print(f"repairbot's own environment: {home} (the project's interpreter gets nothing installed)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    commands = {"install": install, "analyse": analyse}
    if len(args) != 1 or args[0] not in commands:
        print(f"usage: stage_a.py {{{','.join(commands)}}}", file=sys.stderr)
        return 2
    return commands[args[0]]()


if __name__ == "__main__":
    sys.exit(main())
