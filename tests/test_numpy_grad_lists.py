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
