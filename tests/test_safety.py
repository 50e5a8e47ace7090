"""Attacks on what repairbot promises, through the real command line (needs torch).

Every ``repairbot`` started here goes through ``Attack.run``, which checks after it exits what
every command must leave behind: no process (each carries a tag in its environment, so even a
grandchild that left the process group, or a forked run, is found after its parents are gone),
no ``repairbot-*`` folder in its private temp dir. The matrices: bad input (one clear line on
stderr, exit 2, the checkout byte-identical), scripts that misbehave (a report that says what
happened, a contract exit code, the checkout byte-identical), and SIGINT/SIGTERM at several
points of a repair (exit 130/143, no half-made branch, nothing left running or on disk).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from tests.support import PYTHON, commit_all, default_sigint, git, init_repo, snapshot

pytestmark = pytest.mark.torch

TAG = "REPAIRBOT_SAFETY_TAG"

# A crash that linear-in-features fixes in one verified attempt (two runs, no confirmation:
# no DataLoader, so the harness forces no batch size). SAFETY_PAUSE makes a run wait at a
# chosen point, after creating SAFETY_MARK so that the test knows it got there.
FIXABLE = """
    import os
    import time

    import torch
    import torch.nn as nn


    def pause(point):
        if os.environ.get("SAFETY_PAUSE") == point:
            open(os.environ["SAFETY_MARK"], "w").close()
            time.sleep(600)


    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 4))
    pause("first")
    out = model(torch.randn(2, 3, 5))
    pause("verify")
    print("trained", tuple(out.shape))
"""
FIXED_LINE = b"model = nn.Sequential(nn.Flatten(), nn.Linear(15, 4))"
# Put in place of pause("first"): writes through Python (guarded) and through a shell (not).
REWRITES = """with open(__file__, "w") as handle:
    handle.write("print('clobbered')\\n")
os.remove("README.md")
with open("best.pt", "wb") as handle:
    handle.write(b"2-batch junk")"""
SHELL_REWRITE = """import subprocess
subprocess.run(["sh", "-c", "echo '# edited meanwhile' >> train.py"], check=True)"""

# Stands in for git on PATH: at the command named by SAFETY_GIT_PAUSE, it marks and waits
# before running the real git until the test has sent its signal (SAFETY_MARK.sent), so that the
# signal lands while that git command runs, however slowly a loaded machine gets there.
GIT_WRAPPER = """#!/bin/sh
for arg in "$@"; do
    if [ "$arg" = "$SAFETY_GIT_PAUSE" ]; then
        : > "$SAFETY_MARK"
        while [ ! -e "$SAFETY_MARK.sent" ]; do sleep 0.05; done
        break
    fi
done
exec {git} "$@"
"""


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    peak_rss: int = 0  # bytes, of the repairbot process itself

    @property
    def error_lines(self) -> list[str]:
        return self.stderr.strip().splitlines()


@dataclass
class Attack:
    """A user's repository and the means to run repairbot on it and check what it left."""

    root: Path
    repo: Path
    tmp: Path  # repairbot's TMPDIR
    env: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    def write(self, name: str, text: str, *, commit: bool = True) -> Path:
        path = self.repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text))
        if commit:
            commit_all(self.repo, f"add {name}")
        return path

    def start(self, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
        tag = uuid.uuid4().hex
        process = subprocess.Popen(
            [PYTHON, "-m", "repairbot", *args],
            cwd=self.repo,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": str(self.tmp), TAG: tag, **self.env, **(env or {})},
            preexec_fn=default_sigint,  # the interrupt tests send it SIGINT
        )
        return process, tag

    def finish(self, process: subprocess.Popen[str], tag: str, timeout: float = 240) -> Outcome:
        peak = [0]
        done = threading.Event()

        def watch() -> None:  # the parent's own memory, sampled while it works
            try:
                me = psutil.Process(process.pid)
                while not done.is_set():
                    peak[0] = max(peak[0], me.memory_info().rss)
                    time.sleep(0.02)
            except psutil.Error:
                pass

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            done.set()
            watcher.join()
        self.check_hygiene(tag)
        return Outcome(process.returncode, stdout, stderr, peak[0])

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 240) -> Outcome:
        process, tag = self.start(*args, env=env)
        return self.finish(process, tag, timeout)

    def check_hygiene(self, tag: str) -> None:
        """Nothing of that command is left: no process, no scratch folder.

        A killed process may take a moment to go (a second at most); one still running after
        that was abandoned.
        """
        deadline = time.monotonic() + 1
        while True:
            left = tagged_processes(tag)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert not left, f"processes left behind: {left}"
        leftovers = [p.name for p in self.tmp.iterdir() if p.name.startswith("repairbot-")]
        assert not leftovers, f"temp folders left behind: {leftovers}"


