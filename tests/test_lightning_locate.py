"""Locating the culprit through Lightning's hooks: a step hook's batch is followed to the loader
the DataModule given to ``trainer.fit`` returns, and on to the tensor its ``setup()`` makes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import commit_all, init_repo, run_cli, unmet_requirement

pytestmark = pytest.mark.torch

DATA = Path(__file__).parent / "data" / "lightning_locate"


def _fix(script: str, tmp_path: Path) -> tuple[dict, str, Path]:
    if reason := unmet_requirement(["lightning"]):
        pytest.skip(reason)
    repo = init_repo(tmp_path / "repo")
    shutil.copy(DATA / script, repo / "train.py")
    commit_all(repo)
    report_path = tmp_path / "report.json"
    result = run_cli("fix", "train.py", "--json", str(report_path), cwd=repo)
    return json.loads(report_path.read_text()), result.stdout + result.stderr, repo


def test_float64_made_in_datamodule_setup_is_converted_there(tmp_path: Path) -> None:
    report, output, repo = _fix("datamodule_float64.py", tmp_path)
    assert report["status"] == "fixed", output
    [attempt] = [a for a in report["attempts"] if "fix" in a]
    added = [line[1:] for line in attempt["fix"]["diff"].splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == ["        x = torch.from_numpy(features).float()"], output
    assert "Lightning passes validation_step() a batch of TabularDataModule.val_dataloader()" in output
    # the user's checkout is untouched: the fix lives on its branch
    assert (repo / "train.py").read_bytes() == (DATA / "datamodule_float64.py").read_bytes()


def test_dataset_attribute_bound_twice_is_declined(tmp_path: Path) -> None:
    report, output, _ = _fix("datamodule_two_bindings_decline.py", tmp_path)
    assert report["status"] != "fixed", output
    assert report["files_modified"] == []
    assert "`self.val_set` of TabularDataModule is assigned in 2 places" in output


def test_loaders_passed_to_fit_are_not_taken_for_the_modules_own(tmp_path: Path) -> None:
    # Lightning uses the loaders given to fit, not the module's train/val_dataloader(): the walk
    # must not follow the module's (float32) loader methods and edit there
    report, output, _ = _fix("loaders_passed_to_fit_decline.py", tmp_path)
    assert report["stop_reason"] == "diagnosed", output
    assert report["files_modified"] == []
    assert "the loaders passed to `trainer.fit(...)` are not followed" in output
    assert "Classifier.val_dataloader()" not in output
