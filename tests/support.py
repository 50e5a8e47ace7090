"""Helpers for the tests: temporary git repositories, snapshots of a user's checkout, running
the real CLI, plain script runs forked from a warm torch server, CUDA-tagged checkpoints made on
the CPU, and discovery of cases and fixtures."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tomllib
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repairbot.trace.runner import SubprocessRunner, WarmRunner

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = ROOT / "patterns"
FIXTURES = ROOT / "fixtures"
PYTHON = sys.executable

# Runs the fixture's make_checkpoint.py with every storage tagged as saved on cuda:0, which
# is how a checkpoint written on a GPU machine looks to torch.load on a CPU-only one.
CUDA_CHECKPOINT = (
    "import runpy, torch; torch.serialization.location_tag = lambda storage: 'cuda:0'; "
    "runpy.run_path('{script}', run_name='__main__')"
)


@functools.cache
def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


@functools.cache
def cuda_available() -> bool:
    """Asked in a child process: importing torch here would slow every test worker."""
    if not torch_available():
        return False
    probe = subprocess.run([PYTHON, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True, text=True, check=False)
    return probe.stdout.strip() == "True"


@functools.cache
def gloo_available() -> bool:
    """torch.distributed built with its gloo backend (CPU ranks under torchrun), asked as cuda_available."""
    if not torch_available():
        return False
    code = "import torch.distributed as d; print(d.is_available() and d.is_gloo_available())"
    probe = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=False)
    return probe.stdout.strip() == "True"


def unmet_requirement(requires: Iterable[str]) -> str | None:
    """Why a test or fixture that needs ``requires`` cannot run here, or None.

    ``requires`` names ``"cuda"`` (a CUDA GPU), ``"gloo"`` (torch.distributed with its gloo backend)
    and import names of optional test extras (``"lightning"``, ``"transformers"``, ``"accelerate"``), asked of the interpreter that runs the
    scripts, in a child process (importing them here would slow every test worker).
    """
    modules = [name for name in requires if name not in ("cuda", "gloo")]
    if "cuda" in requires and not cuda_available():
        return "needs a CUDA GPU"
    if "gloo" in requires and not gloo_available():
        return "needs torch.distributed with the gloo backend"
    if modules:
        missing = _missing_modules(tuple(modules))
        if missing:
            return f"needs {', '.join(missing)} (pip install {' '.join(missing)}; CI installs the test extras)"
    return None


@functools.cache
def _missing_modules(modules: tuple[str, ...]) -> tuple[str, ...]:
    code = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    probe = subprocess.run([PYTHON, "-c", code, *modules], capture_output=True, text=True, check=False)
    return tuple(probe.stdout.split()) if probe.returncode == 0 else modules


def default_sigint() -> None:
    """``preexec_fn`` of a child that a test interrupts with SIGINT: the signal at its default, as
    a terminal gives it. A suite started in the background (``cmd &``) has SIGINT ignored, which
    a child inherits, and Python then installs no KeyboardInterrupt handler: no Ctrl-C could reach it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def git(cwd: Path, *args: str, check: bool = True) -> str:
    # GIT_OPTIONAL_LOCKS=0: `git status` must not refresh and rewrite the index it is reading
    # (a chmod changes a file's ctime; snapshot() compares the index bytes before and after)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0"}
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test User")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(path: Path, message: str = "initial") -> str:
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD").strip()


def _run_checkpoint_maker(repo: Path, argv: list[str], runner: PlainForkServer | None) -> None:
    """``python *argv`` in ``repo``, fresh or (given ``runner``) forked; a failure raises."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if runner is None:
        subprocess.run([PYTHON, *argv], cwd=repo, check=True, capture_output=True, env=env)
        return
    result = runner.run(*argv, cwd=repo, env=env)
    if result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)


def make_cuda_checkpoint(repo: Path, script: str, runner: PlainForkServer | None = None) -> None:
    """Run a project's checkpoint maker so that its files look saved on a GPU (given ``runner``,
    as a fork of its warm server rather than a fresh interpreter)."""
    _run_checkpoint_maker(repo, ["-c", CUDA_CHECKPOINT.format(script=script)], runner)


def make_plain_checkpoint(repo: Path, script: str, runner: PlainForkServer | None = None) -> None:
    """Run a project's checkpoint maker as it is (files saved on the CPU, as on this machine)."""
    _run_checkpoint_maker(repo, [script], runner)


