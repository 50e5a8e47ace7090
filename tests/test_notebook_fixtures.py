"""The notebook fixtures (fixtures/notebook_*: real public notebooks, one injected bug each),
repaired for real by ``repairbot fix NB.ipynb`` in a temporary git repository (needs torch).

Checks the outcome and the four reports (cells located), that the user's checkout is exactly
as it was, that the fix commit changes only the fixed cell's source lines of the .ipynb (every
other byte the same), and that the fixed notebook then runs through; plus --dry-run,
--no-branch and doctor on a notebook.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

from tests.support import (
    Fixture,
    PlainForkServer,
    SharedWarmRunner,
    commit_all,
    copy_project,
    cuda_available,
    fixtures,
    git,
    init_repo,
    make_cuda_checkpoint,
    run_cli_in_process,
    snapshot,
)
from tests.test_reports import validate_report, validate_sarif

pytestmark = pytest.mark.torch

NOTEBOOKS = [f for f in fixtures() if f.config.get("script", "").endswith(".ipynb")]


def prepare(fixture: Fixture, tmp_path: Path, runner: PlainForkServer | None = None) -> Path:
    repo = init_repo(tmp_path / "repo")
    copy_project(fixture.folder, repo)
    if fixture.config.get("checkpoint"):
        make_cuda_checkpoint(repo, fixture.config["checkpoint"], runner)
    commit_all(repo)
    return repo


def _skip_on_gpu(fixture: Fixture) -> None:
    on_cpu_only = "cuda-unavailable" in fixture.config["patterns"] or fixture.config.get("checkpoint")
    if on_cpu_only and cuda_available():
        pytest.skip("the bug only shows on a machine without CUDA")


def changed_only_in_cells(before: bytes, after: bytes, cells: set[int]) -> None:
    """Every byte of ``after`` outside the listed code cells' source lines is ``before``'s."""
    old, new = json.loads(before), json.loads(after)
    code = [i for i, c in enumerate(old["cells"]) if c["cell_type"] == "code"]
    allowed = {code[n - 1] for n in cells}
    assert {k: v for k, v in old.items() if k != "cells"} == {k: v for k, v in new.items() if k != "cells"}
    assert len(old["cells"]) == len(new["cells"])
    for index, (a, b) in enumerate(zip(old["cells"], new["cells"], strict=True)):
        assert list(a) == list(b)  # key order
        assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
        if index not in allowed:
            assert a["source"] == b["source"]
    # byte level: the lines that differ are JSON strings of those cells' sources, nothing else
    source_lines = {
        json.dumps(line, ensure_ascii=False) for i in allowed for line in old["cells"][i]["source"]
    }
    removed = [
        line[1:] for line in difflib.unified_diff(before.decode().splitlines(), after.decode().splitlines(), lineterm="", n=0)
        if line.startswith("-") and not line.startswith("---")
    ]
    assert removed, "nothing changed"
    for line in removed:
        assert line.strip().rstrip(",") in source_lines, line


@pytest.mark.parametrize("fixture", NOTEBOOKS, ids=[f.name for f in NOTEBOOKS])
def test_notebook_is_repaired_on_a_new_branch(fixture: Fixture, tmp_path: Path, shared_runner: SharedWarmRunner, plain_runner: PlainForkServer) -> None:
    _skip_on_gpu(fixture)
    config = fixture.config
    script = config["script"]
    repo = prepare(fixture, tmp_path, plain_runner)
    before = snapshot(repo)
    original = (repo / script).read_bytes()
    result = run_cli_in_process(  # its runs forked from this worker's warm server
        "fix", script, "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"),
        "--sarif", str(tmp_path / "r.sarif"), cwd=repo, runner=shared_runner,
    )
    output = result.stdout + result.stderr
    assert result.returncode == config["exit_code"], output
    report = json.loads((tmp_path / "r.json").read_text())
    validate_report(report)
    assert (report["status"], report["stop_reason"]) == (config["status"], config["stop_reason"]), output
    fixes = [a["fix"] for a in report["attempts"] if "fix" in a]
    assert [f["pattern"] for f in fixes] == config["patterns"]
    assert report["files_modified"] == config["files"]
    # every location names its cell: the fix site, the failure, in the JSON and the text
    assert [f["cell"] for f in fixes] == config["fix_cells"]
    for attempt, fix in zip(report["attempts"], fixes, strict=True):
        assert attempt["failure"]["cell"] >= 1 and attempt["failure"]["line"] >= 1
        assert fix["diff"].startswith(f"--- a/{script}:cell {fix['cell']}\n+++ b/{script}:cell {fix['cell']}\n")
        changed = [line for line in fix["diff"].splitlines() if line.startswith("+") and not line.startswith("+++")]
        assert 0 < len(changed) <= config.get("max_changed_lines", 1)
        assert f"[FIXED] {script}, cell {fix['cell']}, line {fix['line']}" in result.stdout
    assert not re.search(re.escape(script) + r":\d", result.stdout), result.stdout  # no program line leaks out
    markdown = (tmp_path / "r.md").read_text()
    assert f"`{script}, cell {fixes[0]['cell']}, line {fixes[0]['line']}`" in markdown
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    validate_sarif(sarif)
    errors = [r for r in sarif["runs"][0]["results"] if r["level"] == "error"]
    # SARIF: lines within the cell, the cell in the location's properties (the fixes' changes too)
    assert [r["locations"][0]["properties"]["cell"] for r in errors] == config["fix_cells"]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in errors] == [f["line"] for f in fixes]
    assert [r["relatedLocations"][0]["properties"]["cell"] for r in errors] == [
        a["failure"]["cell"] for a in report["attempts"]]
    for result in errors:
        for change in (c for f in result.get("fixes", []) for c in f["artifactChanges"]):
            assert change["artifactLocation"]["uri"] == script and change["properties"]["cell"] in config["fix_cells"]

    # the checkout is as it was; the branch holds one commit that changes the cell's lines only
    assert snapshot(repo) == before
    branch = report["branch"]
    assert branch and git(repo, "rev-parse", f"{branch}^").strip() == before.head
    assert git(repo, "diff", "--name-only", before.head, branch).splitlines() == [script]
    fixed = (tmp_path / "fixed.ipynb")
    fixed.write_bytes(git_bytes(repo, branch, script))
    changed_only_in_cells(original, fixed.read_bytes(), set(config["fix_cells"]))
    stat = git(repo, "diff", "--numstat", before.head, branch).split()
    assert int(stat[0]) <= len(config["patterns"]) * 2 and int(stat[1]) <= len(config["patterns"])

    # the fixed notebook runs through (checked out on its branch)
    worktree = tmp_path / "worktree"
    git(repo, "worktree", "add", "-q", str(worktree), branch)
    if config.get("checkpoint"):
        make_cuda_checkpoint(worktree, config["checkpoint"], plain_runner)
    rerun = run_cli_in_process("fix", script, "--dry-run", "--json", "-", cwd=worktree, runner=shared_runner)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert json.loads(rerun.stdout)["status"] == "already-passing"


def git_bytes(repo: Path, revision: str, path: str) -> bytes:
    import subprocess

    return subprocess.run(["git", "show", f"{revision}:{path}"], cwd=repo, capture_output=True, check=True).stdout


def _fixture(name: str) -> Fixture:
    return next(f for f in NOTEBOOKS if f.name == name)


def test_dry_run_shows_the_diff_per_cell_and_changes_nothing(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = _fixture("notebook_mnist_linear_in_features")
    script = fixture.config["script"]
    repo = prepare(fixture, tmp_path)
    before = snapshot(repo)
    result = run_cli_in_process("fix", script, "--dry-run", cwd=repo, runner=shared_runner)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"--- a/{script}:cell 3\n+++ b/{script}:cell 3\n@@ -1,6 +1,6 @@\n")
    assert "-                      nn.Linear(256, 64),\n+                      nn.Linear(128, 64),\n" in result.stdout
    assert snapshot(repo) == before
    assert git(repo, "branch", "--list", "repairbot/*") == ""


def test_no_branch_writes_only_the_cell_into_the_notebook(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = _fixture("notebook_logreg_dtype_mismatch")
    script = fixture.config["script"]
    repo = prepare(fixture, tmp_path)
    path = repo / script
    original = path.read_bytes()
    result = run_cli_in_process("fix", script, "--no-branch", cwd=repo, runner=shared_runner)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_bytes() == original.replace(
        b'"X_train_tensor = torch.tensor(X_train, device=device)\\n"',
        # the file writes its conversions with dtype= (torch.zeros(..., dtype=torch.float32, device=device))
        b'"X_train_tensor = torch.tensor(X_train, device=device, dtype=torch.float32)\\n"',
    )
    assert git(repo, "status", "--porcelain") == f" M {script}\n"
    # the committed-style diff of the .ipynb is one line
    assert git(repo, "diff", "--numstat").split()[:2] == ["1", "1"]
    assert "%watermark -a 'Sebastian Raschka'" in result.stdout  # the skipped magics are reported


def test_doctor_reports_the_crash_by_cell(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    fixture = _fixture("notebook_blobs_target_dtype")
    script = fixture.config["script"]
    repo = prepare(fixture, tmp_path)
    before = snapshot(repo)
    result = run_cli_in_process("doctor", script, "--json", str(tmp_path / "d.json"), cwd=repo, runner=shared_runner)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "d.json").read_text())
    validate_report(report)
    (attempt,) = report["attempts"]
    assert (attempt["failure"]["file"], attempt["failure"]["cell"], attempt["failure"]["line"]) == (script, 6, 20)
    assert attempt["failure"]["pattern"] == "target-dtype"
    assert f"{script}, cell 6, line 20" in result.stdout
    assert snapshot(repo) == before


def test_doctor_health_finding_on_a_notebook_offers_the_fix_per_cell(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    import nbformat

    repo = init_repo(tmp_path / "repo")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%matplotlib inline\nimport torch\nimport torch.nn as nn"),
        nbformat.v4.new_markdown_cell("## Train"),
        nbformat.v4.new_code_cell("model = nn.Linear(4, 3)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                                  "x = torch.randn(8, 4); y = torch.randint(0, 3, (8,))\ndisplay(model)"),
        nbformat.v4.new_code_cell("for epoch in range(3):\n    loss = nn.functional.cross_entropy(model(x), y)\n"
                                  "    loss.backward()\n    opt.step()"),
    ]
    nbformat.write(nb, str(repo / "train.ipynb"))
    commit_all(repo)
    result = run_cli_in_process("doctor", "train.ipynb", "--json", str(tmp_path / "d.json"), cwd=repo, runner=shared_runner)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "d.json").read_text())
    validate_report(report)
    assert report["attempts"] == []  # display() ran (no NameError outside IPython)
    (finding,) = report["health"]
    assert (finding["id"], finding["file"], finding["cell"], finding["line"]) == ("grad-accumulation", "train.ipynb", 3, 4)
    assert finding["fix"]["diff"].startswith("--- a/train.ipynb:cell 3\n+++ b/train.ipynb:cell 3\n@@ -1,4 +1,5 @@\n")
    assert "[WARNING] train.ipynb, cell 3, line 4" in result.stdout
    assert any("%matplotlib inline" in note for note in report.get("notes", [])) or "%matplotlib inline" in result.stdout
