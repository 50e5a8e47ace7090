"""Runs the user's script in a child process under the tracing harness.

The child is ``python bootstrap.py CONFIG.json`` (which loads the harness package, harness/)
under the user's interpreter (under a launcher, ``python -m torch.distributed.run OPTIONS
bootstrap.py CONFIG.json``: the harness in every rank), in its own process group, with a wall-clock timeout after which the whole process tree is killed
(DataLoader workers and grandchildren, even those that left the group). Files the run created
are removed afterwards; files that existed before it were never touched (see the harness's
file guard).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import psutil

from repairbot.evidence import Evidence, evidence_from_json
from repairbot.launchers import Launcher
from repairbot.run_config import DEFAULTS, SETTINGS, RunConfig
from repairbot.tracebacks import parse_log
from repairbot.types import BadInput, Failure, Frame, RunStatus

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
RUN_MARKER = "REPAIRBOT_RUN_ID"
OUTPUT_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class Limits:
    """The harness's limits for one run; each can be switched off on its own. The settings come
    from the run configuration (repairbot/run_config.py: those marked ``harness``)."""

    batch_size: int = DEFAULTS.batch_size
    max_batches: int = DEFAULTS.max_batches
    max_steps: int = DEFAULTS.max_steps
    force_batch_size: bool = True
    cut_batches: bool = True
    step_budget: bool = True
    health: bool = DEFAULTS.health  # the run-time health checks (off with --no-health)

    @classmethod
    def of(cls, config: RunConfig) -> Limits:
        """The limits a run configuration sets."""
        return cls(**{s.name: getattr(config, s.name) for s in SETTINGS if s.harness})

    def without_batch_forcing(self) -> Limits:
        return replace(self, force_batch_size=False)

    def to_json(self) -> dict[str, object]:
        """Every limit, always: the harness takes each one from its config, it has no defaults."""
        return asdict(self)


@dataclass(frozen=True)
class RunRequest:
    script: Path  # absolute
    args: tuple[str, ...] = ()
    cwd: Path | None = None
    python: str = sys.executable
    limits: Limits = field(default_factory=Limits)
    timeout: float = DEFAULTS.timeout
    overlay: Mapping[Path, bytes] = field(default_factory=dict)  # candidate sources by path
    env: Mapping[str, str] = field(default_factory=dict)
    guard_files: bool = True
    probes: frozenset[str] = frozenset()  # opt-in probes of the harness, by name
    # the patterns' probe.py files the harness loads (None: every pattern's that has one)
    probe_files: tuple[Path, ...] | None = None
    module: str | None = None  # run as `python -m module` (``script`` is then the module's file)
    # the script as `python SCRIPT` runs it: no limit, no probe, only the file guard (the check
    # of a failure the harness's own code raised)
    plain: bool = False
    launcher: Launcher | None = None  # torchrun / accelerate launch: the script runs in every rank

    def command(self) -> str:
        """The run as the user would type it (the harness runs it this way, in ``cwd``)."""
        target = ["-m", self.module] if self.module else [str(self.script)]
        launcher = ["-m", self.launcher.module, *self.launcher.options] if self.launcher else []
        return shlex.join([self.python, *launcher, *target, *self.args])

    def limits_text(self) -> str:
        if self.plain:
            return f"none: the script as it is, without the harness (only the file guard), timeout {self.timeout:g} s"
        limits = self.limits
        batch = (f"batch size forced down to {limits.batch_size}" if limits.force_batch_size
                 else "the script's own batch size")
        passes = (f"{limits.max_batches} batches per DataLoader pass (+ the real last batch)"
                  if limits.cut_batches else "whole DataLoader passes")
        steps = f"loops left after {limits.max_steps} optimizer steps" if limits.step_budget else "no step budget"
        return f"{batch}, {passes}, {steps}, timeout {self.timeout:g} s"


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
    launch_note: str = ""  # under a launcher: what repairbot added to its options, and why

    @property
    def passed(self) -> bool:
        """The script ran to its end (every loop shortened) and exited 0 with no failure.

        A run the harness had to end in the middle (STOPPED: the step budget spent in a loop
        outside the user's code, which it cannot leave) is not a pass.
        """
        return self.status is RunStatus.PASSED

    def output_tail(self, lines: int = 20) -> str:
        """The last lines of what the script printed, stdout then stderr ('' when it printed nothing)."""
        parts = []
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            kept = text.rstrip().splitlines()[-lines:]
            if kept:
                parts.append(f"--- {name} (last {len(kept)} lines) ---\n" + "\n".join(kept))
        return "\n".join(parts)


def describe_run(request: RunRequest, result: RunResult, lines: int = 20) -> str:
    """What ``-v`` shows of one run: its command, limits, duration, outcome and output tail."""
    outcome = result.status.value
    if result.failure is not None:
        outcome += f": {result.failure.headline}"
    if result.evidence is not None:
        for left in result.evidence.limits.left_loops:
            outcome += f"\n  left the {left.kind} loop at {left.loop} after {left.steps} steps"
    note = f"  launcher: {result.launch_note}\n" if result.launch_note else ""
    text = (
        f"  command: {request.command()}  (in {request.cwd or Path.cwd()})\n{note}"
        f"  limits: {request.limits_text()}\n"
        f"  took {result.duration_s:.2f} s; {outcome}"
    )
    tail = result.output_tail(lines)
    return text + ("\n" + "\n".join("  " + line for line in tail.splitlines()) if tail else "\n  (no output)")


class Runner(Protocol):
    """Runs a script once. The loop depends on this, so tests can replay recorded runs."""

    def run(self, request: RunRequest) -> RunResult: ...


@dataclass(frozen=True)
class _Launch:
    """What one run is started with, whichever way it is started."""

    request: RunRequest
    argv: list[str]  # the command that starts the run
    config: Path
    env: dict[str, str]
    stdout: Path
    stderr: Path
    marker: str


def _probe_files(request: RunRequest) -> tuple[Path, ...]:
    if request.probe_files is not None:
        return request.probe_files
    from repairbot.registry import probe_files  # the catalogue imports the runner's users

    return probe_files()


class HarnessError(Exception):
    """The harness could not start or supervise a run (reported, never a traceback of ours)."""


class SubprocessRunner:
    """Runs each script in a fresh child process: ``python bootstrap.py CONFIG``."""

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
            "probe_files": [str(path) for path in _probe_files(request)],
            "module": request.module,
            "plain": request.plain,
            "ranked": request.launcher is not None,  # each rank keeps its records in scratch/rank-R/
            "overlay": {
                str(path): base64.b64encode(data).decode("ascii")
                for path, data in request.overlay.items()
            },
        }
        config_path = scratch / "config.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        marker = uuid.uuid4().hex
        argv, note = launch_argv(request, config_path)
        launch = _Launch(
            request=request,
            argv=argv,
            config=config_path,
            env={
                **os.environ,
                **request.env,
                RUN_MARKER: marker,
                # a run must not leave bytecode caches in the user's tree
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            stdout=scratch / "stdout.txt",
            stderr=scratch / "stderr.txt",
            marker=marker,
        )
        started = time.monotonic()
        try:
            code, timed_out = self._execute(launch)
        except HarnessError as error:
            return RunResult(
                status=RunStatus.HARNESS_ERROR, exit_code=None, duration_s=0.0, failure=None,
                evidence=None, harness_error=str(error),
            )
        finally:
            if request.launcher is None:
                removed = remove_created_files(created_log)
            else:  # every rank's
                removed = tuple(p for log in sorted(scratch.glob("rank-*/created.log")) for p in remove_created_files(log))
        duration = time.monotonic() - started
        stdout = _tail(launch.stdout)
        stderr = _tail(launch.stderr)
        if request.launcher is None:
            evidence = _read_evidence(evidence_path)
            progress_path = scratch / "progress.json"
        else:
            evidence = first_failed_rank([e for e in map(_read_evidence, scratch.glob("rank-*/evidence.json")) if e])
            progress_path = scratch / "rank-0" / "progress.json"
        progress = evidence.progress if evidence is not None else _read_progress(progress_path)
        if timed_out or code is None:
            return RunResult(
                status=RunStatus.TIMEOUT, exit_code=None, duration_s=duration, failure=None,
                evidence=evidence, stdout=stdout, stderr=stderr, removed_files=removed, progress=progress,
                launch_note=note,
            )
        if request.launcher is not None and code != 0 and not any(scratch.glob("rank-*")):
            raise BadInput(_launcher_refusal(request.launcher, code, stderr))
        status, failure = _judge(code, evidence, stderr, bool(request.args), _probe_files(request))
        if failure is not None and evidence is not None and evidence.rank is not None:
            failure = replace(failure, rank=evidence.rank.rank)
        return RunResult(
            status=status, exit_code=code, duration_s=duration, failure=failure,
            evidence=evidence, stdout=stdout, stderr=stderr, removed_files=removed, progress=progress,
            launch_note=note,
        )

    def _execute(self, launch: _Launch) -> tuple[int | None, bool]:
        """Start the run in a fresh process and wait for it; (exit code, timed out)."""
        request = launch.request
        with open(launch.stdout, "wb") as out, open(launch.stderr, "wb") as err:
            try:
                process = subprocess.Popen(
                    launch.argv,
                    cwd=str(request.cwd or Path.cwd()),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=launch.env,
                    start_new_session=True,
                )
            except OSError as error:
                raise HarnessError(f"cannot start {request.python}: {error.strerror}") from None
            with _killing_tree_on_exit(process.pid, launch.marker, process):
                try:
                    process.wait(timeout=request.timeout)
                except subprocess.TimeoutExpired:
                    return None, True
        return process.returncode, False


class WarmRunner(SubprocessRunner):
    """Runs each script as a fork of one warm server that imported torch once.

    A fresh Python process pays the torch import (and the compiler stack the first optimizer
    step imports) before the script does anything: seconds per run. The server pays it once;
    each run is then a fork that becomes the run (its own session, stdio, working directory,
    environment, ``__main__`` and ``sys.argv``) and behaves as a fresh process would. Where
    forking is not safe (not Linux, another interpreter than the server's) or the server cannot
    be had, runs start fresh; ``mode`` says which, for ``-v``.
    """

    READY_TIMEOUT = 180.0

    def __init__(
        self, python: str, scratch_root: Path | None = None, keep_scratch: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scratch_root, keep_scratch)
        self.python = python
        self.env = dict(env or {})
        self._server: subprocess.Popen[bytes] | None = None
        self._lines: _LineReader | None = None
        self._ready = False
        self.mode = "warm (forked runs)" if sys.platform.startswith("linux") else "fresh (no safe fork here)"

    def start(self) -> None:
        """Start the server now (its torch import overlaps whatever the caller does next)."""
        if self._server is not None or not sys.platform.startswith("linux"):
            return
        try:
            self._server = subprocess.Popen(
                [self.python, str(BOOTSTRAP), "--serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **self.env, "PYTHONDONTWRITEBYTECODE": "1"},
                start_new_session=True,
            )
        except OSError:
            self._fall_back("the warm server could not start")
            return
        assert self._server.stdout is not None
        self._lines = _LineReader(self._server.stdout.fileno())

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(OSError):
                assert server.stdin is not None
                server.stdin.close()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            if server.stdout is not None:
                server.stdout.close()
        super().close()

    def _fall_back(self, why: str) -> None:
        self.mode = f"fresh ({why})"
        self._server = None

    def _ensure_ready(self) -> bool:
        if self._server is None:
            self.start()
        if self._server is None or self._lines is None:
            return False
        if not self._ready:
            reply = self._lines.read(self.READY_TIMEOUT)
            if reply is None or not reply.get("ready"):
                self.close_server("the warm server did not come up")
                return False
            self._ready = True
        return True

    def close_server(self, why: str) -> None:
        server = self._server
        if server is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        self._fall_back(why)

    def _execute(self, launch: _Launch) -> tuple[int | None, bool]:
        # a launcher starts its ranks itself: a fresh process, never a fork of the server
        if launch.request.launcher is not None or launch.request.python != self.python or not self._ensure_ready():
            return super()._execute(launch)
        assert self._server is not None and self._server.stdin is not None and self._lines is not None
        request = launch.request
        message = {
            "config": str(launch.config),
            "cwd": str(request.cwd or Path.cwd()),
            "env": launch.env,
            "stdout": str(launch.stdout),
            "stderr": str(launch.stderr),
        }
        try:
            self._server.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self._server.stdin.flush()
        except OSError:
            self.close_server("the warm server went away")
            return super()._execute(launch)
        started = self._lines.read(30.0)
        if started is None or "pid" not in started:
            self.close_server("the warm server stopped answering")
            return super()._execute(launch)
        pid = int(started["pid"])
        with _killing_tree_on_exit(pid, launch.marker):
            ended = self._lines.read(request.timeout)
        if ended is None:
            # killed at the timeout: the server reaps the run and says so
            self._lines.read(10.0)
            return None, True
        return int(ended["status"]), False


def launch_argv(request: RunRequest, config: Path) -> tuple[list[str], str]:
    """The command that starts the run, and what repairbot added to the launcher's options."""
    launcher = request.launcher
    if launcher is None:
        return [request.python, str(BOOTSTRAP), str(config)], ""
    words, added = launcher.command()
    note = f"rendezvous port {added[-1]} (free; the launcher's options set none): {shlex.join(added)}" if added else ""
    return [request.python, *words, str(BOOTSTRAP), str(config)], note


def _launcher_refusal(launcher: Launcher, code: int, stderr: str) -> str:
    """Why a launcher that started no rank refused (its options, most likely): its last words."""
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    return f"--launcher {launcher.text()!r}: the launcher exited with code {code} before starting any rank" + (
        f": {last[:300]}" if last else ""
    )


def first_failed_rank(evidence: list[Evidence]) -> Evidence | None:
    """The evidence to report of a launched run's ranks: the rank that failed first (the others'
    failures often follow from it: a peer gone, a collective broken), else a rank the harness
    stopped (the run did not pass), else the lowest rank."""
    failed = [e for e in evidence if e.failure is not None]
    if failed:
        return min(failed, key=lambda e: (
            e.rank.failed_at if e.rank and e.rank.failed_at is not None else float("inf"), e.rank.rank if e.rank else 0,
        ))
    stopped = [e for e in evidence if e.outcome == "stopped"]
    return min(stopped or evidence, key=lambda e: e.rank.rank if e.rank else 0, default=None)


class _LineReader:
    """JSON lines from a pipe, each with a deadline (select, so a hung run never blocks us)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def read(self, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            value = json.loads(line)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def _judge(
    code: int, evidence: Evidence | None, stderr: str, had_args: bool = False, probe_files: tuple[Path, ...] = (),
) -> tuple[RunStatus, Failure | None]:
    """The status of a finished run and, for a failure, what failed (``probe_files``: the
    patterns' probes the harness loaded, its own files too)."""
    if evidence is not None and evidence.outcome == "stopped" and code == 0:
        return RunStatus.STOPPED, None
    if code == 0:
        return RunStatus.PASSED, None
    if evidence is not None and evidence.failure is not None:
        return RunStatus.FAILED, evidence.failure
    # No structured record (os._exit, a signal, sys.exit after printing): read what it printed.
    printed = parse_log(stderr)
    if printed is not None:
        # a pattern's probe.py is no library by its path, but it is the harness's, never the user's
        printed = replace(printed, frames=tuple(
            replace(frame, user=False) if frame.user and is_harness_path(frame.file, probe_files) else frame
            for frame in printed.frames
        ))
        return RunStatus.FAILED, replace(printed, harness_frame=printed_harness_frame(printed, probe_files))
    if code < 0:
        name = _signal_name(-code)
        return RunStatus.FAILED, Failure(exc_type="Killed", message=f"the script was killed by {name}")
    return RunStatus.FAILED, Failure(exc_type="SystemExit", message=_exit_message(code, stderr, had_args))


def printed_harness_frame(failure: Failure, probe_files: tuple[Path, ...] = ()) -> Frame | None:
    """For a traceback the harness printed without its record (it failed before the script ran,
    or while writing the record): the innermost of its own frames below the script's deepest
    one, when there is one (the failure is then the harness's)."""
    frames = failure.frames
    deepest_user = max((i for i, frame in enumerate(frames) if frame.user), default=-1)
    return next(
        (frame for frame in reversed(frames[deepest_user + 1:]) if is_harness_path(frame.file, probe_files)), None
    )


def is_harness_path(path: str, probe_files: tuple[Path, ...] = ()) -> bool:
    """A file of repairbot's tracing harness: the launcher, the harness package, one of the
    patterns' probes it loaded."""
    if not path or path.startswith("<"):
        return False
    resolved = Path(path).resolve()
    return (
        resolved == BOOTSTRAP.resolve()
        or resolved.is_relative_to(BOOTSTRAP.resolve().parent / "harness")
        or any(resolved == probe.resolve() for probe in probe_files)
    )


def _exit_message(code: int, stderr: str, had_args: bool = False) -> str:
    """Why a script exited non-zero without a traceback, in its own words where it gave any.

    ``sys.exit("message")``, argparse's usage error (exit 2) and the like print one last line on
    stderr: the report shows it, so "exited with code 2" never stands alone. A usage error is
    the script refusing the arguments it was given, not bad input to repairbot; the hint on
    where they go only when it was given none (those it got did reach it).
    """
    message = f"the script exited with code {code}"
    last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
    if last:
        message += f": {last[:500]}"
    if code == 2 and not had_args and re.search(r"^usage: ", stderr, re.MULTILINE):
        message += " (give the script its arguments after `--`: repairbot fix SCRIPT -- ARGS)"
    return message


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
def _killing_tree_on_exit(
    pid: int, marker: str, process: subprocess.Popen[bytes] | None = None
) -> Iterator[None]:
    """Whatever happens (timeout, Ctrl-C, normal exit), leave no process of the run alive."""
    try:
        yield
    finally:
        kill_process_tree(pid, marker, process)


def kill_process_tree(
    pid: int, marker: str, process: subprocess.Popen[bytes] | None = None, variable: str = RUN_MARKER
) -> None:
    """Kill the run's process group (the run leads its own session), then any process that
    left it but carries the run's mark in its environment (``variable=marker``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if process is not None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()
    escaped: list[psutil.Process] = []
    for candidate in psutil.process_iter(["pid"]):
        if candidate.pid == os.getpid():
            continue
        try:
            if candidate.environ().get(variable) == marker:
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
