"""The command line's contract: bad input, exit codes, the catalogue and classify."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from repairbot.cli import main
from tests.support import (
    ROOT,
    SharedWarmRunner,
    commit_all,
    init_repo,
    run_cli,
    run_cli_in_process,
    snapshot,
)

SPECIMEN = ROOT / "tests" / "data" / "tracebacks" / "linear-in-features" / "full-lost-first-char.txt"


def invoke(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), input=input)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("print('hello')\n")
    (repo / "broken.py").write_text("def f(:\n    pass\n")
    (repo / "data.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (repo / "empty.py").write_text("")
    (repo / "folder").mkdir()
    (repo / "folder" / "x.py").write_text("x = 1\n")
    commit_all(repo)
    return repo


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fix", "missing.py"], "missing.py: no such file"),
        (["fix", "folder"], "folder: is a directory"),
        (["fix", "broken.py"], "broken.py:1: syntax error"),
        (["fix", "data.bin"], "not a Python source file"),
        (["fix", "empty.py"], "the file is empty"),
        (["fix", "train.py", "--max-attempts", "0"], "--max-attempts must be at least 1"),
        (["fix", "train.py", "--pattern", "no-such-pattern"], "unknown pattern id: no-such-pattern"),
        (["fix", "train.py", "--dry-run", "--no-branch"], "exclude each other"),
        (["fix", "train.py", "--python", "/nonexistent/python"], "no such interpreter"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(repo: Path, args: list[str], message: str) -> None:
    before = snapshot(repo)
    result = run_cli(*args, cwd=repo)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("repairbot: error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    "args",
    [
        ["fix", "missing.py", "--json", "-"],  # a refusal: exit 2, the error report on stdout
        ["lint", "broken.py", "train.py", "--format", "json"],  # a finding of a parse error: exit 2
        ["fix", "train.py", "--frobnicate"],  # click's usage error
        ["patterns"],
    ],
)
def test_the_cli_in_process_gives_what_the_real_command_gives(repo: Path, args: list[str]) -> None:
    """tests.support.run_cli_in_process stands for run_cli in many tests: the same exit code,
    stdout and stderr (timings aside)."""
    real = run_cli(*args, cwd=repo)
    in_process = run_cli_in_process(*args, cwd=repo)

    def timeless(text: str) -> str:
        return re.sub(r"\d+\.\d+ s\b", "<s>", text)

    assert (in_process.returncode, timeless(in_process.stdout), timeless(in_process.stderr)) == (
        real.returncode, timeless(real.stdout), timeless(real.stderr)
    )


def test_unknown_option_is_a_usage_error(repo: Path) -> None:
    result = run_cli("fix", "train.py", "--frobnicate", cwd=repo)
    assert result.returncode == 2 and "No such option: --frobnicate" in result.stderr


def test_not_a_git_repository_suggests_the_other_modes(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    result = run_cli("fix", "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "git" in result.stderr and "--no-branch" in result.stderr and "--dry-run" in result.stderr


def test_modified_script_is_refused_in_branch_mode(repo: Path) -> None:
    (repo / "train.py").write_text("print('changed')\n")
    before = snapshot(repo)
    result = run_cli("fix", "train.py", cwd=repo)
    assert result.returncode == 2 and "train.py is modified" in result.stderr
    assert snapshot(repo) == before


def test_existing_branch_name_is_refused(repo: Path) -> None:
    from tests.support import git

    git(repo, "branch", "taken")
    result = run_cli("fix", "train.py", "--branch", "taken", cwd=repo)
    assert result.returncode == 2 and "taken" in result.stderr


def test_error_report_is_written_for_bad_input(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = run_cli("fix", "missing.py", "--json", str(out), cwd=repo)
    assert result.returncode == 2
    report = json.loads(out.read_text())
    assert (report["status"], report["stop_reason"]) == ("error", "bad-input")
    assert "no such file" in report["error"]


def test_patterns_lists_the_catalogue() -> None:
    result = invoke("patterns")
    assert result.exit_code == 0
    assert "linear-in-features" in result.output and "map-location" in result.output
    catalogue = json.loads(invoke("patterns", "--json").output)
    entry = next(p for p in catalogue if p["id"] == "map-location")
    assert entry["applicability"] == "safe" and entry["what_it_fixes"]


def test_classify_a_log_file() -> None:
    result = invoke("classify", str(SPECIMEN), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["pattern"] == "linear-in-features"
    assert data["exc_type"] == "RuntimeError"
    assert (data["file"], data["line"]) == ("/root/workspace/tabular-vae/network.py", 27)


def test_classify_from_stdin_with_ci_noise() -> None:
    log = (
        "2024-05-01T10:00:00.0000000Z \x1b[36m$ python train.py --epochs 1\x1b[0m\n"
        "2024-05-01T10:00:05.0000000Z Traceback (most recent call last):\n"
        '2024-05-01T10:00:05.0000000Z   File "/home/runner/work/proj/train.py", line 12, in <module>\n'
        "2024-05-01T10:00:05.0000000Z     state = torch.load(path)\n"
        "2024-05-01T10:00:05.0000000Z RuntimeError: Attempting to deserialize object on a CUDA device but "
        "torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use torch.load "
        "with map_location=torch.device('cpu') to map your storages to the CPU.\n"
        "2024-05-01T10:00:05.0000000Z ##[error]Process completed with exit code 1.\n"
    )
    result = invoke("classify", "-", "--json", input=log)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["pattern"] == "map-location"
    assert (data["file"], data["line"]) == ("/home/runner/work/proj/train.py", 12)
    assert data["command"] == "python train.py --epochs 1"


def test_classify_no_match_and_bad_input(tmp_path: Path) -> None:
    plain = tmp_path / "log.txt"
    plain.write_text("all good, nothing failed\n")
    assert invoke("classify", str(plain)).exit_code == 1
    other = tmp_path / "other.txt"
    other.write_text('Traceback (most recent call last):\n  File "t.py", line 1, in <module>\nKeyError: \'x\'\n')
    result = invoke("classify", str(other), "--json")
    assert result.exit_code == 1 and json.loads(result.output)["pattern"] is None
    assert invoke("classify", str(tmp_path / "missing.txt")).exit_code == 2


@pytest.mark.torch
@pytest.mark.parametrize(("state", "word"), [("untracked", "untracked"), ("modified", "modified")])
def test_imported_module_must_be_committed_in_branch_mode(tmp_path: Path, state: str, word: str, shared_runner: SharedWarmRunner) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("import helpers\nraise ValueError(helpers.NAME)\n")
    (repo / "helpers.py").write_text("NAME = 'committed'\n")
    if state == "untracked":
        (repo / ".gitignore").write_text("")
        commit_all(repo)
        from tests.support import git

        git(repo, "rm", "-q", "--cached", "helpers.py")
        git(repo, "commit", "-q", "-m", "untrack helpers")
    else:
        commit_all(repo)
        (repo / "helpers.py").write_text("NAME = 'edited'\n")
    before = snapshot(repo)
    result = run_cli_in_process("fix", "train.py", cwd=repo, runner=shared_runner)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"helpers.py is {word} and the script imports it" in result.stderr
    assert "--no-branch" in result.stderr
    assert snapshot(repo) == before
    # the same repair without a branch is allowed (and finds nothing to fix here)
    assert run_cli_in_process("fix", "train.py", "--dry-run", cwd=repo, runner=shared_runner).returncode == 1


# ---------------------------------------------------------------------------------------------
# Installing: scripts/setup.sh's torch step, repairbot without torch
# ---------------------------------------------------------------------------------------------


def _fake_program(folder: Path, name: str, exit_code: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text(f"#!/bin/sh\nexit {exit_code}\n")
    program.chmod(0o755)


@pytest.fixture(scope="module")
def cpu_index(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A reachable stand-in for the PyTorch CPU wheel index, on localhost."""
    import functools
    import http.server
    import threading

    root = tmp_path_factory.mktemp("index")
    (root / "torch").mkdir()
    (root / "torch" / "index.html").write_text("<a href='torch-2.13.0+cpu.whl'>torch</a>\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.mark.parametrize(
    ("torch_there", "gpu", "index_up", "plan"),
    [
        (True, True, True, "keep"),
        (True, False, False, "keep"),
        (False, True, True, "install torch==2.13.0"),  # a GPU machine: the default (CUDA) build
        (False, False, True, "install --index-url {index} torch==2.13.0"),  # the CPU build
        (False, False, False, "install torch==2.13.0"),  # CPU index unreachable: the configured one
        (False, None, True, "install --index-url {index} torch==2.13.0"),  # no nvidia-smi at all
    ],
)
def test_setup_installs_the_torch_the_machine_needs(
    tmp_path: Path, cpu_index: str, torch_there: bool, gpu: bool | None, index_up: bool, plan: str
) -> None:
    import os
    import subprocess
    import sys

    venv, tools = tmp_path / "venv", tmp_path / "bin"
    _fake_program(venv / "bin", "python", 0 if torch_there else 1)  # `import torch` works or not
    tools.mkdir()
    if gpu is not None:
        _fake_program(tools, "nvidia-smi", 0 if gpu else 9)  # 9: installed, but no driver
    for name in ("bash", "dirname", "cat"):
        (tools / name).symlink_to(subprocess.run(["which", name], capture_output=True, text=True).stdout.strip())
    index = cpu_index if index_up else "http://127.0.0.1:1/"
    env = {**os.environ, "PATH": str(tools), "VENV": str(venv), "PYTHON": sys.executable, "TORCH_CPU_INDEX": index}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh"), "--print-plan"], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == plan.format(index=index)


def test_fix_and_doctor_refuse_an_interpreter_without_torch(repo: Path, tmp_path: Path) -> None:
    import venv

    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = str(bare / "bin" / "python")
    for command in ("fix", "doctor"):
        before = snapshot(repo)
        result = run_cli(command, "train.py", "--python", python, cwd=repo)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.strip().splitlines() == [result.stderr.strip()]
        assert result.stderr.startswith(f"repairbot: error: {python} has no torch"), result.stderr
        assert snapshot(repo) == before


@pytest.mark.slow
def test_the_wheel_installs_and_works_without_torch(tmp_path: Path) -> None:
    """pip install of the built wheel into a fresh venv: no torch comes with it; lint, classify
    and patterns work; fix stops at once, naming the interpreter that lacks torch."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True, capture_output=True, env=env, cwd=tmp_path,
    )
    (wheel,) = wheels.glob("repairbot-*.whl")
    # this pip installs into the venv (pip --python): the venv needs no pip of its own (ensurepip's ~4 CPU-s)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, env=env)
    python, bin_dir = tmp_path / "venv" / "bin" / "python", tmp_path / "venv" / "bin"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    install = subprocess.run([*pip, "install", "-q", str(wheel)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert install.returncode == 0, install.stderr
    freeze = subprocess.run([*pip, "freeze"], capture_output=True, text=True, env=env).stdout
    assert "repairbot" in freeze and not any(line.lower().startswith(("torch", "nvidia")) for line in freeze.splitlines())

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / "repairbot"), *args], capture_output=True, text=True, input=stdin, env=env, cwd=tmp_path)

    (tmp_path / "train.py").write_text("import torch\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n")
    lint = cli("lint", "train.py")
    assert lint.returncode == 1 and "missing-zero-grad" in lint.stdout, lint.stdout + lint.stderr
    classify = cli("classify", "--json", stdin=SPECIMEN.read_text())
    assert classify.returncode == 0 and json.loads(classify.stdout)["pattern"] == "linear-in-features"
    patterns = cli("patterns", "--json")
    assert patterns.returncode == 0 and any(p["id"] == "map-location" for p in json.loads(patterns.stdout))
    fix = cli("fix", "train.py", "--dry-run")
    assert fix.returncode == 2, fix.stdout + fix.stderr
    assert fix.stderr.strip() == f"repairbot: error: {python} has no torch: install torch there (https://pytorch.org/get-started/locally/) or name an interpreter that has it with --python"


# ---------------------------------------------------------------------------------------------
# Output that tells the truth: -q, --dry-run, hints, Markdown code spans, one word per concept
# ---------------------------------------------------------------------------------------------


def test_unknown_option_after_the_script_suggests_the_double_dash(repo: Path) -> None:
    result = run_cli("fix", "--timeout", "9", "train.py", "--epochs", "3", cwd=repo)
    assert result.returncode == 2 and "No such option: --epochs" in result.stderr
    assert "go after `--`: repairbot fix train.py [OPTIONS] -- --epochs" in result.stderr
    assert "Traceback" not in result.stderr
    typo = run_cli("doctor", "train.py", "--timout", "3", cwd=repo)  # a typo of ours: click's suggestion
    assert typo.returncode == 2 and "Did you mean '--timeout'?" in typo.stderr and "`--`" not in typo.stderr
    before = run_cli("fix", "--epochs", "3", "train.py", cwd=repo)  # before SCRIPT: repairbot's own
    assert before.returncode == 2 and "No such option '--epochs'" in before.stderr and "`--`" not in before.stderr


def test_usage_error_hint_only_when_the_script_got_no_arguments() -> None:
    from repairbot.trace.runner import _exit_message

    usage = "usage: train.py [-h] --data DATA\ntrain.py: error: the following arguments are required: --data\n"
    assert "after `--`" in _exit_message(2, usage, had_args=False)
    given = _exit_message(2, usage.replace("the following arguments are required: --data", "unrecognized arguments: --epoch 1"), had_args=True)
    assert given == "the script exited with code 2: train.py: error: unrecognized arguments: --epoch 1"


def test_classify_on_a_terminal_says_it_reads_stdin(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    main_fd, terminal = os.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "repairbot", "classify"], stdin=terminal, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        )
        os.close(terminal)
        terminal = -1
        first = child.stderr.readline() if child.stderr else ""  # said before it blocks on the terminal
        assert first.startswith("repairbot: reading the log from stdin (paste it, then Ctrl-D")
        os.write(main_fd, b"all good\n\x04")
        out, err = child.communicate(timeout=60)
    finally:
        os.close(main_fd)
        if terminal != -1:
            os.close(terminal)
    assert child.returncode == 1 and out == "no traceback found\n", err
    piped = invoke("classify", input="all good\n")  # not a terminal: no word on stderr
    assert piped.exit_code == 1 and "reading" not in piped.output


def test_dry_run_and_quiet_say_what_happened(tmp_path: Path) -> None:
    from dataclasses import replace

    from repairbot.output.markdown import render_markdown
    from repairbot.output.report import render_text, status_line
    from tests.test_reports import _report

    committed = _report(tmp_path)
    assert render_text(committed).splitlines()[-1] == "Status: SUCCESS | Errors Fixed: 1 | Files Modified: model.py"
    assert status_line(committed) == (
        "Status: SUCCESS | Errors Fixed: 1 | Files Modified: model.py | Branch: repairbot/fix-model-12345678"
    )
    dry = replace(committed, branch=None, commit=None, dry_run=True)
    expected = "Status: SUCCESS | Errors Fixed: 1 | Files Modified: none (dry run; would modify model.py)"
    assert render_text(dry).splitlines()[-1] == status_line(dry) == expected
    assert "| Files modified | none (dry run; would modify `model.py`) |" in render_markdown(dry, tmp_path)


def test_markdown_renders_code_spans_of_summaries_and_remedies(tmp_path: Path) -> None:
    from dataclasses import replace

    from repairbot.output.markdown import inline, render_markdown
    from tests.test_reports import _report, html

    assert inline("Changed `nn.Linear(256, 10)` to `nn.Linear(512, 10)` <b>") == (
        "Changed `nn.Linear(256, 10)` to `nn.Linear(512, 10)` \\<b\\>"
    )
    report = _report(tmp_path)
    attempt = report.attempts[0]
    assert attempt.fix is not None
    site = replace(attempt.fix.site, summary="Changed `nn.Linear(256, 10)` to `nn.Linear(512, 10)`")
    report = replace(report, attempts=(replace(attempt, fix=replace(attempt.fix, site=site)), *report.attempts[1:]))
    rendered = html(render_markdown(report, tmp_path))
    assert "Changed <code>nn.Linear(256, 10)</code> to <code>nn.Linear(512, 10)</code>" in rendered
    assert "pad the <code>samples</code>" in rendered  # a remedy's span
    assert "\\`" not in render_markdown(report, tmp_path).split("### Diff")[0]


def test_diagnose_only_is_one_word_in_text_json_and_sarif() -> None:
    text = invoke("patterns").output
    assert "diagnose-only" in text and "display-only" not in text
    catalogue = json.loads(invoke("patterns", "--json").output)
    kinds = {p["applicability"] for p in catalogue if not p["fixes"]}
    assert kinds == {"diagnose-only"}
    line = next(line for line in text.splitlines() if line.startswith("cuda-oom "))
    assert line.split()[1] == "diagnose-only"


@pytest.mark.torch
def test_quiet_and_dry_run_on_a_real_repair(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    import shutil

    repo = init_repo(tmp_path / "repo")
    for source in (ROOT / "fixtures" / "cnn_flatten_size").glob("*.py"):
        shutil.copy(source, repo / source.name)
    commit_all(repo)
    dry = run_cli_in_process("fix", "train.py", "--dry-run", cwd=repo, runner=shared_runner)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.splitlines()[-1] == (
        "Status: SUCCESS | Errors Fixed: 1 | Files Modified: none (dry run; would modify train.py)"
    )
    quiet = run_cli_in_process("fix", "train.py", "-q", cwd=repo, runner=shared_runner)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    (line,) = quiet.stdout.splitlines()
    assert line.startswith("Status: SUCCESS | Errors Fixed: 1 | Files Modified: train.py | Branch: repairbot/fix-train-")
    assert quiet.stderr == ""


def test_evidence_locations_are_repository_relative(tmp_path: Path) -> None:
    from repairbot.analysis import place, place_in
    from repairbot.types import Frame

    repo = init_repo(tmp_path / "repo")
    (repo / "models").mkdir()
    net = repo / "models" / "net.py"
    net.write_text("x = 1\n")
    # the same form as the reports' files, never the bare name
    assert place(Frame(file=str(net), line=3, function="f", user=True)) == "models/net.py:3"
    assert place_in(net, 7) == "models/net.py:7"
    assert place(Frame(file="models/net.py", line=3, function="f", user=True)) == "models/net.py:3"


def test_the_run_options_are_the_run_configuration() -> None:
    """fix's and doctor's limits are RunConfig's fields: one option each, with its default and
    help, parsed into the RunConfig the API gets; the runner's limits, the report's limits and
    the harness's config come from the same declaration."""
    from repairbot import api
    from repairbot.cli import doctor as doctor_cli
    from repairbot.cli import fix as fix_cli
    from repairbot.run_config import DEFAULTS, DOCTOR, FIX, SETTINGS, RunConfig, pop_config
    from repairbot.trace.runner import Limits, RunRequest
    from repairbot.types import RunLimits

    for command, name in ((fix_cli, FIX), (doctor_cli, DOCTOR)):
        options = {opt: param for param in command.params for opt in param.opts}
        for setting in SETTINGS:
            if name not in setting.commands:
                assert setting.option not in options, (name, setting.option)
                continue
            param = options[setting.option]
            assert param.help == setting.help and param.name == setting.parameter
            assert param.is_flag if setting.flag else param.default == setting.default, setting.option
        values = command.make_context(name, ["train.py"]).params
        assert pop_config(values, name) == DEFAULTS == RunConfig()
        assert not set(values) & {s.parameter for s in SETTINGS}  # taken out: the rest are the API's options
    given = fix_cli.make_context("fix", ["train.py", "--batch-size", "3", "--max-steps", "7", "--timeout", "9",
                                         "--max-attempts", "1", "--no-health"]).params
    config = pop_config(given, FIX)
    assert config == RunConfig(batch_size=3, max_steps=7, timeout=9.0, max_attempts=1, health=False)
    assert api.FixOptions(script=Path("t.py")).config == api.DoctorOptions(script=Path("t.py")).config == DEFAULTS
    # the harness gets every limit it uses from its config, always (it has no defaults of its own)
    harness = {s.name for s in SETTINGS if s.harness}
    sent = Limits.of(config).to_json()
    assert {k: sent[k] for k in harness} == {"batch_size": 3, "max_batches": 2, "max_steps": 7, "health": False}
    assert set(sent) == {"batch_size", "max_batches", "max_steps", "health", "force_batch_size", "cut_batches", "step_budget"}
    assert Limits() == Limits.of(DEFAULTS) and RunRequest(script=Path("/t.py")).timeout == DEFAULTS.timeout
    assert (RunLimits().batch_size, RunLimits().max_batches, RunLimits().max_steps) == (
        DEFAULTS.batch_size, DEFAULTS.max_batches, DEFAULTS.max_steps)


def test_the_readme_states_the_run_configurations_defaults() -> None:
    from repairbot.run_config import SETTINGS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for setting in SETTINGS:
        if setting.flag:
            assert f"| `{setting.option}` / " in readme and "| health on, not strict |" in readme
            continue
        row = re.search(rf"^\| `{re.escape(setting.option)} [A-Z]+` \| (?P<default>[^|]+) \|", readme, re.MULTILINE)
        assert row is not None, setting.option
        assert row["default"].strip() == setting.input_default, setting.option
