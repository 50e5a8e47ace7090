"""The tracing harness, run for real on small scripts (needs torch)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
from contextlib import AbstractContextManager
from pathlib import Path

import psutil
import pytest

from repairbot.trace.runner import Limits, RunRequest, SubprocessRunner, WarmRunner
from repairbot.types import RunStatus
from tests.support import SharedWarmRunner

pytestmark = pytest.mark.torch


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# Every test runs twice: in a fresh process, and as a fork of the warm server. A run must
# behave exactly as a fresh process would, whichever way it starts. The warm runs of every test
# fork one server per test worker (tests.support.SharedWarmRunner: torch imported once, not by
# each test); each run is a fork of the untouched server all the same.
RUNNER_KIND = "fresh"
SHARED_RUNNER: SharedWarmRunner | None = None


@pytest.fixture(params=["fresh", "warm"], autouse=True)


def runner_kind(request: pytest.FixtureRequest) -> str:
    global RUNNER_KIND, SHARED_RUNNER
    RUNNER_KIND = request.param
    SHARED_RUNNER = request.getfixturevalue("shared_runner")  # its server starts at its first run
    return str(request.param)


def make_runner(tmp_path: Path, kind: str | None = None, keep_scratch: bool = False) -> AbstractContextManager[SubprocessRunner]:
    if (kind or RUNNER_KIND) == "warm":
        assert SHARED_RUNNER is not None
        return SHARED_RUNNER.runs_under(tmp_path / "scratch", keep_scratch=keep_scratch)
    return SubprocessRunner(scratch_root=tmp_path / "scratch", keep_scratch=keep_scratch)


def run(tmp_path: Path, script: Path, **request: object):  # type: ignore[no-untyped-def]
    with make_runner(tmp_path) as runner:
        result = runner.run(RunRequest(script=script, cwd=script.parent, **request))  # type: ignore[arg-type]
        if RUNNER_KIND == "warm" and request.get("python", sys.executable) == sys.executable:
            assert isinstance(runner, WarmRunner) and runner.mode.startswith("warm"), runner.mode
        return result


LOADER_SCRIPT = """
    import argparse, torch
    from torch.utils.data import DataLoader, TensorDataset
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    print("argparse", args.batch_size)
    data = TensorDataset(torch.randn(500, 4), torch.randn(500, 1))
    train = DataLoader(data, batch_size=64, shuffle=True)
    test = DataLoader(data, batch_size=128)
    print("len", len(train))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        seen = 0
        for x, y in train:
            opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
            seen += 1
            print("train batch", tuple(x.shape))
        print("epoch", epoch, "batches", seen)
        with torch.no_grad():
            print("eval batches", sum(1 for _ in test))
    print("done")
"""


def test_batch_size_forced_and_every_phase_runs_briefly(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", LOADER_SCRIPT)
    result = run(tmp_path, script)
    assert result.status is RunStatus.PASSED, result.stderr
    out = result.stdout
    assert "argparse 2" in out  # argparse --batch-size default forced down
    assert "train batch (2, 4)" in out and "(64, 4)" not in out
    # each pass: 2 batches, then the real run's last batch (500 % 64 = 52 rows; 500 % 128 = 116)
    assert "train batch (52, 4)" in out
    assert "len 3" in out
    for epoch in range(3):
        assert f"epoch {epoch} batches 3" in out  # all epochs ran, each cut after 2 batches + the last
    assert out.count("eval batches 3") == 3  # the evaluation phase ran every epoch
    assert "done" in out
    forced = result.evidence.limits.forced
    assert {f.what for f in forced} == {
        "argparse --batch-size default 32 -> 2",
        "DataLoader batch_size 64 -> 2",
        "DataLoader batch_size 128 -> 2",
    }
    assert all(f.site is not None and (f.site.endswith(":2") or "train.py" in f.site) for f in forced)


def test_limits_can_be_switched_off(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", LOADER_SCRIPT)
    result = run(tmp_path, script, limits=Limits(force_batch_size=False, cut_batches=True), args=("--epochs", "1"))
    assert result.status is RunStatus.PASSED, result.stderr
    assert "argparse 32" in result.stdout and "train batch (64, 4)" in result.stdout
    assert not result.evidence.limits.forced


HAND_LOOP = """
    import torch
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(100000):
        try:
            opt.zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
        except Exception:
            print("swallowed")
        except BaseException:
            print("swallowed base")
    print("finished all steps")
