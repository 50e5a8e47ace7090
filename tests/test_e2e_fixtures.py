"""Every fixture, repaired for real: ``repairbot fix`` in a temporary git repository (needs torch).

Checks the exit code, status, stop reason, applied patterns, changed files and line counts,
that the user's checkout is exactly as it was, and that the fix branch really runs: a plain
``python train.py`` with no harness, forked from a per-worker server that imported torch once
(``plain_runner``; tests/test_plain_fork.py checks such a fork against a fresh interpreter), and
in a fresh process under a launcher (torchrun). Checkpoint makers run forked from that server too.
The CLI runs in the test's process, its runs forked from one warm server per worker
(``run_cli_in_process``); the quick fixture and the test of ``--json -`` (stdout holds the JSON
alone) run it as a user does, ``python -m repairbot``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from repairbot.launchers import parse_launcher
from tests.support import (
    PYTHON,
    Fixture,
    PlainForkServer,
    SharedWarmRunner,
    fixtures,
    git,
    prepare_fixture,
    run_cli,
    run_cli_in_process,
    snapshot,
    unmet_requirement,
)
from tests.test_reports import check_markdown, check_sarif, validate_report, validate_sarif

pytestmark = pytest.mark.torch

# health_* fixtures (a `health` key) are silent bugs, not crashes: tests/test_health.py runs them
# notebook_* fixtures (a .ipynb script) run under tests/test_notebook_fixtures.py
FIXTURES = [f for f in fixtures() if "health" not in f.config and not f.config.get("script", "").endswith(".ipynb")]
# the one live end-to-end repair of the quick subset (bash scripts/test.sh --quick): the demo's script
QUICK_FIXTURE = "cnn_flatten_size"


def launcher_words(text: str | None) -> list[str]:
    """A fixture's `launcher` as `python -m` words, on a rendezvous port of its own unless its options set one."""
    return parse_launcher(text).command()[0] if text else []


def prepare(fixture: Fixture, tmp_path: Path, runner: PlainForkServer | None = None) -> Path:
    return prepare_fixture(fixture, tmp_path / "repo", runner)


@pytest.mark.parametrize(
    "fixture",
    [pytest.param(f, id=f.name, marks=[pytest.mark.quick] if f.name == QUICK_FIXTURE else []) for f in FIXTURES],
)
def test_fixture_is_repaired_on_a_new_branch(
    fixture: Fixture, tmp_path: Path, shared_runner: SharedWarmRunner, plain_runner: PlainForkServer,
) -> None:
    config = fixture.config
    if reason := unmet_requirement(config.get("requires", ())):
        pytest.skip(reason)
    repo = prepare(fixture, tmp_path, plain_runner)
    before = snapshot(repo)
    report_path = tmp_path / "report.json"
    # `module`: the fixture runs as `python -m MODULE` (fix -m), with `env` added (PYTHONPATH=src)
    target = ["-m", config["module"]] if config.get("module") else [config.get("script", "train.py")]
    args = [
        "fix", *target, "--json", str(report_path),
        "--markdown", str(tmp_path / "report.md"), "--sarif", str(tmp_path / "report.sarif"),
    ]
    if config.get("launcher"):  # every run under the launcher, as `--launcher 'torchrun --nproc_per_node 2'`
        args += ["--launcher", config["launcher"]]
    if config.get("args"):
        args += ["--", *config["args"]]
    if fixture.name == QUICK_FIXTURE:  # one through the real entry point, in a process of its own
        result = run_cli(*args, cwd=repo, env=config.get("env"))
    else:  # the CLI's code in this process, its runs forked from this worker's one warm server
        result = run_cli_in_process(*args, cwd=repo, env=config.get("env"), runner=shared_runner)
    output = result.stdout + result.stderr
    assert result.returncode == config["exit_code"], output
    report = json.loads(report_path.read_text())
    assert report["status"] == config["status"], output
    assert report["stop_reason"] == config["stop_reason"], output
    applied = [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a and a["outcome"] != "failed-same"]
    assert applied == config["patterns"], output
    assert report["files_modified"] == config["files"]
    for attempt in report["attempts"]:
        if "fix" in attempt:
            changed = [
                line for line in attempt["fix"]["diff"].splitlines()
                if line.startswith("+") and not line.startswith("+++")
            ]
            assert 0 < len(changed) <= config.get("max_changed_lines", 1), attempt["fix"]["diff"]
    if "diff" in config:  # the added lines of all fixes, exactly
        added = [
            line[1:] for attempt in report["attempts"] if "fix" in attempt
            for line in attempt["fix"]["diff"].splitlines() if line.startswith("+") and not line.startswith("+++")
        ]
        assert added == config["diff"], output
    if "diagnosed" in config:  # the pattern whose diagnosis ends the run
        diagnosed = [d["pattern"] for a in report["attempts"] for d in a.get("declined", []) if d["diagnosis"]]
        assert diagnosed[:1] == [config["diagnosed"]], output
    if "diagnosis" in config or "not_in_diagnosis" in config:  # what the ending diagnosis says, and never says
        texts = [d["diagnosis"] for a in report["attempts"] for d in a.get("declined", []) if d["diagnosis"]]
        assert texts, output
        for phrase in config.get("diagnosis", []):
            assert phrase in texts[0], texts[0]
        for phrase in config.get("not_in_diagnosis", []):
            assert phrase not in texts[0], texts[0]

    # The user's checkout is exactly as it was: branch, HEAD, index, files, stash, untracked.
    assert snapshot(repo) == before

    # The four reports: JSON (schema), SARIF (official schema, fixes reproduce the diff),
    # Markdown (failing lines, evidence, diff), text (blocks, then the status line).
    validate_report(report)
    sarif = json.loads((tmp_path / "report.sarif").read_text())
    validate_sarif(sarif)
    check_sarif(sarif, report, repo)
    check_markdown((tmp_path / "report.md").read_text(), report, repo)
    assert re.search(r"^Status: (SUCCESS|FAILED) \|", result.stdout.splitlines()[-1])

    if config["status"] != "fixed":
        assert report["branch"] is None and report["commit"] is None
        assert git(repo, "branch", "--list", "repairbot/*") == ""
        return
    branch = report["branch"]
    stem = config["module"].rpartition(".")[2] if config.get("module") else Path(config.get("script", "train.py")).stem
    assert branch.startswith(f"repairbot/fix-{stem}-")
    assert git(repo, "rev-parse", branch).strip() == report["commit"]
    assert git(repo, "rev-parse", f"{branch}^").strip() == before.head
    changed_files = git(repo, "diff", "--name-only", before.head, branch).split()
    assert changed_files == config["files"]
    message = git(repo, "log", "-1", "--format=%B", branch)
    assert message.startswith("repairbot: fix ")
    for pattern in config["patterns"]:
        assert f"Repairbot-Pattern: {pattern}" in message

    # The fix branch really runs, as a plain `python train.py` (under its launcher) in a checkout of it.
    worktree = tmp_path / "fixed"
    git(repo, "worktree", "add", "-q", str(worktree), branch)
    env = {**os.environ, **config.get("env", {})}
    if config.get("launcher"):  # the launcher starts processes of its own: a fresh interpreter
        plain = subprocess.run(
            [PYTHON, *launcher_words(config["launcher"]), *target, *config.get("args", [])],
            cwd=worktree, capture_output=True, text=True, timeout=300, check=False, env=env,
        )
    else:  # a fork of the warm plain server, no harness (checked equivalent to a fresh one)
        plain = plain_runner.run(*target, *config.get("args", []), cwd=worktree, env=env, timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]


