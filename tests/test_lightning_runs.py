"""Lightning scripts (``Trainer.fit`` then test / save_checkpoint / predict) under the real CLI.

The script is tests/data/lightning_classifier.py (28x28 data); the wrong-Linear case is the same
script with ``nn.Linear(32 * 8 * 8, hidden)``, sized for 32x32 inputs, as in issue 26.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import (
    SharedWarmRunner,
    commit_all,
    git,
    init_repo,
    run_cli_in_process,
    unmet_requirement,
)

# asked in a child process: importing lightning (and torch) here would cost every xdist worker
# seconds at collection
pytestmark = [
    pytest.mark.torch,
    pytest.mark.slow,
    pytest.mark.skipif(bool(unmet_requirement(["lightning"])), reason=unmet_requirement(["lightning"]) or ""),
]

SCRIPT = (Path(__file__).parent / "data" / "lightning_classifier.py").read_text()
RIGHT = "nn.Linear(32 * 7 * 7, hidden)"
WRONG = "nn.Linear(32 * 8 * 8, hidden)"


def make_repo(tmp_path: Path, source: str) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text(source)
    commit_all(repo)
    return repo


def fix(repo: Path, tmp_path: Path, runner: SharedWarmRunner, *options: str) -> tuple[dict, str]:
    report_path = tmp_path / "report.json"
    result = run_cli_in_process("fix", "train.py", "--json", str(report_path), *options, cwd=repo, runner=runner)
    return json.loads(report_path.read_text()), result.stdout + result.stderr


def test_wrong_linear_in_lightning_module_is_fixed_on_a_branch(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    assert RIGHT in SCRIPT
    repo = make_repo(tmp_path, SCRIPT.replace(RIGHT, WRONG))
    report, output = fix(repo, tmp_path, shared_runner)
    assert report["status"] == "fixed", output
    assert [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a] == ["linear-in-features"], output
    assert (repo / "train.py").read_text() == SCRIPT.replace(RIGHT, WRONG)  # the checkout is untouched
    fixed = git(repo, "show", f"{report['branch']}:train.py")
    assert fixed == SCRIPT  # one change, the rest byte-for-byte


def test_passing_lightning_script_is_already_passing(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    repo = make_repo(tmp_path, SCRIPT)
    report, output = fix(repo, tmp_path, shared_runner, "-v")
    assert report["status"] == "already-passing", output
    assert report["files_modified"] == []
    assert git(repo, "status", "--porcelain") == ""
    # max_epochs=50 over cut passes of 2 batches would be 100 steps: the fit is stopped at the
    # budget through Lightning's own stop and reported as a loop left at the user's fit call
    fit_line = SCRIPT.splitlines().index(next(line for line in SCRIPT.splitlines() if "trainer.fit(" in line)) + 1
    assert "max_epochs=50" in SCRIPT
    assert report["run_limits"]["left_loops"] == [
        {"loop": f"train.py:{fit_line}", "kind": "fit", "step": f"train.py:{fit_line}", "steps": 20}
    ], output
    assert f"train.py:{fit_line} (fit, after 20 steps at train.py:{fit_line})" in output
    # Lightning ended it as an early-stopped fit: on_train_end ran, then the code after fit
    # (test, save_checkpoint, predict), and should_stop reads as after a fit that ran out
    assert "on_train_end at step 20" in output
    assert "fit returned at step 20 epoch 10 should_stop False" in output
    assert "test_loss" in output
    assert "predicted 4" in output


def test_fit_inside_a_user_loop_is_stopped_and_the_loop_left(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    # the loop around the fit shares its budget, as the loops around a hand-written inner loop
    # do: the fit is stopped at 20 steps and the loop is left after it, not fit three times
    one_fit = "    trainer.fit(model, loader(64, 0, shuffle=True), loader(32, 1))\n"
    assert one_fit in SCRIPT
    source = SCRIPT.replace(one_fit, "    for stage in range(3):\n    " + one_fit)
    lines = source.splitlines()
    loop_line = lines.index("    for stage in range(3):") + 1
    repo = make_repo(tmp_path, source)
    report, output = fix(repo, tmp_path, shared_runner, "-v")
    assert report["status"] == "already-passing", output
    site = f"train.py:{loop_line + 1}"
    assert report["run_limits"]["left_loops"] == [
        {"loop": site, "kind": "fit", "step": site, "steps": 20},
        {"loop": f"train.py:{loop_line}", "kind": "for", "step": site, "steps": 20},
    ], output
    assert output.count("on_train_end at step") == 1, output
    assert "fit returned at step 20 epoch 10 should_stop False" in output
