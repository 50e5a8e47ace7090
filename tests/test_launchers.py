"""Scripts run under a launcher (`repairbot fix SCRIPT --launcher 'torchrun --nproc_per_node 2'`),
through the real CLI: every rank traced, the first rank's failure reported, the fix verified
under the same launcher, nothing left behind.

The script is tests/data/ddp_classifier.py (gloo on the CPU, a DistributedSampler, DDP); the
accelerate run is tests/data/accelerate_classifier.py. Both take 12 features.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import jsonschema
import psutil
import pytest

from repairbot.evidence import Evidence, RankRecord
from repairbot.launchers import (
    ACCELERATE,
    TORCHRUN,
    Launcher,
    LauncherError,
    parse_launcher,
    split_command,
)
from repairbot.output.report import report_schema
from repairbot.trace.runner import BOOTSTRAP, RunRequest, first_failed_rank, launch_argv
from repairbot.types import Failure
from tests.support import (
    PYTHON,
    commit_all,
    default_sigint,
    git,
    init_repo,
    run_cli,
    unmet_requirement,
)

DATA = Path(__file__).parent / "data"
SCRIPT = (DATA / "ddp_classifier.py").read_text()
RIGHT = "nn.Linear(12, 8)"
WRONG = "nn.Linear(10, 8)"
TORCHRUN_2 = "torchrun --nproc_per_node 2"
# only rank 1 runs these lines, and fails there: its probe head is sized for 10 features
RANK_1_CRASH = (
    "    dataset = TensorDataset(features, labels)\n"
    "    if dist.get_rank() == 1:\n"
    "        print('probe logits', nn.Linear(10, 3)(features).shape)\n"
)
# every rank waits forever before the rendezvous
HANG = '    time.sleep(600)\n    dist.init_process_group("gloo")\n'


def make_repo(tmp_path: Path, source: str, name: str = "train.py") -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / name).write_text(source)
    commit_all(repo)
    return repo


def fix(repo: Path, tmp_path: Path, *options: str) -> tuple[dict, str]:
    report_path = tmp_path / "report.json"
    result = run_cli("fix", "train.py", "--json", str(report_path), *options, cwd=repo, timeout=400)
    output = result.stdout + result.stderr
    assert report_path.exists(), output
    return json.loads(report_path.read_text()), output


def processes_in(folder: Path) -> list[psutil.Process]:
    """Live processes whose working directory is ``folder`` (the runs' ranks and launcher)."""
    found = []
    for process in psutil.process_iter(["pid"]):
        try:
            if Path(process.cwd()) == folder and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def gone(pid: int) -> bool:
    """The process has ended (a zombie has too: only its parent's reaping is left)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _runs_bootstrap(process: psutil.Process) -> bool:
    try:
        return any(word.endswith("bootstrap.py") for word in process.cmdline())
    except psutil.Error:
        return False


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


# --------------------------------------------------------------------------------------------
# The command form (no torch)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "options", "gives_port"),
    [
        ("torchrun --nproc_per_node 2", TORCHRUN, ("--nproc_per_node", "2"), False),
        ("torchrun --nproc-per-node=2 --standalone", TORCHRUN, ("--nproc-per-node=2", "--standalone"), True),
        ("python -m torch.distributed.run --nproc_per_node 2 --master-port 29700", TORCHRUN,
         ("--nproc_per_node", "2", "--master-port", "29700"), True),
        ("torchrun --nnodes 1 --nproc_per_node 2 --rdzv_endpoint localhost:0", TORCHRUN,
         ("--nnodes", "1", "--nproc_per_node", "2", "--rdzv_endpoint", "localhost:0"), True),
        ("accelerate launch --multi_gpu --num_processes 2", ACCELERATE, ("--multi_gpu", "--num_processes", "2"), False),
        ("accelerate launch --num-processes 2 --main-process-port 29701", ACCELERATE,
         ("--num-processes", "2", "--main-process-port", "29701"), True),
    ],
)
def test_launcher_option_is_read(text: str, kind: str, options: tuple[str, ...], gives_port: bool) -> None:
    launcher = parse_launcher(text)
    assert (launcher.kind, launcher.options, launcher.gives_port()) == (kind, options, gives_port)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("deepspeed --num_gpus 2", "not a launcher repairbot knows"),
        ("accelerate", "not a launcher repairbot knows"),
        ("", "not a launcher repairbot knows"),
        ("torchrun --nproc_per_node 2 train.py", "'train.py' is not an option of torchrun"),
        ("accelerate launch --cpu train.py --epochs 1", "'train.py' is not an option of accelerate launch"),
        ("torchrun --standalone -m pkg.train", "torchrun -m would run something else than SCRIPT"),
        ("torchrun --no-python", "--no-python would run something else"),
        ("torchrun --help", "--help would run something else"),
        ("torchrun --nnodes 2 --nproc_per_node 2", "--nnodes 2: repairbot runs every rank on this machine"),
        ("accelerate launch --num_machines=2", "--num_machines 2: repairbot runs every rank on this machine"),
        ("torchrun --nproc_per_node", "--nproc_per_node needs a value"),
        ("torchrun 'unclosed", "No closing quotation"),
    ],
)
def test_bad_launcher_is_refused(text: str, message: str) -> None:
    with pytest.raises(LauncherError, match=re.escape(message)):
        parse_launcher(text)


def test_a_command_line_is_split_at_the_script() -> None:
    words = ["torchrun", "--nproc_per_node", "2", "--standalone", "train.py", "--epochs", "1"]
    assert split_command(words, "cmd") == (Launcher(TORCHRUN, ("--nproc_per_node", "2", "--standalone")), ["train.py", "--epochs", "1"])
    words = ["accelerate", "launch", "--multi_gpu", "--num_processes=2", "-m", "pkg.train", "--lr", "1"]
    assert split_command(words, "cmd") == (Launcher(ACCELERATE, ("--multi_gpu", "--num_processes=2")), ["-m", "pkg.train", "--lr", "1"])
    assert split_command(["python", "train.py", "--epochs", "1"], "cmd") is None


def test_launcher_runs_its_module_and_chooses_a_port_only_where_none_is_given() -> None:
    launcher = parse_launcher("python3 -m torch.distributed.run --nproc_per_node 2")
    assert launcher.module == "torch.distributed.run" and launcher.text() == "torchrun --nproc_per_node 2"
    assert launcher.port_options(40001) == ("--master_port", "40001")
    assert parse_launcher("accelerate launch").port_options(40002) == ("--main_process_port", "40002")


def test_a_free_rendezvous_port_is_added_only_where_the_options_set_none(tmp_path: Path) -> None:
    script, config = tmp_path / "train.py", tmp_path / "config.json"
    argv, note = launch_argv(RunRequest(script=script, python="py", launcher=parse_launcher(TORCHRUN_2)), config)
    port = int(argv[argv.index("--master_port") + 1])
    assert argv == ["py", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                    str(BOOTSTRAP), str(config)]
    assert f"rendezvous port {port}" in note and port_is_free(port)
    given = parse_launcher("accelerate launch --num_processes 2 --main_process_port=29650")
    argv, note = launch_argv(RunRequest(script=script, python="py", launcher=given), config)
    assert argv == ["py", "-m", "accelerate.commands.launch", *given.options, str(BOOTSTRAP), str(config)] and note == ""
    # without a launcher: the harness's bootstrap, as always
    assert launch_argv(RunRequest(script=script, python="py"), config) == (["py", str(BOOTSTRAP), str(config)], "")


def _evidence(rank: int, failed_at: float | None, failed: bool = True) -> Evidence:
    failure = Failure(exc_type="RuntimeError", message=f"rank {rank}") if failed else None
    return Evidence(outcome="failed" if failed else "passed", exit_code=1 if failed else 0, failure=failure,
                    rank=RankRecord(rank=rank, world_size=3, failed_at=failed_at))


def test_the_rank_that_failed_first_is_reported() -> None:
    later, first, passed = _evidence(0, 200.0), _evidence(2, 100.0), _evidence(1, None, failed=False)
    assert first_failed_rank([later, passed, first]) is first
    # no failure: the lowest rank's record
    assert first_failed_rank([_evidence(1, None, False), _evidence(0, None, False)]).rank.rank == 0  # type: ignore[union-attr]
    # a rank the harness stopped, before one that passed: the run did not pass
    stopped = replace(_evidence(1, None, False), outcome="stopped")
    assert first_failed_rank([_evidence(0, None, False), stopped]) is stopped
    assert first_failed_rank([]) is None


@pytest.mark.parametrize("command", ["fix", "doctor"])
@pytest.mark.parametrize(
    ("launcher", "message"),
    [
        ("deepspeed --num_gpus 2", "not a launcher repairbot knows"),
        ("torchrun --nproc_per_node 2 train.py", "'train.py' is not an option of torchrun"),
    ],
)
def test_cli_refuses_a_bad_launcher_with_one_line(tmp_path: Path, command: str, launcher: str, message: str) -> None:
    repo = make_repo(tmp_path, SCRIPT)
    result = run_cli(command, "train.py", "--launcher", launcher, cwd=repo, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("repairbot: error: --launcher") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.torch
@pytest.mark.slow
def test_a_launcher_that_refuses_its_options_is_bad_input(tmp_path: Path) -> None:
    """torchrun itself refuses the value: no rank starts, and that is the user's input, not the script."""
    repo = make_repo(tmp_path, SCRIPT)
    result = run_cli("fix", "train.py", "--launcher", "torchrun --nproc_per_node abc", "-q", cwd=repo, timeout=300)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "repairbot: error: --launcher 'torchrun --nproc_per_node abc': the launcher exited with code 1 before "
        "starting any rank: "
    ) and "abc" in line.rpartition("rank: ")[2], line  # torchrun's own last words


