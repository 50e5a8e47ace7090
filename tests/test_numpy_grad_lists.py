"""numpy-grad on a list of non-scalar tensors: declined, and the decline names the list."""

from __future__ import annotations

from repairbot.sources import Sources
from repairbot.types import Decline
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
    from repairbot.types import Site

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
