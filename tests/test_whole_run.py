"""The whole script runs under the harness: loops left at the step budget, kept iterators,
the real last batch, a consistent file-system view, `-m` modules, `-v` and the output tail
(needs torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repairbot.trace.runner import Limits, RunRequest, RunResult, SubprocessRunner, WarmRunner
from repairbot.types import RunStatus
from tests.support import SharedWarmRunner, commit_all, init_repo, run_cli, run_cli_in_process

pytestmark = pytest.mark.torch


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture(params=["fresh", "warm"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(tmp_path: Path, kind: str, script: Path, **request: object) -> RunResult:
    runner: SubprocessRunner = (
        WarmRunner(python=sys.executable, scratch_root=tmp_path / "scratch") if kind == "warm"
        else SubprocessRunner(scratch_root=tmp_path / "scratch")
    )
    with runner:
        request.setdefault("cwd", script.parent)
        return runner.run(RunRequest(script=script, **request))  # type: ignore[arg-type]


STEP = "opt.zero_grad(); model(torch.randn(2, 3)).sum().backward(); opt.step()"
PRELUDE = f"""
    import torch
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    def step():
        {STEP}
"""


def left(result: RunResult) -> list[tuple[int, str, int]]:
    return [
        (int((item.loop or "").rpartition(":")[2]), item.kind or "", item.steps or 0)
        for item in result.evidence.limits.left_loops
    ]


def test_loops_of_every_kind_are_left_and_the_script_goes_on(tmp_path: Path, kind: str) -> None:
    script = write(tmp_path / "train.py", PRELUDE + """
    def epoch_of(n):
        for i in range(n):                  # 8: a loop in a function called from the loop
            step()
        return "epoch"
    for epoch in range(1000):               # 11
        print(epoch_of(50), epoch)          # the rest of the epoch body runs once
    print("after the epoch loop")
    count = 0
    while True:                             # 15: while True with its own break condition
        step()
        count += 1
        if count >= 100000:
            break
    print("after while", count)
    for a in range(3):                      # 21: nested loops in one frame
        for b in range(1000):               # 22
            with torch.no_grad():
                pass
            opt.step()
    print("grad mode", torch.is_grad_enabled())
    for k in range(100000):                 # 27: the script's own break comes first
        step()
        if k == 2:
            break
    for k in range(100000):                 # 31: a new loop: its own budget
        step()
    print("done")
    """)
    result = run(tmp_path, kind, script, limits=Limits(max_steps=5))
    assert result.status is RunStatus.PASSED, result.stderr
    out = result.stdout
    assert "epoch 0" in out and "epoch 1" not in out and "after the epoch loop" in out
    assert "after while 5" in out
    assert "grad mode True" in out  # left between iterations: the with block was closed
    assert out.rstrip().endswith("done")
    assert left(result) == [(8, "for", 5), (11, "for", 5), (15, "while", 5), (21, "for", 5), (22, "for", 5), (31, "for", 5)]
    assert result.evidence.limits.free_steps == 5 + 5 + 5 + 3 + 5


def test_kept_iterator_get_batch_and_while_loops_count(tmp_path: Path, kind: str) -> None:
    script = write(tmp_path / "train.py", """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(torch.randn(100, 3), torch.randn(100, 1)), batch_size=10)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    def train_step(x, y):
        opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
    it = iter(loader)
    for step in range(100000):              # a kept iterator, made again when a pass ends
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        train_step(x, y)
    print("kept iterator done", step)
    data = torch.randn(1000, 4)
    def get_batch():
        ix = torch.randint(0, 990, (8,))
        return data[ix, :3], data[ix, 3:]
    n = 0
    while n < 100000:                       # nanoGPT style
        train_step(*get_batch())
        n += 1
    print("get_batch done", n)
    for epoch in range(3):                  # a DataLoader pass: cut, not counted
        for x, y in loader:
            train_step(x, y)
    print("passes done")
    """)
    result = run(tmp_path, kind, script, limits=Limits(max_steps=4))
    assert result.status is RunStatus.PASSED, result.stderr
    # the check runs at the top of the next iteration: a for loop has taken its next item then
    assert "kept iterator done 4" in result.stdout and "get_batch done 4" in result.stdout
    assert "passes done" in result.stdout
    limits = result.evidence.limits
    assert limits.free_steps == 8 and limits.steps == 8 + 3 * 2


def test_a_library_loop_the_harness_cannot_leave_is_not_a_pass(tmp_path: Path, kind: str) -> None:
    write(tmp_path / "lib" / "site-packages" / "trainer.py", PRELUDE.replace("\n    ", "\n") + """