@pytest.mark.torch
def test_flag_tables_match_the_installed_launchers() -> None:
    """The options taking no value, as torchrun's and accelerate's own parsers declare them."""
    from repairbot import launchers

    code = (
        "import sys, importlib\n"
        "module, function = sys.argv[1].split(':')\n"
        "parser = getattr(importlib.import_module(module), function)()\n"
        "for action in parser._actions:\n"
        "    if action.nargs == 0 and '-h' not in action.option_strings:\n"
        "        print(' '.join(action.option_strings))\n"
    )
    parsers = {TORCHRUN: "torch.distributed.run:get_args_parser"}
    if unmet_requirement(["accelerate"]) is None:
        parsers[ACCELERATE] = "accelerate.commands.launch:launch_command_parser"
    for kind, parser in parsers.items():
        listed = subprocess.run([PYTHON, "-c", code, parser], capture_output=True, text=True, check=True).stdout
        declared = {launchers._name(option) for line in listed.splitlines() for option in line.split()}
        known = launchers._FLAGS[kind] | launchers._RUNS_SOMETHING_ELSE[kind]
        assert declared <= known, f"{kind}: flags repairbot would take for options with a value"


# --------------------------------------------------------------------------------------------
# Live runs under torchrun (2 gloo ranks on the CPU)
# --------------------------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.slow
def test_wrong_linear_under_torchrun_is_fixed_and_verified_under_it(tmp_path: Path) -> None:
    assert RIGHT in SCRIPT
    repo = make_repo(tmp_path, SCRIPT.replace(RIGHT, WRONG))
    report, output = fix(repo, tmp_path, "--launcher", TORCHRUN_2, "-v")
    assert report["status"] == "fixed", output
    assert [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a] == ["linear-in-features"], output
    assert report["attempts"][0]["failure"]["rank"] in (0, 1)  # both ranks fail alike: the first
    # both runs (the failure, the verification) under torchrun, each on a port of its own
    assert output.count("-m torch.distributed.run --nproc_per_node 2 ") == 2, output
    assert len(set(re.findall(r"rendezvous port (\d+) \(free", output))) == 2, output
    assert "trained, last loss" in output  # the verification run reached the end in rank 0
    assert (repo / "train.py").read_text() == SCRIPT.replace(RIGHT, WRONG)  # the checkout is untouched
    assert git(repo, "show", f"{report['branch']}:train.py") == SCRIPT  # one change, the rest byte-for-byte


