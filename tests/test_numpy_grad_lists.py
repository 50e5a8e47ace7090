"""numpy-grad on lists: a list of non-scalar tensors is declined naming the list; a list of losses
plotted after training gets ``.item()`` where it is filled."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from repairbot.sources import Sources
from repairbot.types import Decline
from tests.support import SharedWarmRunner, commit_all, init_repo, run_cli_in_process
from tests.test_pattern_cases import CASES, _locate


def test_list_of_vectors_decline_names_the_list_and_its_elements() -> None:
    case = next(c for c in CASES if c.pattern_id == "numpy-grad" and c.folder.name == "decline_list_of_vectors")
    found = _locate(case, Sources())
    assert isinstance(found, Decline)
    assert "`outputs` passed to `np.concatenate(outputs)`" in found.reason
    assert "[8, 3]" in found.reason and "`.item()` fits numbers only" in found.reason


def _case_locate(folder: str) -> object:
    case = next(c for c in CASES if c.pattern_id == "numpy-grad" and c.folder.name == folder)
    return _locate(case, Sources())


def test_attribute_fill_is_proven_by_the_backward_on_the_appended_tensor() -> None:
    from repairbot.edits import Site

    found = _case_locate("attribute_list_append_item")
    assert isinstance(found, Site)
    assert "`self.cost_his` is filled only at " in found.evidence_text and "train.py:19;" in found.evidence_text
    assert "`loss.backward()` there is called on the same tensor" in found.evidence_text
    assert found.evidence["edits"][0]["added"] == ".item()"


def test_attribute_list_that_feeds_a_backward_is_declined_naming_that_use() -> None:
    found = _case_locate("decline_attribute_list_fed_to_backward")
    assert isinstance(found, Decline)
    assert "`self.step_losses` holds the failing tensors" in found.reason
    assert "torch.stack(self.step_losses)" in found.reason and "train.py:19 uses it otherwise" in found.reason


def test_attribute_list_of_outputs_is_declined_without_a_number_proof() -> None:
    found = _case_locate("decline_attribute_list_of_outputs")
    assert isinstance(found, Decline)
    assert "`self.outputs` is filled at " in found.reason and "train.py:13 (`self.outputs.append(out)`)" in found.reason
    assert "nothing there shows its elements are numbers" in found.reason


def test_expression_whose_traced_operands_do_not_require_grad_is_declined() -> None:
    found = _case_locate("decline_expression_operands_detached")
    assert isinstance(found, Decline)
    assert "no argument of `np.save(\"residual.npy\", x @ w - net(x))`" in found.reason


PLOTTED_AFTER_TRAINING = '''\
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(64, 3)
y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1 * torch.randn(64, 1)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(50):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss)

plt.plot(losses)
plt.savefig("loss.png")
pred = model(x)
plt.scatter(y.numpy(), pred)
plt.savefig("fit.png")
print("done")
'''


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib is not installed")
def test_plots_after_training_get_item_where_the_list_is_filled_and_detach_at_the_plot(tmp_path: Path, shared_runner: SharedWarmRunner) -> None:
    # plt.plot / plt.scatter call numpy() on what they are given: the script's real plotting
    # code after the loop, fixed at the append and at the scatter, verified by reaching the end
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text(PLOTTED_AFTER_TRAINING)
    commit_all(repo)
    result = run_cli_in_process("fix", "train.py", "--dry-run", "--json", "-", cwd=repo, runner=shared_runner, env={"MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["status"] == "fixed"
    assert [a["fix"]["pattern"] for a in report["attempts"]] == ["numpy-grad", "numpy-grad"]
    added = [line[1:] for line in report["diff"].splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == ["    losses.append(loss.item())", "plt.scatter(y.numpy(), pred.detach().cpu().numpy())"]
    assert not (repo / "loss.png").exists() and not (repo / "fit.png").exists()  # the runs' files are removed