"""


def test_step_budget_leaves_the_hand_written_loop_and_the_script_goes_on(tmp_path: Path) -> None:
    # was: the run ended at the budget "as passing" and "finished all steps" never printed
    script = write(tmp_path / "train.py", HAND_LOOP)
    result = run(tmp_path, script, limits=Limits(max_steps=7))
    assert result.status is RunStatus.PASSED and result.passed, result.stderr
    assert "swallowed" not in result.stdout  # a real break: nothing raised into the script
    assert "finished all steps" in result.stdout  # the code after the loop ran
    assert result.evidence.limits.free_steps == 7
    assert result.evidence.stopped_at is None
    (left,) = result.evidence.limits.left_loops
    assert left.loop is not None and left.step is not None
    assert Path(left.loop.rpartition(":")[0]).name == "train.py"
    assert (left.loop.rpartition(":")[2], left.kind, left.steps, left.left) == ("4", "for", 7, True)
    assert left.step.endswith("train.py:8")


def test_steps_inside_dataloader_loops_do_not_count(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", LOADER_SCRIPT)
    result = run(tmp_path, script, limits=Limits(max_steps=1))
    assert result.status is RunStatus.PASSED  # 9 steps (3 epochs x 3 batches), all inside DataLoader loops
    assert result.evidence.limits.steps == 9 and result.evidence.limits.free_steps == 0


def test_uncaught_exception_evidence(tmp_path: Path) -> None:
    write(tmp_path / "model.py", """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU())
                self.head = nn.Linear(16, 2)

            def forward(self, x):
                return self.head(self.body(x))
    """)
    script = write(tmp_path / "train.py", """
        import torch
        from model import Net
        net = Net()
        batch = torch.randn(2, 3, 4)
        out = net(batch)
    """)
    result = run(tmp_path, script)
    assert result.status is RunStatus.FAILED and result.exit_code == 1
    failure = result.failure
    assert failure.exc_type == "RuntimeError"
    assert failure.message == "mat1 and mat2 shapes cannot be multiplied (2x8 and 16x2)"
    assert "Traceback (most recent call last)" in result.stderr
    assert "bootstrap.py" not in result.stderr  # the harness's own frames are not shown
    user = failure.user_frame
    assert (Path(user.file).name, user.line, user.code) == ("model.py", 10, "return self.head(self.body(x))")
    evidence = result.evidence
    linear = evidence.linear
    assert linear is not None and (linear.in_features, linear.out_features) == (16, 2)
    assert linear.input_shape == (2, 8)
    assert (Path(linear.site.file).name, linear.site.line) == ("model.py", 7)
    assert linear.site.code == "self.head = nn.Linear(16, 2)"
    assert (linear.site.col, linear.site.end_col) == (20, 36)
    first = evidence.linears[0]
    assert (first.site.line, first.site.col, first.input_shape) == (6, 48, (2, 12))
    scope = evidence.scope(failure.frames[0])
    assert scope.locals["batch"].shape == (2, 3, 4)
    assert scope.locals["net"].type == "Net"
    assert sorted(Path(f).name for f in evidence.imported_files) == ["model.py", "train.py"]
    assert evidence.environment.torch and evidence.environment.cuda_available is False


def test_dataloader_worker_error_carries_the_worker_frames(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Labels(Dataset):
            names = {"cat": 0, "dog": 1}
            def __len__(self):
                return 8
            def __getitem__(self, index):
                return torch.zeros(2), self.names["bird" if index == 3 else "cat"]

        if __name__ == "__main__":
            for x, y in DataLoader(Labels(), batch_size=4, num_workers=2):
                pass
    """)
    result = run(tmp_path, script)
    assert result.status is RunStatus.FAILED
    failure = result.failure
    assert failure.exc_type == "KeyError"
    assert failure.message == "'bird'"  # the worker's own error, not the loader's wrapper
    assert failure.worker_frames, failure.message
    user = failure.user_frame
    assert (Path(user.file).name, user.line, user.function) == ("train.py", 9, "__getitem__")


def test_timeout_kills_the_whole_process_tree(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        # a grandchild that leaves the process group, as a daemon would
        escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        print("PIDS", os.getpid(), child.pid, escaped.pid, flush=True)
        time.sleep(600)
    """)
    # a short timeout, unless a loaded machine had not let the script start its processes by then
    # (then once more with room): the timeout must fall while they run
    for attempt, timeout in enumerate((4.0, 20.0)):
        started = time.monotonic()
        result = run(tmp_path / f"attempt-{attempt}", script, timeout=timeout)
        if "PIDS" in result.stdout:  # the timeout fell after the script started its processes
            break
    assert result.status is RunStatus.TIMEOUT
    assert time.monotonic() - started < timeout + 22
    pids = result.stdout.split("PIDS", 1)[1].split()[:3]
    assert len(pids) == 3
    for pid in map(int, pids):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_worker_processes_that_outlive_the_script_are_killed(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", """
        import subprocess, sys
        escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        print("PID", escaped.pid)
    """)
    result = run(tmp_path, script)
    assert result.status is RunStatus.PASSED
    pid = int(result.stdout.split("PID", 1)[1].split()[0])
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


FILE_SCRIPT = """
    import os, shutil, torch
    torch.save({"w": torch.zeros(2)}, "best.pt")                 # overwrite a checkpoint
    assert torch.load("best.pt")["w"].shape == (2,)              # ...and read back its own write
    with open("train.log", "a") as log:                          # append to a log
        log.write("run 2\\n")
    assert open("train.log").read() == "run 1\\nrun 2\\n"
    os.remove("data.csv")                                        # delete data
    assert not os.path.exists("data.csv") or True
    try:
        open("data.csv")
        raise SystemExit("a deleted file must read as missing")
    except FileNotFoundError:
        pass
    os.replace("notes.txt", "notes.old")                         # move an existing file away
    shutil.rmtree("cache")                                       # delete a folder
    with open("config.yaml", "r+") as handle:                    # update in place
        handle.write("XX")
    fd = os.open("raw.bin", os.O_WRONLY | os.O_TRUNC)            # low-level truncate
    os.write(fd, b"!"); os.close(fd)
    os.makedirs("runs/exp1", exist_ok=True)                      # new files and folders
    open("runs/exp1/metrics.txt", "w").write("ok")
    torch.save({}, "runs/exp1/last.pt")
    print("ALL WRITES DONE")
"""


def test_files_that_existed_are_never_altered_and_new_files_are_removed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    existing = {
        "best.pt": b"precious checkpoint bytes",
        "train.log": b"run 1\n",
        "data.csv": b"a,b\n1,2\n",
        "notes.txt": b"keep me",
        "cache/item.bin": b"\x00\x01",
        "config.yaml": b"lr: 0.1\n",
        "raw.bin": b"raw data",
    }
    for name, data in existing.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(data)
    before = {name: hashlib.sha256((project / name).read_bytes()).hexdigest() for name in existing}
    script = write(project / "train.py", FILE_SCRIPT)
    result = run(tmp_path, script)
    assert result.status is RunStatus.PASSED, result.stderr
    assert "ALL WRITES DONE" in result.stdout
    after = {name: hashlib.sha256((project / name).read_bytes()).hexdigest() for name in existing}
    assert after == before
    assert not (project / "notes.old").exists()
    assert not (project / "runs").exists()  # created by the run, removed afterwards
    assert sorted(p.name for p in project.iterdir()) == sorted(["best.pt", "cache", "config.yaml", "data.csv", "notes.txt", "raw.bin", "train.log", "train.py"])
    assert set(result.evidence.suppressed_deletes) >= {str(project / "data.csv")}


def test_overlay_serves_candidate_sources_without_touching_disk(tmp_path: Path) -> None:
    model = write(tmp_path / "model.py", "SIZE = 1\n")
    script = write(tmp_path / "train.py", "import model\nprint('size', model.SIZE)\nraise ValueError('from ' + str(model.SIZE))\n")
    overlay = {model: b"SIZE = 2\n", script: b"import model\nprint('size', model.SIZE)\nraise ValueError('overlaid ' + str(model.SIZE))\n"}
    result = run(tmp_path, script, overlay=overlay)
    assert "size 2" in result.stdout
    assert result.failure.message == "overlaid 2"
    assert "raise ValueError('overlaid ' + str(model.SIZE))" in result.stderr  # traceback shows the overlay
    assert model.read_text() == "SIZE = 1\n"
    assert not (tmp_path / "__pycache__").exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ("import sys\nsys.exit(0)\n", RunStatus.PASSED, 0),
        ("import sys\nsys.exit(3)\n", RunStatus.FAILED, 3),
        ("import os\nos._exit(5)\n", RunStatus.FAILED, 5),
        ("x = input()\n", RunStatus.FAILED, 1),  # stdin is empty, never a hang
    ],
)


def test_exit_paths(tmp_path: Path, body: str, status: RunStatus, code: int) -> None:
    result = run(tmp_path, write(tmp_path / "train.py", body))
    assert (result.status, result.exit_code) == (status, code)
    if status is RunStatus.FAILED:
        assert result.failure is not None


def test_script_argv_cwd_and_main(tmp_path: Path) -> None:
    script = write(tmp_path / "pkg" / "train.py", """
        import os, sys
        print("argv", sys.argv)
        print("cwd", os.getcwd())
        print("path0", sys.path[0])
        print("name", __name__, __file__)
    """)
    result = run(tmp_path, script, args=("--epochs", "1"))
    out = result.stdout
    assert f"argv [{str(script)!r}, '--epochs', '1']" in out
    assert f"cwd {script.parent}" in out and f"path0 {script.parent}" in out
    assert f"name __main__ {script}" in out


def test_interpreter_without_repairbot(tmp_path: Path) -> None:
    """--python may point at an interpreter where repairbot is not installed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    import torch

    site_packages = Path(torch.__file__).parent.parent
    target = next((venv / "lib").glob("python*/site-packages"))
    for entry in site_packages.iterdir():
        if entry.name.startswith(("repairbot", "__editable__", "_repairbot")) or entry.suffix == ".pth":
            continue
        (target / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    check = subprocess.run([str(python), "-c", "import repairbot"], capture_output=True, cwd=tmp_path)
    assert check.returncode != 0  # really without repairbot
    script = write(tmp_path / "proj" / "train.py", "import torch\nprint(torch.nn.Linear(3, 2)(torch.zeros(2, 4)))\n")
    result = run(tmp_path, script, python=str(python))
    assert result.failure is not None and "mat1 and mat2" in result.failure.message
    assert result.evidence.linear is not None


def test_harness_error_for_a_missing_interpreter(tmp_path: Path) -> None:
    result = run(tmp_path, write(tmp_path / "train.py", "pass\n"), python=str(tmp_path / "nope"))
    assert result.status is RunStatus.HARNESS_ERROR and "cannot start" in (result.harness_error or "")


def test_evidence_is_valid_json_with_schema(tmp_path: Path) -> None:
    with make_runner(tmp_path, keep_scratch=True) as runner:
        runner.run(RunRequest(script=write(tmp_path / "train.py", "raise KeyError('x')\n"), cwd=tmp_path))
    data = json.loads((tmp_path / "scratch" / "run-1" / "evidence.json").read_text())
    assert data["schema"] == "repairbot.evidence/1" and data["exception"]["type"] == "KeyError"
    assert os.environ.get("OMP_NUM_THREADS") == "1"


def _pattern_probe_declarations(name: str) -> set[str]:
    """What each pattern's probe.py declares as ``name`` (NAME, EVIDENCE_KEY), read from its source."""
    import ast

    from repairbot.registry import probe_files

    found = set()
    for path in probe_files():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                found.add(ast.literal_eval(node.value))
    return found


def test_evidence_holds_the_core_keys_and_the_pattern_probes_records_only(tmp_path: Path) -> None:
    """The core keys are declared once (harness/evidence_keys.py), read by the harness that
    writes them and by repairbot.evidence, which takes every other key for a pattern probe's."""
    from repairbot.evidence import evidence_from_json
    from repairbot.trace.harness.evidence_keys import CORE_KEYS, LAUNCHED_KEYS

    script = write(tmp_path / "train.py", "import torch\nprint(torch.nn.Linear(2, 1)(torch.ones(1, 2)))\n")
    every_run = CORE_KEYS - LAUNCHED_KEYS  # a run under no launcher has no rank
    every_probe = frozenset(_pattern_probe_declarations("NAME"))
    with make_runner(tmp_path, keep_scratch=True) as runner:
        runner.run(RunRequest(script=script, cwd=tmp_path, probe_files=()))
        runner.run(RunRequest(script=script, cwd=tmp_path))
        runner.run(RunRequest(script=script, cwd=tmp_path, probes=every_probe))
    bare, loaded, full = (
        json.loads((tmp_path / "scratch" / f"run-{n}" / "evidence.json").read_text()) for n in (1, 2, 3)
    )
    assert set(bare) == every_run
    # the patterns' probes loaded but not asked for write nothing: a new one changes no recording
    assert set(loaded) == every_run
    pattern_keys = _pattern_probe_declarations("EVIDENCE_KEY")
    assert pattern_keys and not pattern_keys & CORE_KEYS
    assert set(full) == every_run | pattern_keys
    assert set(evidence_from_json(full).probe_records) == pattern_keys


def test_a_pattern_probe_may_not_claim_a_core_key(tmp_path: Path) -> None:
    probe = write(tmp_path / "claims" / "probe.py", """
        NAME = "claims-limits"
        EVIDENCE_KEY = "limits"

        def install(run):
            return lambda: "not the limits"
    """)
    result = run(tmp_path, write(tmp_path / "train.py", "print('ran')\n"), probe_files=(probe,))
    assert result.evidence is None and "ran" not in result.stdout
    assert "claims 'limits', a key of the harness's core" in result.stderr


def test_a_run_killed_at_the_timeout_reports_how_far_it_got(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", """
        import time, torch
        model = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            model(torch.zeros(1, 2)).sum().backward()
            opt.step()
            time.sleep(1.1)  # the heartbeat is written at most once a second
        time.sleep(600)
    """)
    result = run(tmp_path, script, timeout=10)
    assert result.status is RunStatus.TIMEOUT
    assert result.progress and result.progress[0] >= 2


INPLACE_SCRIPT = """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            h = torch.sigmoid(self.fc(x))
            h += 1
            return self.act(h * 2)

    net = Net()
    out = net(torch.randn(2, 4))
    out.sum().backward()
"""


def test_inplace_probe_records_in_place_ops_since_the_last_backward(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", INPLACE_SCRIPT)
    plain = run(tmp_path, script)
    assert plain.failure is not None and "modified by an inplace operation" in plain.failure.message
    # the pattern's probe is loaded (its key is there) but off until it is asked for
    assert "inplace_ops" not in plain.evidence.probe_records and "inplace-ops" not in plain.evidence.probes
    traced = run(tmp_path, script, probes=frozenset({"inplace-ops"}))
    # the same failure; only torch's hint differs, as the rerun is in anomaly mode
    assert traced.failure.message.split(" Hint:")[0] == plain.failure.message.split(" Hint:")[0]
    *ops, failed = traced.evidence.probe_records["inplace_ops"]
    first = ops[0]
    assert (first["op"], first["shape"], first["producer"]) == ("add_", [2, 3], "SigmoidBackward0")
    assert (Path(first["site"]["file"]).name, first["site"]["line"], first["site"]["code"]) == ("train.py", 12, "h += 1")
    relu = next(op for op in ops if op["module"] == "ReLU")
    assert relu["module_site"]["line"] == 8 and relu["module_site"]["code"] == "self.act = nn.ReLU(inplace=True)"
    # the failed backward(): the sigmoid's saved output, read from the graph, shares the
    # storage of the tensor `h += 1` changed; anomaly mode kept the forward line that saved it
    (saved,) = failed["saved"]
    assert (saved["node"], saved["shape"], saved["version"]) == ("SigmoidBackward0", [2, 3], 1)
    assert saved["storage"] == first["storage"] and saved["storage"] != relu["storage"]
    assert [(f["line"], f["code"]) for f in saved["forward"]][-1] == (11, "h = torch.sigmoid(self.fc(x))")


def test_inplace_probe_anomaly_mode_never_checks_for_nan(tmp_path: Path) -> None:
    # a NaN gradient is the script's own business: anomaly mode (for the forward tracebacks)
    # must not turn it into a failure the plain run does not have
    script = write(tmp_path / "train.py", """
        import torch
        x = torch.zeros(3, requires_grad=True)
        (x.sqrt() * 0).sum().backward()
        print("gradient", x.grad)
    """)
    traced = run(tmp_path, script, probes=frozenset({"inplace-ops"}))
    assert traced.passed, traced.failure
    assert "inplace-ops" in traced.evidence.probes


def test_target_size_warning_becomes_a_failure_at_the_users_call(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", """
        import torch
        import torch.nn.functional as F
        pred = torch.randn(4, 1, requires_grad=True)
        loss = F.mse_loss(pred, torch.randn(4))
        loss.backward()
        print("trained on broadcast garbage")
    """)
    assert run(tmp_path, script).status is RunStatus.PASSED  # only a warning, normally
    result = run(tmp_path, script, probes=frozenset({"target-size-warning"}))
    assert result.status is RunStatus.FAILED
    assert result.failure.exc_type == "UserWarning" and "Using a target size" in result.failure.message
    assert result.failure.user_frame.line == 4


FACTS_SCRIPT = """
    import os, random, signal, sys, threading, warnings
    import torch
    facts = {
        "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "name": __name__,
        "file": __file__, "main_file": sys.modules["__main__"].__file__,
        "stdin_tty": sys.stdin.isatty(), "stdin": sys.stdin.read(), "stdout_tty": sys.stdout.isatty(),
        "encoding": sys.stdout.encoding, "sigint": str(signal.getsignal(signal.SIGINT)),
        "sigterm": str(signal.getsignal(signal.SIGTERM)), "threads_alive": threading.active_count(),
        "torch_threads": torch.get_num_threads(), "env_marker": "REPAIRBOT_RUN_ID" in os.environ,
        "env_extra": os.environ.get("EXTRA"), "dont_write_bytecode": sys.dont_write_bytecode,
        "session_leader": os.getsid(0) == os.getpid(),
        "warnings_filters": len(warnings.filters) > 0, "recursion": sys.getrecursionlimit(),
    }
    print(repr(sorted(facts.items())))
    print("random", random.random(), torch.initial_seed())
    sys.exit(7)
"""


def test_a_forked_run_behaves_as_a_fresh_process(tmp_path: Path) -> None:
    if RUNNER_KIND == "warm":
        pytest.skip("compares both kinds itself")
    script = write(tmp_path / "project" / "train.py", FACTS_SCRIPT)
    outputs = {}
    randoms = []
    for kind in ("fresh", "warm", "warm"):
        with make_runner(tmp_path / kind, kind) as runner:
            request = RunRequest(script=script, cwd=script.parent, args=("--epochs", "1"), env={"EXTRA": "yes"})
            result = runner.run(request)
            assert (result.status, result.exit_code) == (RunStatus.FAILED, 7), result.stderr
            facts, _, random_line = result.stdout.partition("\nrandom ")
            outputs.setdefault(kind, facts)
            randoms.append(random_line)
            assert outputs[kind] == facts
    assert outputs["fresh"] == outputs["warm"]
    # every run seeds Python's and torch's generators afresh, as a new interpreter does
    assert len(set(randoms)) == 3


def test_a_forked_run_lists_the_same_imported_user_files_as_a_fresh_one(tmp_path: Path) -> None:
    """The warm server decides once which of the modules it imported are the user's; a fork
    keeps those decisions (a new library root or harness file can only take files away from
    the user) and lists exactly what a fresh process lists."""
    if RUNNER_KIND == "warm":
        pytest.skip("compares both kinds itself")
    project = tmp_path / "project"
    write(project / "helpers" / "__init__.py", "")
    write(project / "helpers" / "data.py", "import numpy\nSIZE = 3\n")
    script = write(project / "train.py", "import torch\nfrom helpers.data import SIZE\nprint(torch.ones(SIZE))\n")
    listed = {}
    for kind in ("fresh", "warm"):
        with make_runner(tmp_path / kind, kind) as runner:
            result = runner.run(RunRequest(script=script, cwd=project))
            assert result.passed and result.evidence is not None, result.stderr
            listed[kind] = sorted(result.evidence.imported_files)
    assert listed["fresh"] == listed["warm"]
    assert listed["fresh"] == sorted(str(p) for p in (script, project / "helpers" / "__init__.py", project / "helpers" / "data.py"))


def test_code_ownership_keeps_only_the_decisions_a_new_root_cannot_change(tmp_path: Path) -> None:
    from repairbot.trace.harness.frames import CodeOwnership

    ownership = CodeOwnership()
    script = write(tmp_path / "project" / "train.py", "")
    vendored = write(tmp_path / "vendor" / "lib.py", "")
    assert ownership.is_user_file(str(script)) and ownership.is_user_file(str(vendored))
    ownership.add_library_root(str(tmp_path / "vendor"))
    assert ownership.is_user_file(str(script)) and not ownership.is_user_file(str(vendored))
    ownership.add_harness_file(str(tmp_path / "project" / "probe.py"))  # a probe beside it: the harness's folder
    assert not ownership.is_user_file(str(script))


def test_layer_sites_record_traced_size_values_and_the_call_chain(tmp_path: Path) -> None:
    """Every sized layer kind, one record type: the traced values of the names, attribute
    chains and constant subscripts of its size arguments, the sizes in scope, and the
    constructor call sites an ``__init__`` parameter came through (issue 14 §1)."""
    script = write(tmp_path / "train.py", """
        from dataclasses import dataclass
        import torch, torch.nn as nn

        @dataclass
        class Cfg:
            emb: int = 16
            hidden_dim: int = 32

            @property
            def exploding(self):
                raise RuntimeError("a property must never run")

        GPT = {"emb_dim": 24, "vocab": 50}

        class Head(nn.Module):
            def __init__(self, in_dim, cfg, n=3):
                super().__init__()
                self.seq_len = 4
                self.fc = nn.Linear(in_dim, 1)
                self.fc2 = nn.Linear(self.seq_len * cfg.emb, GPT["emb_dim"])
                self.rnn = nn.LSTM(cfg.hidden_dim, 8, batch_first=True)
                self.conv = nn.Conv2d(n, 4, 3)
                self.norm = nn.LayerNorm(cfg.emb)

        class Model(nn.Module):
            def __init__(self, in_dim, cfg):
                super().__init__()
                self.head = Head(in_dim, cfg=cfg)

        model = Model(in_dim=7, cfg=Cfg())
        emb = nn.Embedding(GPT["vocab"], GPT["emb_dim"])
        model.head.fc(torch.randn(2, 5))
    """)
    result = run(tmp_path, script)
    assert result.status is RunStatus.FAILED
    sites = result.evidence.layer_sites
    assert [s.type for s in sites] == ["Linear", "Linear", "LSTM", "Conv2d", "LayerNorm", "Embedding"]
    fc, fc2, rnn, conv, norm, emb = sites
    assert fc.exprs == {"in_features": "in_dim", "out_features": "1"} and fc.args["in_features"] == 7
    assert [(step.param, step.expr, step.value, step.where.line, step.where.col) for step in fc.chain] == [
        ("in_dim", "in_dim", 7, 28, 25), ("in_dim", "7", 7, 30, 21),
    ]
    assert fc2.values == {"self.seq_len": 4, "cfg.emb": 16, 'GPT["emb_dim"]': 24}
    assert fc2.scope["cfg.hidden_dim"] == 32 and fc2.scope["self.seq_len"] == 4 and "cfg.exploding" not in fc2.scope
    assert rnn.args == {"input_size": 32, "hidden_size": 8} and rnn.values == {"cfg.hidden_dim": 32}
    assert conv.exprs["in_channels"] == "n" and conv.values == {"n": 3}
    assert norm.values == {"cfg.emb": 16}
    assert emb.values == {'GPT["vocab"]': 50, 'GPT["emb_dim"]': 24}
    linear = result.evidence.linear
    assert linear is not None and result.evidence.layer_site(linear) == fc


def test_the_harness_package_stays_off_the_users_path_and_patches_torch_once(tmp_path: Path) -> None:
    """The script sees its own folder first on sys.path and nothing of the harness; each torch
    entry point is one dispatcher of the harness's hooks module over torch's own function."""
    script = write(tmp_path / "train.py", """
        import json, os, sys
        import torch
        from torch.utils.data import DataLoader
        patched = {
            "DataLoader.__init__": DataLoader.__init__, "DataLoader.__iter__": DataLoader.__iter__,
            "Linear.__init__": torch.nn.Linear.__init__, "Module.__init__": torch.nn.Module.__init__,
            "autograd.backward": torch.autograd.backward, "torch.save": torch.save,
        }
        print(json.dumps({
            "path": sys.path,
            "registered": "repairbot_harness" in sys.modules,
            "files": {name: f.__code__.co_filename for name, f in patched.items()},
            "real": {name: getattr(f, "__wrapped__", None).__module__ for name, f in patched.items()
                     if hasattr(f, "__wrapped__")},
            "alias": torch.serialization.save is torch.save,
            # no probe of this run watches torch.load (a pattern's opt-in probe would): torch's own
            "load": torch.load.__module__,
        }))
    """)
    result = run(tmp_path, script)
    assert result.passed, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    harness = Path(__file__).resolve().parent.parent / "repairbot" / "trace"
    assert seen["path"][0] == str(tmp_path)
    assert not [p for p in seen["path"] if p and Path(p).resolve().is_relative_to(harness)]
    assert seen["registered"]
    assert {Path(file).as_posix().rsplit("/", 3)[-3:] == ["trace", "harness", "hooks.py"]
            for file in seen["files"].values()} == {True}
    # the DataLoader's entry points carry the real functions' metadata too: Lightning reads
    # inspect.signature(DataLoader.__init__) to rebuild a loader
    assert all(module.startswith("torch") for module in seen["real"].values())
    assert {"DataLoader.__init__", "DataLoader.__iter__"} <= set(seen["real"]) and len(seen["real"]) == 5
    assert seen["alias"] and seen["load"] == "torch.serialization"


def test_the_harness_never_hashes_or_compares_the_scripts_objects(tmp_path: Path) -> None:
    # torchmetrics' Metric (so Lightning's self.log()) hashes state set after Module.__init__,
    # and a tensor's == is elementwise: the probes and health checks must call neither
    script = write(tmp_path / "train.py", """
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        class Touchy(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 1)
                self._defaults = {"total": 0}

            def __hash__(self):
                return hash(tuple(self._defaults))  # AttributeError while Module.__init__ runs

            def __eq__(self, other):
                raise AssertionError("compared by the harness")

            def forward(self, x):
                return self.net(x)

        class TouchyLoader(DataLoader):
            def __hash__(self):
                raise AssertionError("loader hashed by the harness")

        class TouchySGD(torch.optim.SGD):
            def __hash__(self):
                raise AssertionError("optimizer hashed by the harness")

        model = Touchy()
        loader = TouchyLoader(TensorDataset(torch.randn(20, 4), torch.randn(20, 1)), batch_size=4)
        opt = TouchySGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        print("done")
    """)
    result = run(tmp_path, script)
    assert result.status is RunStatus.PASSED, (result.failure, result.stderr[-2000:])
    assert "done" in result.stdout


def _identity_module():  # type: ignore[no-untyped-def]
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "repairbot" / "trace" / "harness" / "identity.py"
    spec = importlib.util.spec_from_file_location("harness_identity_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("runner_kind", ["unit"], indirect=False)


def test_identity_weak_containers_key_by_identity_and_forget_the_dead(runner_kind: str) -> None:
    import gc

    identity = _identity_module()

    class Unhashable:
        def __hash__(self) -> int:
            raise AssertionError("hashed")

        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared")

    first, second = Unhashable(), Unhashable()
    table = identity.IdentityWeakKeyDict()
    table[first] = 1
    table[second] = 2
    table[first] = 3  # replaced in place, keeps its position
    assert (table.get(first), table[second], len(table)) == (3, 2, 2)
    assert first in table and table.get(object(), "absent") == "absent"
    assert table.keys() == [first, second] and table.values() == [3, 2]
    members = identity.IdentityWeakSet()
    members.add(first)
    members.add(first)
    assert list(members) == [first] and len(members) == 1 and second not in members
    del first
    gc.collect()
    assert len(table) == 1 and table.items() == [(second, 2)] and len(members) == 0


TQDM_NOTEBOOK = """
    import torch
    from tqdm.std import tqdm as std_tqdm
    from tqdm.auto import tqdm as auto_tqdm
    from tqdm.notebook import tnrange, tqdm, tqdm_notebook, trange

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in trange(2, desc="epochs"):
        for step in tqdm(range(3), desc="steps", leave=False):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
    bar = tqdm_notebook(total=3, display=False, colour="green")
    bar.update(3)
    bar.close()
    assert list(tnrange(2)) == [0, 1] and list(auto_tqdm([5])) == [5]
    print("bars", isinstance(bar, std_tqdm), [c.__module__ for c in auto_tqdm.__mro__][:3])
"""


@pytest.mark.skipif(importlib.util.find_spec("tqdm") is None, reason="tqdm is not installed (the test extra has it)")


def test_tqdm_notebook_bar_is_the_text_bar_outside_a_kernel(tmp_path: Path) -> None:
    script = write(tmp_path / "train.py", TQDM_NOTEBOOK)
    result = run(tmp_path, script)
    assert result.status is RunStatus.PASSED, result.stderr
    # tqdm.auto outside a kernel is tqdm's own choice, the text bar, as it was
    assert "bars True ['tqdm.asyncio', 'tqdm.std', 'tqdm.utils']" in result.stdout
    if importlib.util.find_spec("ipywidgets") is None:
        # the plain run outside a kernel fails as under the old harness; the notebook's real
        # run (a kernel with widgets) does not: the harness draws the text bar instead
        plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
        assert "ImportError: IProgress not found" in plain.stderr
        assert "epochs: 100%" in result.stderr and "steps" in result.stderr


@pytest.mark.skipif(importlib.util.find_spec("tqdm") is None, reason="tqdm is not installed (the test extra has it)")


def test_notebook_with_tqdm_notebook_bar_is_already_passing(tmp_path: Path) -> None:
    if RUNNER_KIND == "warm":
        pytest.skip("the command line picks its runner itself")
    from tests.support import commit_all, init_repo, run_cli

    cells = ["import torch\nfrom tqdm.notebook import tqdm",
             "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)",
             "for epoch in tqdm(range(3)):\n    opt.zero_grad()\n    model(torch.randn(8, 4)).sum().backward()\n"
             "    opt.step()\nprint('done')"]
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                          for c in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    repo = init_repo(tmp_path / "repo")
    (repo / "train.ipynb").write_text(json.dumps(notebook))
    commit_all(repo)
    result = run_cli("fix", "train.ipynb", "--dry-run", "--json", str(tmp_path / "r.json"), cwd=repo)
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["status"], result.returncode) == ("already-passing", 0), result.stdout + result.stderr