@pytest.mark.torch
@pytest.mark.slow
def test_passing_ddp_script_is_already_passing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, SCRIPT)
    report, output = fix(repo, tmp_path, "--launcher", TORCHRUN_2)
    assert report["status"] == "already-passing", output
    assert report["files_modified"] == []
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.torch
@pytest.mark.slow
def test_a_crash_of_rank_1_only_is_reported_from_rank_1_and_fixed_from_its_evidence(tmp_path: Path) -> None:
    source = SCRIPT.replace("    dataset = TensorDataset(features, labels)\n", RANK_1_CRASH)
    repo = make_repo(tmp_path, source)
    report, output = fix(repo, tmp_path, "--launcher", TORCHRUN_2, "--dry-run")
    failure = report["attempts"][0]["failure"]
    crash_line = source.splitlines().index("        print('probe logits', nn.Linear(10, 3)(features).shape)") + 1
    assert (failure["rank"], failure["file"], failure["line"]) == (1, "train.py", crash_line), output
    assert "(in rank 1, the first to fail)" in output
    jsonschema.validate(report, report_schema())  # `rank` is part of the report's contract
    # rank 0 never built that Linear: the fix comes from rank 1's trace, and its rerun passes in both
    assert report["status"] == "fixed", output
    assert report["attempts"][0]["fix"]["pattern"] == "linear-in-features"
    assert "+        print('probe logits', nn.Linear(12, 3)(features).shape)" in report["diff"]
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.torch
@pytest.mark.slow
def test_a_timeout_leaves_no_rank_no_launcher_and_no_port_behind(tmp_path: Path) -> None:
    source = SCRIPT.replace('    dist.init_process_group("gloo")\n', HANG).replace("import os\n", "import os\nimport time\n")
    repo = make_repo(tmp_path, source)
    # the ranks start in seconds: a short timeout, unless a loaded machine starts them later than
    # that (then once more with room), so that the timeout always falls while both ranks run
    for timeout in ("15", "120"):
        report, output = fix(repo, tmp_path, "--launcher", TORCHRUN_2, "--timeout", timeout, "-v", "--dry-run")
        ranks = dict(re.findall(r"rank (\d) pid (\d+)", output))
        if set(ranks) == {"0", "1"}:
            break
    assert report["stop_reason"] == "timeout", output
    assert set(ranks) == {"0", "1"}, output  # both ranks had started before the timeout
    assert all(gone(int(pid)) for pid in ranks.values()), ranks
    assert processes_in(repo) == []
    port = int(re.search(r"rendezvous port (\d+)", output).group(1))  # type: ignore[union-attr]
    assert port_is_free(port)


