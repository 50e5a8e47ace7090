"""Stage A of the GitHub Action, in the user's own CI job after the training command failed.

``install``: installs repairbot (the action's own checkout) into the interpreter that runs
this script, keeping the torch it already has. ``analyse``: runs ``repairbot fix --dry-run``
on the failing command, writes the patch and the reports into ``$RUNNER_TEMP/repairbot/``
(the artifact Stage B consumes), adds the Markdown report to the job summary, annotates the
failing and fixed lines, and sets the step outputs. Nothing is pushed and no token is used:
this stage runs the user's (possibly untrusted) code.

Inputs come as environment variables (``INPUT_COMMAND``, ``INPUT_MAX_ATTEMPTS``,
``INPUT_TIMEOUT``, ``INPUT_BATCH_SIZE``); ``action.yml`` passes them that way so that no input
is ever expanded into a shell command. Standard library only: ``install`` runs before
repairbot's dependencies are there.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run by path, as action.yml does
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from repairbot.action.github import annotation, append_summary, group, set_outputs

ACTION_ROOT = Path(__file__).resolve().parents[2]
REPORT = "report.json"
MARKDOWN = "report.md"
SARIF = "report.sarif"
PATCH = "fix.patch"
# A command may start with the interpreter; repairbot runs the script with its own --python.
_PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?(?:\.exe)?$")
# What the script's runs must not see: the runner's tokens and the files that set outputs,
# environment and summaries of later steps.
_HIDDEN = frozenset({
    "GITHUB_TOKEN", "GH_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_RESULTS_URL",
    "ACTIONS_CACHE_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL",
    "GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
})


class InputError(Exception):
    """An input of the action that cannot be used; the step fails with this one line."""


@dataclass(frozen=True)
class Inputs:
    script: str
    args: tuple[str, ...]
    max_attempts: int
    timeout: float
    batch_size: int


def _number(name: str, default: str, kind: type[int] | type[float]) -> Any:
    raw = os.environ.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip() or default
    try:
        value = kind(raw)
    except ValueError:
        raise InputError(f"input {name}: {raw!r} is not a number") from None
    if value <= 0:
        raise InputError(f"input {name}: must be positive, got {raw!r}")
    return value


def read_inputs() -> Inputs:
    command = os.environ.get("INPUT_COMMAND", "").strip()
    if not command:
        raise InputError("input command: the failing training command is required (e.g. 'train.py --epochs 1')")
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise InputError(f"input command: {error}") from None
    while words and (_PYTHON.match(words[0]) or words[0] in ("-u", "-B")):
        words.pop(0)
    if not words or words[0].startswith("-"):
        raise InputError(f"input command: {command!r} does not name a script (python -m and -c are not supported)")
    return Inputs(
        script=words[0],
        args=tuple(words[1:]),
        max_attempts=_number("max-attempts", "3", int),
        timeout=_number("timeout", "300", float),
        batch_size=_number("batch-size", "2", int),
    )


def output_dir() -> Path:
    return Path(os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()) / "repairbot"


def _script_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _HIDDEN and not k.startswith("INPUT_")}


def fix_command(inputs: Inputs, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "repairbot", "fix", inputs.script, "--dry-run", "--no-color",
        "--json", str(out / REPORT), "--markdown", str(out / MARKDOWN), "--sarif", str(out / SARIF),
        "--max-attempts", str(inputs.max_attempts), "--timeout", str(inputs.timeout),
        "--batch-size", str(inputs.batch_size), "--python", sys.executable,
        "--", *inputs.args,
    ]


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
    "\nThe patch and the reports are in this run's `repairbot` artifact: apply the patch with "
    "`git apply fix.patch`, or let the repairbot publishing workflow open a pull request with it.\n"
)


def analyse() -> int:
    """Stage A's main step; the exit code fails the step only when repairbot could not report."""
    out = output_dir()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        inputs = read_inputs()
    except InputError as error:
        annotation("error", str(error), title="repairbot")
        set_outputs({"status": "error", "stop-reason": "bad-input", "patterns": "", "patch-path": "",
                     "report-dir": ""})
        return 2
    command = fix_command(inputs, out)
    with group(f"repairbot fix {shlex.join([inputs.script, *inputs.args])}"):
        completed = subprocess.run(command, env=_script_env(), check=False)
    report_path = out / REPORT
    if not report_path.is_file():
        annotation("error", f"repairbot ended with exit code {completed.returncode} and wrote no report",
                   title="repairbot")
        set_outputs({"status": "error", "stop-reason": "", "patterns": "", "patch-path": "", "report-dir": ""})
        return completed.returncode or 2
    report = json.loads(report_path.read_text(encoding="utf-8"))
    patch = out / PATCH
    if report["diff"]:
        patch.write_text(report["diff"], encoding="utf-8")
    markdown = out / MARKDOWN
    if markdown.is_file():
        append_summary(markdown.read_text(encoding="utf-8") + (_ARTIFACT_NOTE if report["diff"] else ""))
    _annotate(report)
    set_outputs({
        "status": report["status"],
        "stop-reason": report["stop_reason"],
        "patterns": ",".join(_patterns(report)),
        "patch-path": str(patch) if report["diff"] else "",
        "report-dir": str(out),
    })
    return 2 if report["status"] == "error" else 0


def install() -> int:
    """Install repairbot from the action's checkout into this interpreter; the torch already
    installed stays (a plain install could replace a CUDA build with another one)."""
    requirements = [str(ACTION_ROOT)]
    with contextlib.suppress(metadata.PackageNotFoundError):
        requirements.append(f"torch=={metadata.version('torch')}")
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", *requirements]
    return subprocess.run(command, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    commands = {"install": install, "analyse": analyse}
    if len(args) != 1 or args[0] not in commands:
        print(f"usage: stage_a.py {{{','.join(commands)}}}", file=sys.stderr)
        return 2
    return commands[args[0]]()


if __name__ == "__main__":
    sys.exit(main())
