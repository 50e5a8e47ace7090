"""Runs the user's script in a child process under the tracing harness.

The child is ``python bootstrap.py CONFIG.json`` under the user's interpreter, in its own
process group, with a wall-clock timeout after which the whole process tree is killed
(DataLoader workers and grandchildren, even those that left the group). Files the run created
are removed afterwards; files that existed before it were never touched (see bootstrap's
file guard).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

import psutil

from repairbot.evidence import Evidence, evidence_from_json
from repairbot.tracebacks import parse_log
from repairbot.types import Failure, RunStatus

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
RUN_MARKER = "REPAIRBOT_RUN_ID"
OUTPUT_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class Limits:
    """The harness's limits for one run; each can be switched off on its own."""

    batch_size: int = 2
    max_batches: int = 2
    max_steps: int = 20
    force_batch_size: bool = True
    cut_batches: bool = True
    step_budget: bool = True

    def without_batch_forcing(self) -> Limits:
        return replace(self, force_batch_size=False)

    def to_json(self) -> dict[str, object]:
        return {
            "batch_size": self.batch_size,
            "max_batches": self.max_batches,
            "max_steps": self.max_steps,
            "force_batch_size": self.force_batch_size,
            "cut_batches": self.cut_batches,
            "step_budget": self.step_budget,
        }


@dataclass(frozen=True)
class RunRequest:
    script: Path  # absolute
    args: tuple[str, ...] = ()
    cwd: Path | None = None
    python: str = sys.executable
    limits: Limits = field(default_factory=Limits)
    timeout: float = 300.0
    overlay: Mapping[Path, bytes] = field(default_factory=dict)  # candidate sources by path
    env: Mapping[str, str] = field(default_factory=dict)
    guard_files: bool = True
    probes: frozenset[str] = frozenset()  # opt-in probes of the harness, by name