def tagged_processes(tag: str) -> list[str]:
    """Live processes (not zombies) whose environment carries the tag."""
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if process.environ().get(TAG) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{process.pid} {' '.join(process.cmdline())[:200]}")
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture
def attack(tmp_path: Path) -> Attack:
    repo = init_repo(tmp_path / "repo")
    (repo / "README.md").write_text("a project\n")
    (repo / "best.pt").write_bytes(b"precious checkpoint")
    commit_all(repo)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return Attack(root=tmp_path, repo=repo, tmp=tmp)


def assert_one_error_line(outcome: Outcome, *phrases: str) -> None:
    assert outcome.code == 2, outcome.stdout + outcome.stderr
    lines = outcome.error_lines
    assert len(lines) == 1 and lines[0].startswith("repairbot: error: "), outcome.stderr
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def report(attack: Attack) -> dict[str, object]:
    data: dict[str, object] = json.loads((attack.root / "report.json").read_text())
    return data


# --------------------------------------------------------------------------------------------
# Bad input: one line on stderr, exit 2, the checkout byte-identical


def test_non_utf8_file_without_a_cookie_is_refused(attack: Attack) -> None:
    (attack.repo / "train.py").write_bytes(b"import torch\n# r\xe9sum\xe9 of the run\nprint('hi')\n")
    commit_all(attack.repo)
    before = snapshot(attack.repo)
    outcome = attack.run("fix", "train.py")
    assert_one_error_line(outcome, "train.py:2: byte 0xe9 is not valid utf-8", "coding cookie")
    assert snapshot(attack.repo) == before


def test_script_outside_the_repository_is_refused_in_branch_mode(attack: Attack) -> None:
    outside = attack.root / "elsewhere" / "train.py"
    outside.parent.mkdir()
    outside.write_text("print('hi')\n")
    before = snapshot(attack.repo)
    outcome = attack.run("fix", str(outside))
    assert_one_error_line(outcome, "not inside a git repository", "--no-branch")
    assert snapshot(attack.repo) == before
    assert outside.read_text() == "print('hi')\n"


def test_bare_repository_is_refused(attack: Attack) -> None:
    bare = attack.root / "bare.git"
    git(attack.root, "init", "-q", "--bare", str(bare))
    (bare / "train.py").write_text("print('hi')\n")
    before = sorted((p.relative_to(bare).as_posix(), p.read_bytes()) for p in bare.rglob("*") if p.is_file())
    outcome = attack.run("fix", str(bare / "train.py"))
    assert_one_error_line(outcome, "bare git repository", "--no-branch")
    assert sorted((p.relative_to(bare).as_posix(), p.read_bytes()) for p in bare.rglob("*") if p.is_file()) == before


@pytest.mark.parametrize("what", ["file", "folder"])
def test_read_only_target_is_refused_and_nothing_is_written(attack: Attack, what: str) -> None:
    """--no-branch cannot write a verified fix into a read-only file or folder: one line, exit 2."""
    script = attack.write("src/train.py", FIXABLE)
    target = script if what == "file" else script.parent
    mode = target.stat().st_mode
    target.chmod(stat.S_IMODE(mode) & ~0o222)
    try:
        before = snapshot(attack.repo)
        outcome = attack.run("fix", "src/train.py", "--no-branch", "-q")
        assert_one_error_line(outcome, f"the {what} is read-only; nothing was written")
        assert snapshot(attack.repo) == before
        assert not [p for p in script.parent.iterdir() if p.name.endswith(".repairbot")]
    finally:
        target.chmod(mode)


# --------------------------------------------------------------------------------------------
# Scripts that misbehave: the script's failure, reported; the checkout byte-identical


def run_script(attack: Attack, body: str, *args: str, name: str = "train.py") -> tuple[Outcome, dict[str, object]]:
    attack.write(name, body)
    before = snapshot(attack.repo)
    outcome = attack.run("fix", name, "-q", "--json", str(attack.root / "report.json"), *args)
    assert snapshot(attack.repo) == before
    assert "Traceback" not in outcome.stderr, outcome.stderr
    return outcome, report(attack)


def failure_of(data: dict[str, object]) -> dict[str, object]:
    attempts = data["attempts"]
    assert isinstance(attempts, list) and attempts, data
    failure: dict[str, object] = attempts[-1]["failure"]
    return failure


def assert_gave_up(outcome: Outcome, data: dict[str, object], reason: str) -> None:
    """Exit 1, the one status line on stdout (-q), nothing on stderr, the stop reason."""
    assert outcome.code == 1, outcome.stdout + outcome.stderr
    assert outcome.stderr == ""
    lines = outcome.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Status: FAILED | Stop reason: {reason} "), outcome.stdout
    assert (data["status"], data["stop_reason"]) == ("gave-up", reason)


