"""``repairbot.fixDryRun``: ``repairbot fix --dry-run`` on a script from the editor, and the fix it
would make as a workspace edit for review.

The real command line runs as a child process (``fix --dry-run --json -``), in its own session
and with a mark in its environment, from a thread of its own: the server goes on answering
meanwhile. At the time limit it gets SIGTERM, which ``repairbot fix`` answers by stopping its
runs and exiting; whatever is left of its process tree after a grace period is killed, by
session and by mark (``kill_process_tree``). Nothing on disk changes: the fixed text is the
report's diff applied to the files as they are, and the editor applies it to its buffers once
the user accepts the edit.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repairbot.output.diff import PatchError, apply_patch, decode, parse_patch, split_lines
from repairbot.output.report import STOP_EXPLANATIONS
from repairbot.server.history import REPORT_SCHEMA
from repairbot.trace.runner import kill_process_tree
from repairbot.types import StopReason

COMMAND = "repairbot.fixDryRun"
ACTION_KIND = "source.repairbot.fixDryRun"
DEFAULT_TIMEOUT_S = 600.0
TERM_GRACE_S = 10.0  # between SIGTERM and SIGKILL: `repairbot fix` stops its runs and exits
MARK = "REPAIRBOT_DRY_RUN_ID"  # in the environment of every process of a dry run
# calls that make a module's top level training code (a script without a main guard)
_TRAINING_CALLS = frozenset({"backward", "step", "fit"})


@dataclass(frozen=True)
class DryRun:
    """What a dry run found: the one line to show, and the fixed text of each file its fix
    would change (none: no fix, and ``message`` says why)."""

    message: str
    status: str  # the report's status; "error" where there is no report
    stop_reason: str | None = None
    fixed: Mapping[Path, str] = field(default_factory=dict)


class DryRunner:
    """Runs one dry run at a time; ``stop`` ends the one running (the server is going away)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: tuple[subprocess.Popen[bytes], str] | None = None

    @property
    def running(self) -> bool:
        return self._running is not None

    def run(self, script: Path, python: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> DryRun:
        """``repairbot fix --dry-run`` on ``script`` (an absolute path), in the script's folder,
        for ``timeout_s`` seconds at the most (``python``: the script's interpreter)."""
        command = [
            sys.executable, "-m", "repairbot", "fix", "--dry-run", "--json", "-", "--quiet", "--no-color",
            *(["--python", python] if python else []), script.name,
        ]
        mark = uuid.uuid4().hex
        with self._lock:
            if self._running is not None:
                return DryRun("repairbot fix --dry-run is already running; wait for its result", "error")
            try:
                process = subprocess.Popen(
                    command, cwd=script.parent, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    env={**os.environ, MARK: mark}, start_new_session=True,
                )
            except OSError as error:
                return DryRun(f"repairbot fix --dry-run could not start: {error.strerror}", "error")
            self._running = process, mark
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _terminate(process, mark)
            return DryRun(f"repairbot fix --dry-run did not finish within {timeout_s:g} s and was stopped", "error")
        finally:
            with self._lock:
                self._running = None
        return read(out, err, process.returncode, script)

    def stop(self) -> None:
        """Kill the running dry run's process tree at once, if one runs."""
        with self._lock:
            running = self._running
        if running is not None:
            kill_process_tree(running[0].pid, running[1], variable=MARK)


def _terminate(process: subprocess.Popen[bytes], mark: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=TERM_GRACE_S)
    kill_process_tree(process.pid, mark, process, variable=MARK)
    process.communicate()


def read(out: bytes, err: bytes, code: int | None, script: Path) -> DryRun:
    """The dry run of ``script`` from the JSON report it printed (and its stderr, where none)."""
    try:
        report = json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        report = None
    if not isinstance(report, dict) or report.get("schema") != REPORT_SCHEMA:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        return DryRun(f"repairbot fix --dry-run failed: {lines[-1] if lines else f'exit status {code}'}", "error")
    status, reason = str(report.get("status")), report.get("stop_reason")
    if report.get("error"):
        return DryRun(f"repairbot fix --dry-run: {report['error']}", status, reason)
    attempts = [a for a in report.get("attempts") or () if isinstance(a, dict)]
    if status != "fixed" or not report.get("diff"):
        return DryRun(f"repairbot fix --dry-run found no fix: {_why(reason, attempts)}", status, reason)
    root = _root(script, str(report.get("script") or script.name))
    fixed: dict[Path, str] = {}
    try:
        for patch in parse_patch(str(report["diff"])):
            path = root / patch.path
            fixed[path] = "".join(apply_patch(split_lines(decode(path.read_bytes())), patch))
    except (OSError, PatchError, SyntaxError, UnicodeDecodeError) as error:
        return DryRun(f"repairbot fix --dry-run: its fix no longer applies to the files on disk ({error}); run it again",
                      status, reason)
    done = [a for a in attempts if a.get("outcome") == "passed" and isinstance(a.get("fix"), dict)]
    errors = "; ".join(f"{_failure(a)} -> {a['fix'].get('summary', '')}" for a in done)
    count = f"{len(done)} error{'s' if len(done) != 1 else ''}"
    return DryRun(
        f"repairbot fix --dry-run fixed {count} (status {status}): {errors}. "
        "The fix is offered as an edit to review; nothing on disk changed.",
        status, reason, fixed,
    )


def _failure(attempt: Mapping[str, Any]) -> str:
    failure = attempt.get("failure") or {}
    return f"{failure.get('exc_type', 'Error')}: {failure.get('message', '')}"


def _why(reason: Any, attempts: list[dict[str, Any]]) -> str:
    """The stop reason, explained, and the last failure with its diagnosis where there is one."""
    try:
        why = f"{reason} ({STOP_EXPLANATIONS[StopReason(reason)]})"
    except ValueError:
        why = str(reason)
    if attempts:
        why += f"; {_failure(attempts[-1])}"
        diagnosis = next((d for d in attempts[-1].get("declined") or () if d.get("diagnosis")), None)
        if diagnosis is not None:
            why += f"; {diagnosis['reason']} {diagnosis['diagnosis']}"
    return why


def _root(script: Path, shown: str) -> Path:
    """The folder the report's paths are relative to: the script's path less the report's name
    for it (``sub/train.py`` in the repository's top folder)."""
    parts = Path(shown).parts
    if parts and script.parts[-len(parts):] == parts:
        return Path(*script.parts[:-len(parts)])
    return script.parent


def runs_as_script(text: str) -> bool:
    """Whether a module is worth a dry run (the code action is offered): it has an
    ``if __name__ == "__main__":`` block, or training code at its top level (a call of
    ``.backward()``, ``.step()`` or ``.fit()`` outside any function or class)."""
    try:
        tree = ast.parse(text.removeprefix("\ufeff"))
    except (SyntaxError, ValueError):
        return False
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            continue
        if isinstance(statement, ast.If) and _is_main_guard(statement.test):
            return True
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TRAINING_CALLS:
                return True
    return False


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
        and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )
