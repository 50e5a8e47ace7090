"""A failure of repairbot's own harness is never reported as the script's, and a failure only
the harness's limits made (a cut pass's planned last batch that the real run never reaches, the
forced batch size) is confirmed by a run without them before anything is changed.

The loop's decisions are replayed with a scripted runner (no torch); the harness's attribution
(which frames raised) runs for real, with a fault injected in a copy of the tree or through a
probe file loaded by path (marked ``torch``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from repairbot.evidence import Evidence, FailingModule, LastBatch, TracedLimits
from repairbot.loop import LoopOptions, RepairLoop
from repairbot.output.markdown import render_markdown
from repairbot.output.report import render_json, render_text, report_schema
from repairbot.output.sarif import render_sarif
from repairbot.registry import all_patterns
from repairbot.results import RepairReport
from repairbot.sources import Sources
from repairbot.trace.runner import (
    Limits,
    RunRequest,
    RunResult,
    _judge,
    printed_harness_frame,
)
from repairbot.tracebacks import parse_log
from repairbot.types import Failure, Frame, HarnessFault, RunLimits, RunStatus, Status, StopReason
from tests.support import PYTHON, SharedWarmRunner, commit_all, init_repo
from tests.test_loop import SCRIPT, Boom, ScriptedRunner, booms, failed, passed
from tests.test_reports import validate_sarif

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "repairbot" / "trace" / "harness"
CUT = str(HARNESS / "probes" / "dataloader_limits.py")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def loop(script: Path, runner: ScriptedRunner) -> RepairLoop:
    options = LoopOptions(
        script=script, args=(), cwd=script.parent, root=script.parent, python="python",
        limits=Limits(), timeout=10.0, max_attempts=3, patterns=(Boom(),),
    )
    return RepairLoop(options, runner, Sources())


def harness_failed(script: Path, exc_type: str = "MemoryError", message: str = "") -> RunResult:
    """The traced run's failure, raised by the harness's own code below the script's line 1."""
    frame = Frame(CUT, 22, "__iter__", "order = list(self.sampler)")
    failure = Failure(
        exc_type, message, frames=(Frame(str(script), 1, "<module>", "code of line 1", user=True),),
        harness_frame=frame,
    )
    evidence = Evidence(outcome="failed", exit_code=1, failure=failure)
    return RunResult(RunStatus.FAILED, 1, 0.1, failure, evidence, progress=(0, 0, 1))


# the harness's own failure -------------------------------------------------------------------

def test_a_harness_failure_the_plain_run_does_not_have_stops_with_a_harness_error(script: Path) -> None:
    runner = ScriptedRunner(script, lambda s, r: passed() if r.plain else harness_failed(script))
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.ERROR, StopReason.HARNESS_ERROR)
    assert [r.plain for r in runner.requests] == [False, True]
    assert result.attempts == () and result.verified == {}
    fault = result.harness_fault
    assert fault is not None and fault.frame.location == f"{CUT}:22"
    assert fault.plain_status is RunStatus.PASSED and fault.plain_outcome == "the script runs to its end (exit 0)"
    assert any("bug in repairbot" in note for note in result.notes)


def test_a_harness_failure_in_a_broken_script_shows_the_plain_runs_own_error(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        return failed(script, "BoomError", "boom2", 2) if request.plain else harness_failed(script)

    result = loop(script, ScriptedRunner(script, behave)).run()
    assert result.stop_reason is StopReason.HARNESS_ERROR and result.attempts == ()
    fault = result.harness_fault
    assert fault is not None and fault.plain_failure is not None
    assert fault.plain_outcome == f"the script fails with BoomError: boom2 at {script}:2"


def test_a_failure_raised_in_the_harness_that_the_plain_run_has_too_is_the_scripts(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        if "boom1" in source:
            return failed(script, "BoomError", "boom1") if request.plain else harness_failed(script, "BoomError", "boom1")
        return booms(script)(source, request)

    runner = ScriptedRunner(script, behave)
    result = loop(script, runner).run()
    assert result.status is Status.FIXED and result.harness_fault is None
    assert sum(r.plain for r in runner.requests) == 1  # one plain run for that failure, none after
    assert any("fails the same way without the harness" in note for note in result.notes)


def test_the_scripts_own_failure_never_costs_a_plain_run(script: Path) -> None:
    runner = ScriptedRunner(script, booms(script))
    assert loop(script, runner).run().status is Status.FIXED
    assert not any(r.plain for r in runner.requests)


def test_the_harness_error_report_names_the_harness_and_the_plain_run(tmp_path: Path) -> None:
    failure = Failure("MemoryError", "", frames=(Frame("makemore.py", 589, "<module>", "batch = next(it)", user=True),))
    fault = HarnessFault(
        failure=failure, frame=Frame("repairbot/trace/harness/probes/dataloader_limits.py", 22, "__iter__"),
        plain_status=RunStatus.FAILED, plain_exit_code=1, plain_output="--- stderr (last 1 lines) ---\nValueError: x",
        plain_failure=Failure("ValueError", "x", frames=(Frame("makemore.py", 12, "<module>", user=True),)),
    )
    report = RepairReport(
        script="makemore.py", status=Status.ERROR, stop_reason=StopReason.HARNESS_ERROR, attempts=(), diff="",
        files_modified=(), run_limits=RunLimits(), environment={}, duration_s=1.0, harness_fault=fault,
        error=fault.summary,
    )
    assert report.exit_code == 2
    text = render_text(report)
    assert "[HARNESS ERROR] repairbot/trace/harness/probes/dataloader_limits.py:22" in text
    assert "Error: MemoryError at makemore.py:589, raised by repairbot's tracing harness" in text
    assert "Without the harness: the script fails with ValueError: x at makemore.py:12" in text
    assert "Stop reason: harness-error" in text and "no-pattern" not in text and "[FAILED]" not in text
    data = json.loads(render_json(report))
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    assert data["stop_reason"] == "harness-error" and data["status"] == "error"
    assert data["harness_error"]["harness_file"] == "repairbot/trace/harness/probes/dataloader_limits.py"
    assert data["harness_error"]["plain_run"]["exc_type"] == "ValueError"
    markdown = render_markdown(report, tmp_path)
    assert "repairbot's tracing harness failed" in markdown and "refused" not in markdown
    sarif = json.loads(render_sarif(report, all_patterns(), tmp_path))
    validate_sarif(sarif)
    (run,) = sarif["runs"]
    assert run["invocations"][0]["executionSuccessful"] is False
    assert fault.summary in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]


def test_a_traceback_the_harness_printed_without_its_record_is_the_harnesss() -> None:
    log = (
        "Traceback (most recent call last):\n"
        f'  File "{ROOT}/repairbot/trace/bootstrap.py", line 47, in <module>\n    sys.exit(main())\n'
        f'  File "{HARNESS}/main.py", line 70, in run\n    install_probes(run, probes, late=False)\n'
        f'  File "{HARNESS}/probes/progress.py", line 20, in install\n    run.nothing\n'
        "AttributeError: 'Run' object has no attribute 'nothing'\n"
    )
    failure = parse_log(log)
    assert failure is not None
    frame = printed_harness_frame(failure)
    assert frame is not None and frame.file.endswith("probes/progress.py") and frame.line == 20
    user = parse_log('Traceback (most recent call last):\n  File "/p/train.py", line 3, in <module>\n    f()\nKeyError: 1\n')
    assert user is not None and printed_harness_frame(user) is None


def test_a_pattern_probe_that_fails_to_load_is_the_harnesss_failure_not_the_users(tmp_path: Path) -> None:
    # the run ends before the script and before any record: its printed traceback is read
    stderr = (
        "Traceback (most recent call last):\n"
        f'  File "{HARNESS}/main.py", line 58, in run\n    probes = run_probes(config.get("probe_files", ()))\n'
        f'  File "{tmp_path}/patterns/broken/probe.py", line 3, in <module>\n    import no_such_module\n'
        "ModuleNotFoundError: No module named 'no_such_module'\n"
    )
    status, failure = _judge(1, None, stderr, probe_files=(tmp_path / "patterns" / "broken" / "probe.py",))
    assert status is RunStatus.FAILED and failure is not None
    assert failure.user_frame is None
    assert failure.harness_frame is not None and failure.harness_frame.file == f"{tmp_path}/patterns/broken/probe.py"


# a failure only the harness's limits made ----------------------------------------------------

def last_batch_failed(script: Path, rows: int, size: int = 1, other: int = 70) -> RunResult:
    """A batch-dependent failure in a run whose cut passes planned a last batch of ``size`` for
    a loader of 97 samples (4 batches of 32) and one of 6 for a loader of ``other`` samples."""
    run = failed(script, "BoomError", "boom1")
    plans = (LastBatch(size=size, dataset=97, batch_size=32, site="train.py:5"),
             LastBatch(size=other % 32, dataset=other, batch_size=32, site="train.py:6"))
    evidence = Evidence(
        outcome="failed", exit_code=1, failure=run.failure, progress=run.progress,
        failing_module=FailingModule(type="BatchNorm1d", input_shape=(rows, 4)),
        limits=TracedLimits(last_batches=plans),
    )
    return RunResult(RunStatus.FAILED, 1, 0.1, run.failure, evidence, progress=run.progress)


def test_a_failure_at_a_planned_last_batch_the_real_run_never_reaches_is_not_fixed(script: Path) -> None:
    # zip(src, tgt): the cut passes reach src's last batch of one; the real run stops at tgt's end
    runner = ScriptedRunner(script, lambda s, r: last_batch_failed(script, 1) if r.limits.cut_batches else passed())
    result = loop(script, runner).run()
    assert (result.status, result.stop_reason) == (Status.ALREADY_PASSING, StopReason.PASSING)
    assert result.attempts == () and result.verified == {}
    confirmation = runner.requests[1].limits
    assert (confirmation.cut_batches, confirmation.force_batch_size) == (False, False)
    assert any("the batch of 1 of the DataLoader at train.py:5" in note and "the script runs" in note
               for note in result.notes)


def test_a_failure_at_a_last_batch_the_real_run_reaches_is_fixed(script: Path) -> None:
    def behave(source: str, request: RunRequest) -> RunResult:
        return last_batch_failed(script, 1) if "boom1" in source else booms(script)(source, request)

    runner = ScriptedRunner(script, behave)
    result = loop(script, runner).run()
    assert result.status is Status.FIXED and result.attempts[0].pattern == "boom"
    assert runner.requests[1].limits.cut_batches is False  # the one confirmation, at the real length
    assert all(r.limits.cut_batches for r in runner.requests[2:])  # later runs cut again


@pytest.mark.parametrize("rows, other", [(2, 70), (1, 102)], ids=["batch-of-another-size", "no-shorter-loader"])
def test_a_last_batch_the_real_run_must_reach_costs_no_confirmation(script: Path, rows: int, other: int) -> None:
    # a failing batch that is no planned last batch; or the loader with the batch of one has
    # the shortest real pass of all planned ones (zip reaches its end in the real run too)
    def behave(source: str, request: RunRequest) -> RunResult:
        return last_batch_failed(script, rows, other=other) if "boom1" in source else booms(script)(source, request)

    runner = ScriptedRunner(script, behave)
    assert loop(script, runner).run().status is Status.FIXED
    assert all(r.limits.cut_batches for r in runner.requests)


# the harness's attribution, for real ---------------------------------------------------------

FAULT_PROBE = '''
NAME = "fault"


def install(run):
    def dataloader_iter(call, self):
        return _batches(call(self))

    def _batches(iterator):
        for batch in iterator:
            raise MemoryError()
            yield batch

    run.torch_hooks().dataloader("__iter__", dataloader_iter)
'''

LOADER_SCRIPT = """import torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4)
for (x,) in loader:
    print(x.shape)
print("done")
"""

# errors of the script that reach it through the harness's wrappers: the patched DataLoader
# (its __init__, a cut pass's batches, the collate), the file guard's open, a forward, a
# warning the target-size probe makes an error of
USER_ERRORS = {
    "collate": """import torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.zeros(i + 1)
for x in DataLoader(D(), batch_size=4):
    pass
""",
    "loader_arguments": """import torch
from torch.utils.data import DataLoader, TensorDataset
DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4, shuffle=True, sampler=[1, 2])
""",
    "missing_file": 'open("no_such_file.csv").read()\n',
    "target_size_warning": """import torch
import torch.nn.functional as F
pred = torch.randn(4, 1, requires_grad=True)
F.mse_loss(pred, torch.randn(4)).backward()
""",
    "forward_shape": """import torch
from torch import nn
model = nn.Sequential(nn.Flatten(), nn.Linear(5, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 3)).sum().backward()
""",
}


@pytest.mark.torch
def test_the_harness_tells_its_own_failure_from_the_scripts(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    probe = tmp_path / "patterns" / "fault" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(FAULT_PROBE, encoding="utf-8")
    (tmp_path / "train.py").write_text(LOADER_SCRIPT, encoding="utf-8")
    for name, source in USER_ERRORS.items():
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    env = {"OMP_NUM_THREADS": "1"}
    # forks of this worker's warm server (a run behaves as a fresh process: tests/test_harness.py)
    with shared_runner.runs_under(tmp_path / "scratch") as runner:
        traced = runner.run(RunRequest(script=tmp_path / "train.py", cwd=tmp_path, probe_files=(probe,), env=env))
        assert traced.failure is not None and traced.failure.exc_type == "MemoryError"
        assert traced.failure.harness_frame is not None
        assert (traced.failure.harness_frame.file, traced.failure.harness_frame.function) == (str(probe), "_batches")
        assert traced.failure.user_frame is not None and traced.failure.user_frame.line == 4
        plain = runner.run(RunRequest(script=tmp_path / "train.py", cwd=tmp_path, probe_files=(probe,), env=env,
                                      plain=True))
        assert plain.passed and "done" in plain.stdout
        for name in USER_ERRORS:
            run = runner.run(RunRequest(script=tmp_path / f"{name}.py", cwd=tmp_path, env=env,
                                        probes=frozenset({"inplace-ops", "conv-history", "target-size-warning"})))
            assert run.failure is not None and run.failure.user_frame is not None, name
            assert run.failure.harness_frame is None, (name, run.failure)


MODEL_SCRIPT = """import torch
from torch import nn
model = nn.Linear(3, 1)
x = torch.randn(4, 3)
print(model(x).sum().item())
print("done")
"""

LAUNCH = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()];"
    "from repairbot.cli import main; sys.exit(main())"
)