@dataclass(frozen=True)
class CheckoutState:
    """Everything of a user's checkout that repairbot promises not to touch."""

    branch: str
    head: str
    index: str
    status: str
    stash: str
    files: dict[str, str]  # path -> sha256 of bytes, every file outside .git
    mtimes: dict[str, int]


def snapshot(repo: Path) -> CheckoutState:
    files: dict[str, str] = {}
    mtimes: dict[str, int] = {}
    for path in sorted(repo.rglob("*")):
        if ".git" in path.relative_to(repo).parts or not path.is_file():
            continue
        rel = path.relative_to(repo).as_posix()
        files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        mtimes[rel] = path.stat().st_mtime_ns
    index = repo / ".git" / "index"
    return CheckoutState(
        branch=git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip(),
        head=git(repo, "rev-parse", "HEAD").strip(),
        index=hashlib.sha256(index.read_bytes()).hexdigest() if index.exists() else "",
        status=git(repo, "status", "--porcelain=v1", "--untracked-files=all", "--ignored"),
        stash=git(repo, "stash", "list"),
        files=files,
        mtimes=mtimes,
    )


def run_cli(*args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, as a user runs it."""
    return subprocess.run(
        [PYTHON, "-m", "repairbot", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


class SharedWarmRunner(WarmRunner):
    """One warm server (torch imported once) for every ``fix``/``doctor`` that ``run_cli_in_process``
    makes in a test process; a fresh ``repairbot fix`` starts one of its own and pays that import.

    Each command closes its runner when it ends: here that keeps the server up for the next one
    (``shut`` stops it). Every run is still a fork of the untouched server, as in one command.
    """

    def close(self) -> None:
        pass

    def shut(self) -> None:
        super().close()

    @contextlib.contextmanager
    def runs_under(self, scratch_root: Path, keep_scratch: bool = False) -> Iterator[SharedWarmRunner]:
        """This runner for one test, its run folders where ``WarmRunner(scratch_root=...,
        keep_scratch=...)`` puts them (``scratch_root/run-1``, ...): a test of the runs shares the
        server; a test of the server's own start, stop or kill makes a WarmRunner of its own."""
        stopped = self._server is not None and self._server.poll() is not None
        if sys.platform.startswith("linux") and (stopped or not self.mode.startswith("warm")):
            # an earlier test's run stopped the server (runs fell back to fresh ones): a new one
            self.shut()
            self._ready, self.mode = False, "warm (forked runs)"
        saved = self.scratch_root, self.keep_scratch, self.runs, self._own_root
        self.scratch_root, self.keep_scratch, self.runs, self._own_root = scratch_root, keep_scratch, 0, False
        try:
            yield self
        finally:
            self.scratch_root, self.keep_scratch, self.runs, self._own_root = saved


def run_cli_in_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None, runner: SharedWarmRunner | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command line's own code (click's ``main``) in this process, from ``cwd``, with ``env``
    added: the exit code, stdout and stderr ``run_cli`` would give, without a process start
    (~1 CPU-s of imports) and, given ``runner``, without a warm server of its own (~2.5 CPU-s).

    For tests of what a command does and reports; a test of the entry point itself (signals,
    process trees, the interpreter's exit) uses ``run_cli``. An exception escaping the CLI (a
    traceback of ours) is exit code 1 with its traceback at the end of stderr, as in a process.
    """
    from click.testing import CliRunner

    from repairbot import api, cli

    make_runner = api._runner

    def shared(options: api.FixOptions) -> SubprocessRunner:
        if runner is None or options.python != runner.python or options.keep_scratch:
            return make_runner(options)
        return runner

    previous = Path.cwd()
    os.chdir(cwd)
    api._runner = shared  # type: ignore[assignment]
    try:
        result = CliRunner().invoke(cli.main, list(args), env=env, catch_exceptions=True, prog_name="python -m repairbot")
    finally:
        api._runner = make_runner  # type: ignore[assignment]
        os.chdir(previous)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit) and result.exc_info is not None:
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess([PYTHON, "-m", "repairbot", *args], result.exit_code, result.stdout, stderr)


class PlainForkServer:
    """Runs ``python SCRIPT``, ``python -m MODULE`` or ``python -c CODE`` as a fork of one server
    that imported torch and numpy once (tests/plain_fork_server.py), with no harness: a plain run
    without the ~1.3 CPU-s of a fresh interpreter's ``import torch``. tests/test_plain_fork.py
    checks a forked run against a fresh one. Launchers (torchrun) need a fresh process.
    """

    SERVER = Path(__file__).resolve().parent / "plain_fork_server.py"

    def __init__(self) -> None:
        self._server: subprocess.Popen[str] | None = None

    def run(
        self, *argv: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """``python *argv`` in ``cwd`` with ``env`` (the whole environment, ``os.environ``'s when None)."""
        import tempfile

        server = self._start()
        assert server.stdin is not None and server.stdout is not None
        with tempfile.TemporaryDirectory(prefix="plain-run-") as scratch:
            stdout, stderr = Path(scratch, "stdout"), Path(scratch, "stderr")
            run_env = dict(os.environ if env is None else env)
            request = {"argv": list(argv), "cwd": str(cwd), "env": run_env, "stdout": str(stdout), "stderr": str(stderr)}
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            started = self._reply(server)
            if "shadowed" in started:  # the project has a module of a name the server imported
                return subprocess.run(
                    [PYTHON, *argv], cwd=cwd, env=run_env, capture_output=True, text=True,
                    timeout=timeout, check=False,
                )
            pid = started["pid"]
            ready, _, _ = select.select([server.stdout], [], [], timeout)
            if not ready:  # the run hangs: kill it (its own session), as subprocess's timeout would
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                self._reply(server)
                raise subprocess.TimeoutExpired([PYTHON, *argv], timeout)
            code = self._reply(server)["status"]
            return subprocess.CompletedProcess(
                [PYTHON, *argv], code, stdout.read_text(errors="replace"), stderr.read_text(errors="replace"),
            )

    def _reply(self, server: subprocess.Popen[str]) -> dict[str, Any]:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line:
            self.shut()
            raise AssertionError("the plain fork server died")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _start(self) -> subprocess.Popen[str]:
        if self._server is None or self._server.poll() is not None:
            self._server = subprocess.Popen(
                [PYTHON, str(self.SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            assert self._server.stdout is not None
            if json.loads(self._server.stdout.readline() or "{}").get("ready") is not True:
                self.shut()
                raise AssertionError("the plain fork server did not start")
        return self._server

    def shut(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        for pipe in (server.stdin, server.stdout):
            if pipe is not None:
                pipe.close()


def load_toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class PatternCase:
    pattern_id: str
    name: str
    folder: Path
    config: dict[str, Any]

    @property
    def before(self) -> Path:
        return self.folder / "before"

    @property
    def after(self) -> Path:
        return self.folder / "after"

    @property
    def expects_fix(self) -> bool:
        return self.expect == "fix"

    @property
    def expect(self) -> str:
        """fix, decline, or diagnose (a diagnose-only pattern's decline with a remedy)."""
        return str(self.config.get("expect", "fix"))

    @property
    def unclaimed(self) -> bool:
        """A look-alike the pattern must not even recognise (``unclaimed = true``): `classify`
        and `doctor` give a pattern's remedy from its match alone, and a diagnose-only pattern
        that ranks first makes the run diagnosed, so such a pattern refuses in ``match``."""
        return bool(self.config.get("unclaimed", False))

    @property
    def id(self) -> str:
        return f"{self.pattern_id}/{self.name}"


def pattern_cases() -> list[PatternCase]:
    cases = []
    for folder in sorted(PATTERNS.glob("*/cases/*")):
        if not (folder / "case.toml").is_file():
            continue
        pattern_id = folder.parent.parent.name.replace("_", "-")
        cases.append(PatternCase(pattern_id, folder.name, folder, load_toml(folder / "case.toml")))
    return cases


@dataclass(frozen=True)
class Fixture:
    name: str
    folder: Path
    config: dict[str, Any]


def fixtures() -> list[Fixture]:
    return [
        Fixture(folder.name, folder, load_toml(folder / "case.toml"))
        for folder in sorted(FIXTURES.iterdir())
        if (folder / "case.toml").is_file()
    ]


def copy_project(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("case.toml", "__pycache__"))
    return target


def split_location(location: str) -> tuple[str, int]:
    """``"model.py:12"`` -> ("model.py", 12)."""
    match = re.fullmatch(r"(.+):(\d+)", location)
    if match is None:
        raise ValueError(f"not a file:line location: {location!r}")
    return match.group(1), int(match.group(2))


# pyflakes messages that mean a fix broke the code's names (an undefined name is a NameError
# at run time; a redefinition means a fix bound a name the file already uses for something else)
_NAME_FLAKES = ("UndefinedName", "UndefinedLocal", "UndefinedExport", "RedefinedWhileUnused", "ImportShadowedByLoopVar")


def name_flakes(data: bytes | str) -> Counter[tuple[str, tuple[object, ...]]]:
    """The name problems pyflakes finds in a module, as (kind, arguments), lines aside."""
    import ast
    import warnings

    from pyflakes.checker import Checker  # type: ignore[import-untyped]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(data)
    messages = Checker(tree, filename="<lint>").messages
    # the names only: the line numbers in some messages move with any inserted line
    return Counter(
        (type(m).__name__, tuple(a for a in m.message_args if isinstance(a, str)))
        for m in messages if type(m).__name__ in _NAME_FLAKES
    )


def broken_by_fix(before: bytes | str, after: bytes | str) -> list[str]:
    """What a fix broke: [] when ``after`` compiles and has no name problem ``before`` lacked."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(after, "<fixed>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            return [f"does not compile: {error}"]
    # by name: one more use of a name the code already left undefined is not a new problem
    new = set(name_flakes(after)) - set(name_flakes(before))
    # a redefinition pyflakes reports only because the fix removed the last use of the first
    # binding (two `import functorch`, the uses renamed to torch.func) binds nothing new: an
    # import left unused, not a broken name
    before_bindings, after_bindings = _bindings(before), _bindings(after)
    new = {(kind, args) for kind, args in new if kind != "RedefinedWhileUnused"
           or any(after_bindings[name] > before_bindings[name] for name in args if isinstance(name, str))}
    return [f"{kind} {args}" for kind, args in sorted(new, key=str)]


def _bindings(data: bytes | str) -> Counter[str]:
    """How many times each name is bound by an import, a def or a class."""
    import ast

    found: Counter[str] = Counter()
    for node in ast.walk(ast.parse(data)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] += 1
    return found


def catalogue_generator() -> Any:
    """scripts/gen_docs.py as a module (scripts/ is not a package: loaded by path, once)."""
    if "gen_docs" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gen_docs", Path(__file__).resolve().parent.parent / "scripts" / "gen_docs.py")
        assert spec is not None and spec.loader is not None
        sys.modules["gen_docs"] = module = importlib.util.module_from_spec(spec)  # its dataclasses look it up
        spec.loader.exec_module(module)
    return sys.modules["gen_docs"]


def prepare_fixture(fixture: Fixture, repo: Path, runner: PlainForkServer | None = None) -> Path:
    """A fixture as a committed git repository at ``repo``, with the checkpoints it asks for
    (made by forks of ``runner`` where given, else by fresh interpreters)."""
    init_repo(repo)
    copy_project(fixture.folder, repo)
    if fixture.config.get("checkpoint"):
        make_cuda_checkpoint(repo, fixture.config["checkpoint"], runner)
    if fixture.config.get("plain_checkpoint"):
        make_plain_checkpoint(repo, fixture.config["plain_checkpoint"], runner)
    commit_all(repo)
    return repo