def fit():
    for i in range(100000):
        step()
""")
    script = write(tmp_path / "train.py", """
    import sys
    sys.path.insert(0, "lib/site-packages")
    import trainer
    trainer.fit()
    print("after fit")
    """)
    result = run(tmp_path, kind, script, limits=Limits(max_steps=3))
    assert result.status is RunStatus.STOPPED and not result.passed
    assert "after fit" not in result.stdout


def test_each_pass_ends_with_the_real_runs_last_batch(tmp_path: Path, kind: str) -> None:
    script = write(tmp_path / "train.py", """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(torch.arange(70).float())
    for name, loader in (("shuffled", DataLoader(data, batch_size=32, shuffle=True)),
                         ("ordered", DataLoader(data, batch_size=32)),
                         ("dropped", DataLoader(data, batch_size=32, drop_last=True)),
                         ("even", DataLoader(TensorDataset(torch.arange(64).float()), batch_size=32))):
        print(name, len(loader), [b[0].tolist() for b in loader])
    """)
    result = run(tmp_path, kind, script)
    assert result.status is RunStatus.PASSED, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert lines["ordered"] == "ordered 3 [[0.0, 1.0], [2.0, 3.0], [64.0, 65.0, 66.0, 67.0, 68.0, 69.0]]"
    assert lines["shuffled"].startswith("shuffled 3 ") and lines["shuffled"].count("[") == 4
    assert lines["dropped"] == "dropped 2 [[0.0, 1.0], [2.0, 3.0]]"
    assert lines["even"] == "even 2 [[0.0, 1.0], [2.0, 3.0]]"
    # the script's own batch size (the confirmation run): the last batch is the real one too
    own = run(tmp_path, kind, script, limits=Limits(force_batch_size=False))
    ordered = next(line for line in own.stdout.splitlines() if line.startswith("ordered"))
    assert ordered.startswith("ordered 3 [[0.0,") and ordered.endswith("[64.0, 65.0, 66.0, 67.0, 68.0, 69.0]]")
    assert [e.size for e in own.evidence.limits.last_batches] == [6, 6]


FILE_SCRIPT = """
    import csv, glob, os, shutil
    from pathlib import Path
    for epoch in range(3, 6):  # keep the last 2 checkpoints
        Path(f"ckpt/e{epoch}.pt").write_bytes(b"new" * epoch)
        for old in sorted(glob.glob("ckpt/*.pt"))[:-2]:
            os.remove(old)
    print("listdir", sorted(os.listdir("ckpt")))
    print("glob", sorted(p.name for p in Path("ckpt").glob("*.pt")), sorted(p.name for p in Path("ckpt").iterdir()))
    print("scandir", sorted((e.name, e.stat().st_size) for e in os.scandir("ckpt")))
    print("exists", os.path.exists("ckpt/e1.pt"), os.path.isfile("ckpt/e1.pt"), Path("ckpt/e1.pt").exists())
    try:
        os.remove("ckpt/e1.pt")
    except FileNotFoundError:
        print("second remove raises")
    try:
        open("ckpt/e1.pt", "rb")
    except FileNotFoundError:
        print("open raises")
    Path("ckpt/e5.pt").write_bytes(b"x" * 100)
    print("size", os.path.getsize("ckpt/e5.pt"), os.stat("ckpt/e5.pt").st_size, Path("ckpt/e5.pt").stat().st_size)
    print("mtime moved", os.path.getmtime("ckpt/e5.pt") > os.path.getmtime("train.py") - 1)
    os.replace("train.log", "train.log.1")  # rotation
    with open("train.log", "a") as handle:
        handle.write("fresh\\n")
    print("logs", open("train.log").read().strip(), open("train.log.1").read().strip())
    with open("results.csv", "a", newline="") as handle:
        csv.writer(handle).writerow([2, 0.5])
    print("rows", [row for row in csv.reader(open("results.csv"))])
    shutil.rmtree("outputs")
    print("outputs gone", os.path.exists("outputs"), os.path.isdir("outputs"))
    os.makedirs("outputs", exist_ok=True)
    print("outputs again", os.listdir("outputs"))
    Path("outputs/new.txt").write_text("n")
    print("outputs now", sorted(os.listdir("outputs")), sorted(glob.glob("outputs/*")))
    os.rmdir("ckpt") if not os.listdir("ckpt") else print("rmdir refused: not empty")
