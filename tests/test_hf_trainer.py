"""Hugging Face ``transformers.Trainer`` over a user ``nn.Module`` and ``Dataset``, under the real CLI.

The script is tests/data/hf_trainer/train.py (Trainer.train for 50 epochs, then evaluate, predict,
save_model); each case is that file with one change, made here. The harness cuts the Trainer's
DataLoaders, bounds its training through the Trainer's own stop, and the walk follows a batch
the Trainer hands ``forward`` or a ``compute_loss`` override back to the Dataset's item.
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

pytestmark = [pytest.mark.torch, pytest.mark.slow]

SCRIPT = (Path(__file__).parent / "data" / "hf_trainer" / "train.py").read_text()
FEATURES = "self.features = rng.normal(size=(n, 20)).astype(np.float32)"
LABELS = "self.labels = torch.tensor(self.features[:, 0] > 0, dtype=torch.long)"
LINEAR = "nn.Linear(20, hidden)"
TRAINER = "trainer = Trainer(model="
SUBCLASS = "trainer = WeightedTrainer(model="
TRAIN_CALL = "    trainer.train()\n"
# collators of the project for a Dataset of float64 NumPy rows: one makes the batch's tensor
# itself (converted there), one builds each key from the items in a comprehension (which item the
# float64 comes from, and whether the collator or the Dataset should convert, is not followed)
MAKES_TENSOR = """
def stack_batch(features):
    x = torch.tensor(np.stack([f["x"] for f in features]))
    return dict(x=x, labels=torch.stack([f["labels"] for f in features]))
"""
STACKS_ITEMS = """
def stack_batch(features):
    return {
        "x": torch.stack([torch.as_tensor(f["x"]) for f in features]),
        "labels": torch.stack([f["labels"] for f in features]),
    }
