"""view-noncontiguous on a batch made non-contiguous in a helper: one .contiguous() there, or the
fix at the view (or a decline) when a write relies on the memory the batch shares."""

from __future__ import annotations

from repairbot.edits import Site
from repairbot.sources import Sources
from repairbot.types import Decline
from tests.test_pattern_cases import CASES, _locate


def _case_locate(folder: str) -> Site | Decline:
    case = next(c for c in CASES if c.pattern_id == "view-noncontiguous" and c.folder.name == folder)
    return _locate(case, Sources())


def test_batch_made_in_a_helper_is_made_contiguous_there_for_every_caller() -> None:
    found = _case_locate("helper_batch_viewed_at_two_losses")
    assert isinstance(found, Site)
    assert found.evidence["fixed_at"] == "helper" and found.evidence["helper"] == "get_batch"
    assert found.evidence["callers"] == 2
    # the view fix stays the alternative
    assert [type(a.rewrite).__name__ for a in found.alternatives] == ["ViewToReshape"]


def test_a_caller_writing_into_the_batch_keeps_the_fix_at_the_view() -> None:
    found = _case_locate("helper_batch_written_by_caller")
    assert isinstance(found, Site)
    assert type(found.rewrite).__name__ == "ViewToReshape" and "fixed_at" not in found.evidence


def test_a_write_through_the_view_of_a_helper_batch_is_declined() -> None:
    found = _case_locate("decline_helper_batch_written_through_view")
    assert isinstance(found, Decline)
    assert "is written in place (an item assignment)" in found.reason


def test_a_helper_batch_sliced_after_its_transpose_keeps_the_fix_at_the_view() -> None:
    found = _case_locate("helper_batch_sliced_after_transpose")
    assert isinstance(found, Site)
    assert type(found.rewrite).__name__ == "ViewToReshape" and "fixed_at" not in found.evidence