def test_script_that_needs_arguments_it_was_not_given(attack: Attack) -> None:
    """argparse's usage error is the script failing, not bad input to repairbot: gave-up,
    with argparse's own line and how to pass arguments."""
    outcome, data = run_script(attack, """
        import argparse
        parser = argparse.ArgumentParser()
        parser.add_argument("--data", required=True)
        parser.add_argument("--batch-size", type=int, default=32)
        args = parser.parse_args()
    """, "--dry-run")
    assert_gave_up(outcome, data, "no-user-frame")
    message = failure_of(data)["message"]
    assert isinstance(message, str)
    assert message.startswith("the script exited with code 2: train.py: error: the following arguments are required: --data")
    assert "after `--`" in message


def test_script_that_reads_stdin_sees_it_empty(attack: Attack) -> None:
    outcome, data = run_script(attack, """
        import sys
        if not sys.stdin.read():
            sys.exit("no input on stdin")
    """)
    assert_gave_up(outcome, data, "no-user-frame")
    assert failure_of(data)["message"] == "the script exited with code 1: no input on stdin"


def test_script_that_prints_100_mb_is_not_held_in_memory(attack: Attack) -> None:
    outcome, data = run_script(attack, """
        import sys
        line = "x" * 1023 + "\\n"
        for _ in range(100 * 1024):
            sys.stdout.write(line)
        raise RuntimeError("after 100 MB of output")
    """)
    assert_gave_up(outcome, data, "no-pattern")
    assert failure_of(data)["message"] == "after 100 MB of output"
    # repairbot keeps a tail of the output, never all of it (its own footprint is ~100 MB)
    assert 0 < outcome.peak_rss < 150 * 2**20, outcome.peak_rss


def test_script_that_hangs_is_killed_at_the_timeout(attack: Attack) -> None:
    started = time.monotonic()
    outcome, data = run_script(attack, """
        import time
        time.sleep(600)
    """, "--timeout", "3")
    assert_gave_up(outcome, data, "timeout")
    assert time.monotonic() - started < 60


def test_script_whose_dataloader_workers_hang(attack: Attack) -> None:
    outcome, data = run_script(attack, """
        import time
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Stuck(Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, index):
                time.sleep(600)
                return torch.zeros(2)

        if __name__ == "__main__":
            for batch in DataLoader(Stuck(), batch_size=2, num_workers=2):
                pass
    """, "--timeout", "6")
    assert_gave_up(outcome, data, "timeout")


def test_script_whose_children_outlive_it(attack: Attack) -> None:
    """A daemon that left the process group and a plain child: both killed (the hygiene check
    finds them by the tag they inherited)."""
    outcome, data = run_script(attack, """
        import subprocess, sys
        sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
        subprocess.Popen(sleep, start_new_session=True)
        subprocess.Popen(sleep)
        print("leaving my children behind")
    """, "--no-branch")
    assert outcome.code == 0 and data["status"] == "already-passing", outcome.stdout + outcome.stderr


def test_script_that_calls_os_exit(attack: Attack) -> None:
    outcome, data = run_script(attack, """
        import os, sys
        sys.stderr.write("giving up early\\n")
        os._exit(3)
    """)
    assert_gave_up(outcome, data, "no-user-frame")
    assert failure_of(data)["message"] == "the script exited with code 3: giving up early"


def test_script_that_rewrites_and_deletes_files_cannot_corrupt_the_result(attack: Attack) -> None:
    """It overwrites its own source, deletes and rewrites tracked files, all through Python:
    no pre-existing file changes, and the commit holds exactly the verified fix."""
    body = dedent(FIXABLE).replace('pause("first")', REWRITES)
    script = attack.write("train.py", body)
    original = script.read_bytes()
    before = snapshot(attack.repo)
    outcome = attack.run("fix", "train.py", "--json", str(attack.root / "report.json"))
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    assert snapshot(attack.repo) == before
    data = report(attack)
    commit = data["commit"]
    assert isinstance(commit, str)
    committed = subprocess.run(["git", "show", f"{commit}:train.py"], cwd=attack.repo, capture_output=True, check=True).stdout
    assert committed == original.replace(b"nn.Linear(12, 4)", b"nn.Linear(15, 4)")
    assert git(attack.repo, "diff", "--name-only", f"{commit}^", commit).split() == ["train.py"]


def test_script_that_rewrites_its_source_behind_the_guard_is_caught(attack: Attack) -> None:
    """A subprocess is not guarded: its write lands, but no commit of a fix of the old bytes is
    made over it; one line says so."""
    body = dedent(FIXABLE).replace('pause("first")', SHELL_REWRITE)
    attack.write("train.py", body)
    outcome = attack.run("fix", "train.py", "-q")
    assert_one_error_line(outcome, "train.py")
    assert "is modified and the script imports it" in outcome.stderr or "changed on disk" in outcome.stderr
    assert git(attack.repo, "branch", "--list", "repairbot/*") == ""