"""


def variant(*changes: tuple[str, str]) -> str:
    source = SCRIPT
    for old, new in changes:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


def fix(
    tmp_path: Path, source: str, *extra: str, runner: SharedWarmRunner, files: dict[str, bytes] | None = None,
) -> tuple[dict, str, Path]:
    if reason := unmet_requirement(["transformers", "accelerate"]):
        pytest.skip(reason)
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text(source)
    for name, content in (files or {}).items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(content)
    commit_all(repo)
    report_path = tmp_path / "report.json"
    result = run_cli_in_process("fix", "train.py", "--json", str(report_path), *extra, cwd=repo, runner=runner)
    return json.loads(report_path.read_text()), result.stdout + result.stderr, repo


def added_lines(report: dict) -> list[str]:
    [attempt] = [a for a in report["attempts"] if "fix" in a]
    diff = attempt["fix"]["diff"]
    return [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def with_collator(collator: str) -> str:
    """The script over float64 NumPy rows, batched by ``collator`` (given to the Trainer)."""
    return variant(
        (FEATURES, "self.features = rng.normal(size=(n, 20))"),
        ("        x = torch.from_numpy(self.features[idx])\n", "        x = self.features[idx]\n"),
        ("\n\nclass WeightedTrainer(Trainer):", "\n\n" + collator.strip() + "\n\n\nclass WeightedTrainer(Trainer):"),
        ("eval_dataset=eval_set)", "eval_dataset=eval_set, data_collator=stack_batch)"),
    )


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def test_passing_trainer_script_is_left_alone_and_its_training_ends_through_the_trainer(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    # a checkpoint of an earlier real run in output_dir: the Trainer's saves (safetensors) must not touch it
    precious = {"out/checkpoint-10/model.safetensors": b"an earlier run's weights"}
    report, output, repo = fix(tmp_path, SCRIPT, "-v", files=precious, runner=shared_runner)
    assert report["status"] == "already-passing", output
    assert report["files_modified"] == []
    # 50 epochs of 2 cut batches are 100 steps: the budget's 20 end train() through the Trainer's
    # own stop, reported at the train() call, and evaluate / predict / save_model still run
    left = report["run_limits"]["left_loops"]
    assert [(item["kind"], item["loop"], item["steps"]) for item in left] == [
        ("fit", f"train.py:{line_of(SCRIPT, TRAIN_CALL.strip())}", 20)
    ], output
    assert "'epoch': '10'" in output  # the Trainer's own log of its end: 20 steps of 2 cut batches
    assert "predictions (12, 2)" in output  # eval set of 40 at batch 16: 2 forced batches of 2 + the last 8
    assert "done" in output
    # nothing of the runs is left in the checkout: no checkpoint, the earlier one byte for byte
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "", output
    assert (repo / "out/checkpoint-10/model.safetensors").read_bytes() == precious["out/checkpoint-10/model.safetensors"]


def test_wrong_linear_in_the_users_module_is_fixed_and_verified_on_a_branch(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    broken = variant((LINEAR, "nn.Linear(10, hidden)"))
    report, output, repo = fix(tmp_path, broken, runner=shared_runner)
    assert report["status"] == "fixed", output
    assert [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a] == ["linear-in-features"], output
    assert (repo / "train.py").read_text() == broken  # the checkout is untouched
    assert git(repo, "show", f"{report['branch']}:train.py") == SCRIPT  # one change, the rest byte for byte


def test_float_labels_are_made_class_indices_where_the_dataset_writes_them(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    broken = variant((LABELS, LABELS.replace("torch.long", "torch.float32")))
    report, output, repo = fix(tmp_path, broken, runner=shared_runner)
    assert report["status"] == "fixed", output
    assert [a["fix"]["pattern"] for a in report["attempts"] if "fix" in a] == ["target-dtype"], output
    assert added_lines(report) == [f"        {LABELS}"], output
    assert "Trainer.train() passes forward() a batch of `train_set`" in output
    assert git(repo, "show", f"{report['branch']}:train.py") == SCRIPT


def test_float64_features_through_a_compute_loss_override_are_converted_in_getitem(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    source = variant((TRAINER, SUBCLASS))
    broken = source.replace(FEATURES, "self.features = rng.normal(size=(n, 20))")
    report, output, _ = fix(tmp_path, broken, runner=shared_runner)
    assert report["status"] == "fixed", output
    assert added_lines(report) == ["        x = torch.from_numpy(self.features[idx]).float()"], output
    assert "Trainer.train() passes compute_loss() a batch of `train_set`" in output


def test_float64_made_by_a_collator_of_the_project_is_converted_there(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    broken = with_collator(MAKES_TENSOR)
    report, output, _ = fix(tmp_path, broken, runner=shared_runner)
    assert report["status"] == "fixed", output
    assert added_lines(report) == ['    x = torch.tensor(np.stack([f["x"] for f in features])).float()'], output


@pytest.mark.parametrize(
    ("strategy", "phase"),
    [("", "Trainer.evaluate()"), ('        eval_strategy="epoch",\n', "Trainer.train() evaluating")],
    ids=["at-evaluate", "inside-train"],
)
def test_float64_only_in_the_eval_set_is_followed_to_the_eval_dataset(tmp_path: Path, strategy: str, phase: str, shared_runner: SharedWarmRunner) -> None:
    # training batches are float32; the evaluation (trainer.evaluate(), or the one train() runs
    # at its eval_strategy) feeds forward the Trainer's eval_dataset, never the train_dataset
    broken = variant(
        ("def __init__(self, n, seed):", "def __init__(self, n, seed, dtype=np.float32):"),
        (FEATURES, "self.features = rng.normal(size=(n, 20)).astype(dtype)"),
        ("eval_set = PointsDataset(40, seed=1)", "eval_set = PointsDataset(40, seed=1, dtype=np.float64)"),
        ('        report_to="none",\n', strategy + '        report_to="none",\n'),
    )
    report, output, _ = fix(tmp_path, broken, runner=shared_runner)
    assert report["status"] == "fixed", output
    assert added_lines(report) == ["        x = torch.from_numpy(self.features[idx]).float()"], output
    assert f"{phase} passes forward() a batch of `eval_set`" in output


def test_float64_built_by_a_collator_from_the_items_is_declined(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    broken = with_collator(STACKS_ITEMS)
    report, output, repo = fix(tmp_path, broken, runner=shared_runner)
    assert report["stop_reason"] == "diagnosed", output
    assert report["files_modified"] == []
    # followed into the collator given to the Trainer, and declined there
    assert 'it comes from `torch.stack([torch.as_tensor(f["x"]) for f in features])`' in output, output
    assert git(repo, "status", "--porcelain") == ""