def test_dry_run_prints_the_diff_and_changes_nothing(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = next(f for f in FIXTURES if f.name == "cnn_flatten_size")
    repo = prepare(fixture, tmp_path)
    before = snapshot(repo)
    result = run_cli_in_process("fix", "train.py", "--dry-run", "--json", str(tmp_path / "r.json"), cwd=repo, runner=shared_runner)
    assert result.returncode == 0, result.stderr
    assert "--- a/train.py\n+++ b/train.py\n" in result.stdout
    assert "+        self.fc1 = nn.Linear(64 * 8 * 8, 128)" in result.stdout or "64 * 8 * 8" in result.stdout
    assert "[FIXED] train.py:" in result.stdout
    assert "Status: SUCCESS | Errors Fixed: 1 | Files Modified: none (dry run; would modify train.py)" in result.stdout
    assert snapshot(repo) == before
    assert git(repo, "branch", "--list", "repairbot/*") == ""
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["status"] == "fixed" and report["branch"] is None


def test_no_branch_writes_the_fix_in_place(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = next(f for f in FIXTURES if f.name == "mlp_other_module")
    repo = prepare(fixture, tmp_path)
    models = repo / "models.py"
    models.chmod(0o640)
    original = models.read_bytes()
    result = run_cli_in_process("fix", "train.py", "--no-branch", cwd=repo, runner=shared_runner)
    assert result.returncode == 0, result.stdout + result.stderr
    new = models.read_bytes()
    assert new != original and b"nn.Linear(256, 10)" in new
    assert models.stat().st_mode & 0o777 == 0o640
    assert git(repo, "status", "--porcelain") == " M models.py\n"
    assert sorted(p.name for p in repo.iterdir()) == sorted([".git", *[p.name for p in fixture.folder.iterdir() if p.name != "case.toml"]])


def test_json_to_stdout_sends_the_text_report_to_stderr(tmp_path: Path) -> None:
    fixture = next(f for f in FIXTURES if f.name == "already_passing")
    repo = prepare(fixture, tmp_path)
    result = run_cli("fix", "train.py", "--dry-run", "--json", "-", cwd=repo)
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["status"] == "already-passing" and report["schema"] == "repairbot.report/1"
    assert "Status: SUCCESS | Errors Fixed: 0" in result.stderr