# --------------------------------------------------------------------------------------------
# Interrupts: exit 130/143, no half-made branch, no process, temp folder or file left


INTERRUPTS = [
    # (where, signal, runner)
    ("first", signal.SIGINT, "warm"),
    ("first", signal.SIGTERM, "warm"),
    ("first", signal.SIGINT, "fresh"),
    ("first", signal.SIGTERM, "fresh"),
    ("verify", signal.SIGTERM, "warm"),
    ("verify", signal.SIGINT, "fresh"),
    ("commit-tree", signal.SIGTERM, "warm"),
    ("commit-tree", signal.SIGINT, "fresh"),
    ("update-ref", signal.SIGINT, "warm"),
]


def wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"repairbot ended before the point: {process.communicate()}"
        assert time.monotonic() < deadline, "the point was never reached"
        time.sleep(0.05)


@pytest.mark.parametrize(("where", "signum", "runner"), INTERRUPTS, ids=[f"{w}-{s.name}-{r}" for w, s, r in INTERRUPTS])
def test_interrupt(attack: Attack, where: str, signum: signal.Signals, runner: str) -> None:
    attack.write("train.py", FIXABLE)
    before = snapshot(attack.repo)
    mark = attack.root / "mark"
    env = {"SAFETY_MARK": str(mark), "REPAIRBOT_FRESH_RUNS": "1" if runner == "fresh" else "0"}
    if where in ("first", "verify"):
        env["SAFETY_PAUSE"] = where
    else:
        bin_dir = attack.root / "bin"
        bin_dir.mkdir()
        wrapper = bin_dir / "git"
        wrapper.write_text(GIT_WRAPPER.format(git=shutil.which("git")))
        wrapper.chmod(0o755)
        env |= {"SAFETY_GIT_PAUSE": where, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    process, tag = attack.start("fix", "train.py", env=env)
    wait_for(mark, process)
    process.send_signal(signum)
    Path(f"{mark}.sent").touch()  # a git command held by the wrapper goes on
    outcome = attack.finish(process, tag, timeout=60)

    assert outcome.code == 128 + signum, outcome.stdout + outcome.stderr
    word = "interrupted" if signum == signal.SIGINT else "terminated"
    assert outcome.error_lines[-1] == f"repairbot: {word}", outcome.stderr
    assert "Traceback" not in outcome.stderr
    assert snapshot(attack.repo) == before  # branch, HEAD, index, files, stash, untracked
    assert not [p for p in attack.repo.rglob("*.lock")], "a git lock file was left"
    branches = git(attack.repo, "branch", "--list", "repairbot/*").split()
    if where == "update-ref":
        # the ref was being written: it exists whole, on a complete commit of the fix
        (branch,) = branches
        assert git(attack.repo, "rev-parse", f"{branch}^").strip() == before.head
        assert git(attack.repo, "diff", "--name-only", before.head, branch).split() == ["train.py"]
        fixed = subprocess.run(["git", "show", f"{branch}:train.py"], cwd=attack.repo, capture_output=True, check=True).stdout
        assert FIXED_LINE in fixed
        git(attack.repo, "fsck", "--no-dangling")
    else:
        assert branches == [], "a branch was made by an interrupted repair"
    assert not mark.exists() or where not in ("first", "verify"), "a file the run created was left"


# --------------------------------------------------------------------------------------------
# Resource hygiene of the other commands (every fix above is checked the same way)


def test_fix_in_each_mode_leaves_nothing_behind(attack: Attack) -> None:
    attack.write("train.py", FIXABLE)
    before = snapshot(attack.repo)
    dry = attack.run("fix", "train.py", "--dry-run")
    assert dry.code == 0 and FIXED_LINE.decode() in dry.stdout, dry.stdout + dry.stderr
    assert snapshot(attack.repo) == before
    branch = attack.run("fix", "train.py", "--branch", "fixed")
    assert branch.code == 0 and "Branch: fixed" in branch.stdout, branch.stdout + branch.stderr
    assert snapshot(attack.repo) == before
    in_place = attack.run("fix", "train.py", "--no-branch")
    assert in_place.code == 0, in_place.stdout + in_place.stderr
    assert FIXED_LINE in (attack.repo / "train.py").read_bytes()
    assert git(attack.repo, "status", "--porcelain") == " M train.py\n"


def test_classify_and_patterns_leave_nothing_behind(attack: Attack) -> None:
    log = attack.root / "log.txt"
    log.write_text('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\nKeyError: 1\n')
    assert attack.run("classify", str(log)).code == 1
    assert attack.run("patterns", "--json").code == 0