@dataclass(frozen=True)
class RunResult:
    status: RunStatus
    exit_code: int | None
    duration_s: float
    failure: Failure | None
    evidence: Evidence | None
    stdout: str = ""  # tails
    stderr: str = ""
    removed_files: tuple[str, ...] = ()  # files the run created, removed afterwards
    harness_error: str | None = None
    # (optimizer steps, DataLoader batches, module forwards) reached; for a run killed at the
    # timeout, as of its last heartbeat
    progress: tuple[int, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status in (RunStatus.PASSED, RunStatus.STOPPED)


class Runner(Protocol):
    """Runs a script once. The loop depends on this, so tests can replay recorded runs."""

    def run(self, request: RunRequest) -> RunResult: ...


class SubprocessRunner:
    """The real runner: one fresh child process per run."""

    def __init__(self, scratch_root: Path | None = None, keep_scratch: bool = False) -> None:
        self._own_root = scratch_root is None
        self.scratch_root = Path(scratch_root or tempfile.mkdtemp(prefix="repairbot-"))
        self.keep_scratch = keep_scratch
        self.runs = 0

    def close(self) -> None:
        if self._own_root and not self.keep_scratch:
            _remove_tree(self.scratch_root)

    def __enter__(self) -> SubprocessRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, request: RunRequest) -> RunResult:
        self.runs += 1
        scratch = self.scratch_root / f"run-{self.runs}"
        scratch.mkdir(parents=True)
        try:
            return self._run_in(scratch, request)
        finally:
            if not self.keep_scratch:
                _remove_tree(scratch)

    def _run_in(self, scratch: Path, request: RunRequest) -> RunResult:
        evidence_path = scratch / "evidence.json"
        created_log = scratch / "created.log"
        config = {
            "script": str(request.script),
            "args": list(request.args),
            "evidence_path": str(evidence_path),
            "scratch": str(scratch),
            "created_log": str(created_log),
            "progress_path": str(scratch / "progress.json"),
            "limits": request.limits.to_json(),
            "guard_files": request.guard_files,
            "probes": sorted(request.probes),
            "overlay": {
                str(path): base64.b64encode(data).decode("ascii")
                for path, data in request.overlay.items()
            },
        }
        config_path = scratch / "config.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        marker = uuid.uuid4().hex
        env = {
            **os.environ,
            **request.env,
            RUN_MARKER: marker,
            # a run must not leave bytecode caches in the user's tree
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        stdout_path, stderr_path = scratch / "stdout.txt", scratch / "stderr.txt"
        started = time.monotonic()
        timed_out = False
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            try:
                process = subprocess.Popen(
                    [request.python, str(BOOTSTRAP), str(config_path)],
                    cwd=str(request.cwd or Path.cwd()),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=env,
                    start_new_session=True,
                )
            except OSError as error:
                return RunResult(
                    status=RunStatus.HARNESS_ERROR, exit_code=None, duration_s=0.0, failure=None,
                    evidence=None, harness_error=f"cannot start {request.python}: {error.strerror}",
                )
            try:
                with _killing_tree_on_exit(process, marker):
                    try:
                        process.wait(timeout=request.timeout)
                    except subprocess.TimeoutExpired:
                        timed_out = True
            finally:
                removed = remove_created_files(created_log)
        duration = time.monotonic() - started
        stdout = _tail(stdout_path)
        stderr = _tail(stderr_path)
        evidence = _read_evidence(evidence_path)
        progress = evidence.progress if evidence is not None else _read_progress(scratch / "progress.json")
        if timed_out:
            return RunResult(
                status=RunStatus.TIMEOUT, exit_code=None, duration_s=duration, failure=None,
                evidence=evidence, stdout=stdout, stderr=stderr, removed_files=removed, progress=progress,
            )
        code = process.returncode
        status, failure = _judge(code, evidence, stderr)
        return RunResult(
            status=status, exit_code=code, duration_s=duration, failure=failure,
            evidence=evidence, stdout=stdout, stderr=stderr, removed_files=removed, progress=progress,
        )


def _judge(code: int, evidence: Evidence | None, stderr: str) -> tuple[RunStatus, Failure | None]:
    """The status of a finished run and, for a failure, what failed."""
    if evidence is not None and evidence.outcome == "stopped" and code == 0:
        return RunStatus.STOPPED, None
    if code == 0:
        return RunStatus.PASSED, None
    if evidence is not None and evidence.failure is not None:
        return RunStatus.FAILED, evidence.failure
    # No structured record (os._exit, a signal, sys.exit after printing): read what it printed.
    printed = parse_log(stderr)
    if printed is not None:
        return RunStatus.FAILED, printed
    if code < 0:
        name = _signal_name(-code)
        return RunStatus.FAILED, Failure(exc_type="Killed", message=f"the script was killed by {name}")
    return RunStatus.FAILED, Failure(exc_type="SystemExit", message=f"the script exited with code {code}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read_evidence(path: Path) -> Evidence | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        return evidence_from_json(data)
    except (ValueError, TypeError, KeyError):
        return None


def _read_progress(path: Path) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in json.loads(path.read_text(encoding="utf-8"))["progress"])
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def _tail(path: Path, limit: int = OUTPUT_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    if size > limit:
        text = text[text.find("\n") + 1 :]
    return text


@contextlib.contextmanager
def _killing_tree_on_exit(process: subprocess.Popen[bytes], marker: str) -> Iterator[None]:
    """Whatever happens (timeout, Ctrl-C, normal exit), leave no process of the run alive."""
    try:
        yield
    finally:
        kill_process_tree(process, marker)


def kill_process_tree(process: subprocess.Popen[bytes], marker: str) -> None:
    """Kill the run's process group, then any process that left it but carries the run's mark."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait()
    escaped: list[psutil.Process] = []
    for candidate in psutil.process_iter(["pid"]):
        if candidate.pid == os.getpid():
            continue
        try:
            if candidate.environ().get(RUN_MARKER) == marker:
                candidate.kill()
                escaped.append(candidate)
        except (psutil.Error, OSError):
            continue
    # SIGKILL is delivered asynchronously: return only once they are really gone
    psutil.wait_procs(escaped, timeout=5)


def remove_created_files(created_log: Path) -> tuple[str, ...]:
    """Remove what the run created (files first, then the folders it made, if empty)."""
    try:
        lines = created_log.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return ()
    files: list[str] = []
    folders: list[str] = []
    for line in lines:
        kind, _, path = line.partition(" ")
        (folders if kind == "d" else files).append(path)
    removed: list[str] = []
    for path in dict.fromkeys(files):
        if os.path.isfile(path) or os.path.islink(path):
            with contextlib.suppress(OSError):
                os.remove(path)
                removed.append(path)
    for path in sorted(dict.fromkeys(folders), key=len, reverse=True):
        with contextlib.suppress(OSError):
            os.rmdir(path)  # only when empty: never a folder holding anything else
            removed.append(path)
    return tuple(removed)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