"""


def test_the_script_sees_what_it_did_and_the_disk_stays_as_it_was(tmp_path: Path, kind: str) -> None:
    project = tmp_path / "project"
    for name, data in {
        "ckpt/e1.pt": "old1", "ckpt/e2.pt": "old2", "train.log": "old log\n",
        "results.csv": "epoch,loss\n1,0.9\n", "outputs/old.txt": "old output",
    }.items():
        write(project / name, data)
    script = write(project / "train.py", FILE_SCRIPT)
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = run(tmp_path, kind, script)
    assert result.status is RunStatus.PASSED, result.stderr
    out = result.stdout
    assert "listdir ['e4.pt', 'e5.pt']" in out
    assert "glob ['e4.pt', 'e5.pt'] ['e4.pt', 'e5.pt']" in out
    assert "scandir [('e4.pt', 12), ('e5.pt', 15)]" in out
    assert "exists False False False" in out
    assert "second remove raises" in out and "open raises" in out
    assert "size 100 100 100" in out and "mtime moved True" in out
    assert "logs fresh old log" in out
    assert "rows [['epoch', 'loss'], ['1', '0.9'], ['2', '0.5']]" in out
    assert "outputs gone False False" in out and "outputs again []" in out
    assert "outputs now ['new.txt'] ['outputs/new.txt']" in out
    assert "rmdir refused: not empty" in out
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    assert after == before  # every file as it was, and nothing the run created is left


def test_module_runs_as_python_m_would(tmp_path: Path, kind: str) -> None:
    write(tmp_path / "src" / "pkg" / "__init__.py", "")
    write(tmp_path / "src" / "pkg" / "helpers.py", "VALUE = 41\n")
    module = write(tmp_path / "src" / "pkg" / "train.py", f"""
    import sys
    from .helpers import VALUE
    {PRELUDE.strip()}
    for i in range(1000):
        step()
    print(__name__, __package__, VALUE + 1, sys.argv[1:], sys.path[0])
    """.replace("\n    def step", "\n    def step"))
    result = run(
        tmp_path, kind, module, module="pkg.train", args=("--flag",), env={"PYTHONPATH": str(tmp_path / "src")},
        cwd=tmp_path,
    )
    assert result.status is RunStatus.PASSED, result.stderr
    assert f"__main__ pkg 42 ['--flag'] {tmp_path}" in result.stdout
    assert left(result) == [(8, "for", 20)]


def test_cli_m_verbose_and_the_output_tail(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    repo = init_repo(tmp_path / "repo")
    write(repo / "src" / "pkg" / "__init__.py", "")
    write(repo / "src" / "pkg" / "train.py", """
    print("loading the data from data/train.csv")
    from pkg import missing_module
    """)
    commit_all(repo)
    result = run_cli_in_process("fix", "-m", "pkg.train", "--dry-run", "-v", "--json", str(tmp_path / "r.json"),
                                "--markdown", str(tmp_path / "r.md"), "--", "--epochs", "1", cwd=repo, runner=shared_runner)
    assert result.returncode == 1, result.stderr
    # -v: the command, the limits, the duration and the output of each run
    assert f"command: {sys.executable} -m pkg.train --epochs 1" in result.stderr
    assert "limits: batch size forced down to 2" in result.stderr and " s; failed" in result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["stop_reason"] == "environment"
    assert "PYTHONPATH=src" in " ".join(report["notes"]) and "pip install -e ." in " ".join(report["notes"])
    assert "No module named" in report["output_tail"]
    assert "Output of the last run:" in result.stdout and "No module named" in result.stdout
    assert "### Output of the last run" in (tmp_path / "r.md").read_text()
    env = {**os.environ, "PYTHONPATH": "src"}
    plain = subprocess.run([sys.executable, "-m", "pkg.train"], cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert "loading the data" in plain.stdout  # the same module, importable with src on the path


def test_cli_refuses_no_script_and_an_unknown_module(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    write(repo / "README.md", "a project\n")
    commit_all(repo)
    result = run_cli("fix", "--dry-run", cwd=repo)
    assert result.returncode == 2 and "give a SCRIPT" in result.stderr
    result = run_cli("fix", "-m", "no_such.module", "--dry-run", cwd=repo)
    assert result.returncode == 2 and "no module named no_such.module" in result.stderr


def _old_interpreters() -> list[str]:
    """The oldest Pythons the harness supports, where this machine has them (pyenv, PATH)."""
    import glob
    import shutil

    found = []
    for version in ("3.8", "3.9", "3.10"):
        installed = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")))
        path = installed[0] if installed else shutil.which(f"python{version}")
        if path and subprocess.run([path, "-c", ""], capture_output=True, check=False).returncode != 0:
            path = None  # a pyenv shim with no version behind it
        if path:
            found.append(path)
    return found


@pytest.mark.parametrize("python", _old_interpreters() or [pytest.param(None, marks=pytest.mark.skip("no Python < 3.11 here"))])
def test_old_interpreters_leave_loops_and_keep_the_file_view(tmp_path: Path, python: str) -> None:
    """Python 3.8-3.10: the loop instrumentation compiles and breaks, and pathlib (whose accessor
    bound the os functions at import) sees the guarded view. No torch there: no optimizer steps,
    so the leave is requested by hand through the harness's own builtins."""
    project = tmp_path / "project"
    for name, data in {
        "ckpt/e1.pt": "old1", "ckpt/e2.pt": "old2", "train.log": "old log\n",
        "results.csv": "epoch,loss\n1,0.9\n", "outputs/old.txt": "old output",
    }.items():
        write(project / name, data)
    script = write(project / "train.py", textwrap.dedent(FILE_SCRIPT) + textwrap.dedent("""
        import builtins, sys
        seen = []
        for i in range(1000):
            seen.append(i)
            if i == 3:
                builtins.__repairbot_leaving__ = True
                builtins.__repairbot_leave__ = lambda loop_id: True
        print("left at", seen[-1], sys.version_info[:2])
    """))
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    with SubprocessRunner(scratch_root=tmp_path / "scratch") as runner:
        result = runner.run(RunRequest(script=script, cwd=project, python=python))
    assert result.status is RunStatus.PASSED, result.stderr
    assert "glob ['e4.pt', 'e5.pt'] ['e4.pt', 'e5.pt']" in result.stdout
    assert "size 100 100 100" in result.stdout and "outputs now ['new.txt']" in result.stdout
    assert "left at 3" in result.stdout
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


def test_doctor_m_runs_the_module_with_its_package(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    repo = init_repo(tmp_path / "repo")
    write(repo / "src" / "pkg" / "__init__.py", "")
    write(repo / "src" / "pkg" / "__main__.py", f"""
    from . import VERSION
    {PRELUDE.strip()}
    for i in range(1000):
        step()
    print("trained", VERSION)
    """.replace("from . import VERSION", "from . import __name__ as VERSION"))
    commit_all(repo)
    result = run_cli_in_process("doctor", "-m", "pkg", "--json", str(tmp_path / "d.json"), "-v", cwd=repo, runner=shared_runner, env={"PYTHONPATH": "src"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "trained pkg" in result.stderr  # -v: the output tail of the run
    report = json.loads((tmp_path / "d.json").read_text())
    assert report["status"] == "already-passing" and report["run_limits"]["left_loops"][0]["loop"] == "src/pkg/__main__.py:7"
