"""Locating the culprit through Lightning's hooks: a step hook's batch is followed to the loader
the DataModule given to ``trainer.fit`` returns, and on to the tensor its ``setup()`` makes.

One script (tests/data/lightning_locate/datamodule_float64.py: float64 made by
``torch.from_numpy`` in ``setup()``); each case is that script with one small change, made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import (
    SharedWarmRunner,
    commit_all,
    init_repo,
    run_cli_in_process,
    unmet_requirement,
)

pytestmark = pytest.mark.torch

SCRIPT = (Path(__file__).parent / "data" / "lightning_locate" / "datamodule_float64.py").read_text()
FIT = "    trainer.fit(Classifier(), datamodule=TabularDataModule())\n"
FIXED = ["        x = torch.from_numpy(features).float()"]
FOLLOWED = "Lightning passes validation_step() a batch of TabularDataModule.val_dataloader()"


def variant(old: str, new: str) -> str:
    assert SCRIPT.count(old) == 1, old
    return SCRIPT.replace(old, new)


def _fix(source: str, tmp_path: Path, runner: SharedWarmRunner) -> tuple[dict, str, Path]:
    if reason := unmet_requirement(["lightning"]):
        pytest.skip(reason)
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text(source)
    commit_all(repo)
    report_path = tmp_path / "report.json"
    result = run_cli_in_process("fix", "train.py", "--json", str(report_path), cwd=repo, runner=runner)
    return json.loads(report_path.read_text()), result.stdout + result.stderr, repo


def _added(report: dict) -> list[str]:
    [attempt] = [a for a in report["attempts"] if "fix" in a]
    diff = attempt["fix"]["diff"].splitlines()
    return [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]


@pytest.mark.parametrize("call", [
    pytest.param(FIT, id="made-at-the-call"),
    pytest.param("    data = TabularDataModule()\n    trainer.fit(Classifier(), datamodule=data)\n", id="by-name"),
    pytest.param("    data = TabularDataModule()\n    trainer.fit(Classifier(), data)\n", id="by-name-positionally"),
])
def test_float64_made_in_datamodule_setup_is_converted_there(call: str, tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    source = variant(FIT, call)
    report, output, repo = _fix(source, tmp_path, shared_runner)
    assert report["status"] == "fixed", output
    assert _added(report) == FIXED, output
    assert FOLLOWED in output
    # the user's checkout is untouched: the fix lives on its branch
    assert (repo / "train.py").read_text() == source


def test_datamodule_bound_twice_is_declined(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    # which DataModule the name holds at the call is not read from two bindings: declined, named
    source = variant(FIT, "    data = TabularDataModule()\n    data = TabularDataModule(batch_size=8)\n"
                          "    trainer.fit(Classifier(), data)\n")
    report, output, _ = _fix(source, tmp_path, shared_runner)
    assert report["status"] != "fixed", output
    assert report["files_modified"] == []
    assert "`data`, given to `trainer.fit(...)`, is bound in 2 places" in output


def test_dataset_attribute_bound_twice_is_declined(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    source = variant("    def train_dataloader(self):\n        return DataLoader(self.train_set",
                     "    def rebuild(self, x, y):\n        self.val_set = TensorDataset(x.float(), y)\n\n"
                     "    def train_dataloader(self):\n        return DataLoader(self.train_set")
    report, output, _ = _fix(source, tmp_path, shared_runner)
    assert report["status"] != "fixed", output
    assert report["files_modified"] == []
    assert "`self.val_set` of TabularDataModule is assigned in 2 places" in output


def test_loaders_passed_to_fit_are_not_taken_for_the_modules_own(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    # Lightning uses the loaders given to fit, not the module's train/val_dataloader(): the walk
    # must not follow the module's (float32) loader methods and edit there
    own_loaders = (
        "    def train_dataloader(self):\n"
        "        return DataLoader(TensorDataset(torch.randn(48, 8), torch.randint(0, 3, (48,))), batch_size=16)\n\n"
        "    def val_dataloader(self):\n"
        "        return DataLoader(TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,))), batch_size=16)\n\n"
        "    def configure_optimizers(self):\n"
    )
    source = variant("    def configure_optimizers(self):\n", own_loaders)
    source = source.replace(FIT, "    data = TabularDataModule()\n    data.setup()\n"
                                 "    trainer.fit(Classifier(), data.train_dataloader(), data.val_dataloader())\n")
    report, output, _ = _fix(source, tmp_path, shared_runner)
    assert report["stop_reason"] == "diagnosed", output
    assert report["files_modified"] == []
    assert "the loaders passed to `trainer.fit(...)` are not followed" in output
    assert "Classifier.val_dataloader()" not in output


def test_loader_given_positionally_is_not_taken_for_a_datamodule(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    # the place after the model also takes loaders: one loader bound by name there is not a
    # DataModule, so the walk neither follows the module's own loaders nor edits
    source = variant(FIT, "    data = TabularDataModule()\n    data.setup()\n    train = data.train_dataloader()\n"
                          "    trainer.fit(Classifier(), train)\n")
    report, output, _ = _fix(source, tmp_path, shared_runner)
    assert report["files_modified"] == [], output
    assert report["status"] != "fixed", output
    assert "the loaders passed to `trainer.fit(...)` are not followed" in output
