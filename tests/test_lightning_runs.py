"""Lightning scripts (``Trainer.fit`` then test / save_checkpoint / predict) under the real CLI.

The script is tests/data/lightning_classifier.py (28x28 data); the wrong-Linear case is the same
script with ``nn.Linear(32 * 8 * 8, hidden)``, sized for 32x32 inputs, as in issue 26.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import commit_all, git, init_repo, run_cli, unmet_requirement

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


def fix(repo: Path, tmp_path: Path) -> tuple[dict, str]:
    report_path = tmp_path / "report.json"
    result = run_cli("fix", "train.py", "--json", str(report_path), cwd=repo, timeout=300)
    return json.loads(report_path.read_text()), result.stdout + result.stderr


def test_wrong_linear_in_lightning_module_is_fixed_on_a_branch(tmp_path: Path) -> None:
    assert RIGHT in SCRIPT
    repo = make_repo(tmp_path, SCRIPT.replace(RIGHT, WRONG))
    report, output = fix(repo, tmp_path)
    assert report["status"] == "fixed", output
    assert [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a] == ["linear-in-features"], output
    assert (repo / "train.py").read_text() == SCRIPT.replace(RIGHT, WRONG)  # the checkout is untouched
    fixed = git(repo, "show", f"{report['branch']}:train.py")
    assert fixed == SCRIPT  # one change, the rest byte-for-byte


def test_passing_lightning_script_is_already_passing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, SCRIPT)
    report, output = fix(repo, tmp_path)
    assert report["status"] == "already-passing", output
    assert report["files_modified"] == []
    assert git(repo, "status", "--porcelain") == ""