@pytest.mark.torch
@pytest.mark.slow
def test_ctrl_c_leaves_no_rank_behind(tmp_path: Path) -> None:
    source = SCRIPT.replace('    dist.init_process_group("gloo")\n', HANG).replace("import os\n", "import os\nimport time\n")
    repo = make_repo(tmp_path, source)
    cli = subprocess.Popen(
        [PYTHON, "-m", "repairbot", "fix", "train.py", "--dry-run", "--launcher", TORCHRUN_2],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 180
    # wait for both ranks: the launcher and two workers running bootstrap.py in the repository
    while time.monotonic() < deadline and cli.poll() is None:
        workers = [p for p in processes_in(repo) if _runs_bootstrap(p) and "torch.distributed.run" not in p.cmdline()]
        if len(workers) == 2:
            break
        time.sleep(0.5)
    assert len(workers) == 2, "the ranks never started"
    cli.send_signal(signal.SIGINT)
    _, stderr = cli.communicate(timeout=60)
    assert cli.returncode == 130 and "repairbot: interrupted" in stderr, stderr
    assert processes_in(repo) == []


# --------------------------------------------------------------------------------------------
# accelerate launch
# --------------------------------------------------------------------------------------------


@pytest.mark.torch
@pytest.mark.slow
def test_wrong_linear_under_accelerate_launch_is_fixed(tmp_path: Path) -> None:
    missing = unmet_requirement(["accelerate"])
    if missing:
        pytest.skip(f"accelerate launch: {missing}")
    source = (DATA / "accelerate_classifier.py").read_text()
    assert RIGHT in source
    repo = make_repo(tmp_path, source.replace(RIGHT, WRONG))
    report, output = fix(repo, tmp_path, "--launcher", "accelerate launch --multi_gpu --num_processes 2", "--dry-run", "-v")
    assert report["status"] == "fixed", output
    assert [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a] == ["linear-in-features"], output
    assert output.count("-m accelerate.commands.launch --multi_gpu --num_processes 2 ") == 2, output
    assert "--main_process_port" in output and "trained on 2 processes" in output
    assert report["diff"].count("\n-    ") == 1 and f"+    model = nn.Sequential({RIGHT}" in report["diff"]