@pytest.mark.torch
def test_a_core_probe_that_fails_is_reported_as_repairbots_failure(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("repairbot", "patterns"):
        shutil.copytree(ROOT / name, tree / name, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")
    # the fault: an instrumented object's attribute that is not there, in the forward pre-hook
    # that counts the run's progress (called by torch inside the script's model(x))
    progress = tree / "repairbot" / "trace" / "harness" / "probes" / "progress.py"
    source = progress.read_text(encoding="utf-8")
    anchor = "        state.forwards += 1\n"
    assert anchor in source
    progress.write_text(source.replace(anchor, anchor + "        state.forwards_seen += 1\n", 1), encoding="utf-8")

    repo = init_repo(tmp_path / "project")
    working = MODEL_SCRIPT
    (repo / "train.py").write_text(working, encoding="utf-8")
    (repo / "broken.py").write_text(working + 'raise ValueError("the script\'s own bug")\n', encoding="utf-8")
    commit_all(repo)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    for name, plain_status in (("train.py", "passed"), ("broken.py", "failed")):
        report_path = tmp_path / f"{name}.json"
        result = subprocess.run(
            [PYTHON, "-c", LAUNCH, "fix", name, "--dry-run", "--no-health", "--json", str(report_path)],
            cwd=repo, env=env, capture_output=True, text=True, timeout=600, check=False,
        )
        assert result.returncode == 2, result.stdout + result.stderr
        assert "[HARNESS ERROR] repairbot/trace/harness/probes/progress.py:" in result.stdout
        assert "no-pattern" not in result.stdout and "[FAILED]" not in result.stdout
        report = json.loads(report_path.read_text(encoding="utf-8"))
        jsonschema.Draft202012Validator(report_schema()).validate(report)
        assert (report["status"], report["stop_reason"]) == ("error", "harness-error")
        fault = report["harness_error"]
        assert (fault["exc_type"], fault["harness_function"]) == ("AttributeError", "forward_pre_hook")
        assert (fault["file"], fault["line"]) == (name, 5)
        assert fault["plain_run"]["status"] == plain_status
        if plain_status == "failed":
            assert (fault["plain_run"]["exc_type"], fault["plain_run"]["line"]) == ("ValueError", 7)
            assert "Without the harness: the script fails with ValueError: the script's own bug at broken.py:7" in result.stdout
        else:
            assert "Without the harness: the script runs to its end (exit 0)" in result.stdout
    # doctor's one traced run too
    result = subprocess.run(
        [PYTHON, "-c", LAUNCH, "doctor", "broken.py"], cwd=repo, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "[HARNESS ERROR] repairbot/trace/harness/probes/progress.py:" in result.stdout
    assert "Status: ERROR | Stop reason: harness-error" in result.stdout


def test_a_last_batch_planned_only_at_the_scripts_own_batch_size_is_confirmed_at_the_real_length(script: Path) -> None:
    # a forced --batch-size made every batch one sample; at the script's own batch size the cut
    # passes plan the loaders' real last batches, and zip reaches the longer one's batch of one
    def behave(source: str, request: RunRequest) -> RunResult:
        if request.limits.force_batch_size:
            return failed(script, "BoomError", "boom1", forced=True)
        return last_batch_failed(script, 1) if request.limits.cut_batches else passed()

    runner = ScriptedRunner(script, behave)
    result = loop(script, runner).run()
    assert (result.status, result.attempts) == (Status.ALREADY_PASSING, ())
    assert [(r.limits.force_batch_size, r.limits.cut_batches) for r in runner.requests] == [
        (True, True), (False, True), (False, False),
    ]
    assert any("cut passes" in note for note in result.notes)
