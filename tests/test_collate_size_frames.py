"""collate-size recognises a size mismatch only where the traceback runs through a collation:
printed tracebacks of the forms the recorded cases do not cover (0.4's default_collate in
dataloader.py, a direct default_collate call, a helper named like a collate function)."""

from __future__ import annotations

from patterns.collate_size.pattern import CollateSize
from repairbot.sources import Sources
from repairbot.tracebacks import parse_log
from repairbot.types import Decline

SITE = "/usr/lib/python3.6/site-packages/torch/utils/data"
STACK = "RuntimeError: stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1"


def _reason(log: str) -> str | None:
    """The diagnosis's reason, None when the pattern does not recognise the failure."""
    failure = parse_log(log)
    assert failure is not None
    pattern = CollateSize()
    match = pattern.match(failure)
    if match is None:
        return None
    found = pattern.locate(failure, match, None, Sources())
    assert isinstance(found, Decline) and found.diagnosis
    return found.reason


def test_default_collate_of_old_releases_in_dataloader_py() -> None:
    log = f"""Traceback (most recent call last):
  File "train.py", line 30, in <module>
    for x, y in loader:
  File "{SITE}/dataloader.py", line 264, in __next__
    batch = self.collate_fn([self.dataset[i] for i in indices])
  File "{SITE}/dataloader.py", line 138, in default_collate
    return [default_collate(samples) for samples in transposed]
  File "{SITE}/dataloader.py", line 138, in <listcomp>
    return [default_collate(samples) for samples in transposed]
  File "{SITE}/dataloader.py", line 115, in default_collate
    return torch.stack(batch, 0, out=out)
{STACK}
"""
    reason = _reason(log)
    assert reason is not None and "the DataLoader iterated at train.py:30 stacks them with its default collate" in reason


def test_a_direct_call_of_default_collate() -> None:
    log = f"""Traceback (most recent call last):
  File "train.py", line 12, in <module>
    batch = default_collate(samples)
  File "{SITE}/_utils/collate.py", line 141, in default_collate
    return torch.stack(batch, 0, out=out)
{STACK}
"""
    reason = _reason(log)
    assert reason is not None and "the default collate called at train.py:12 stacks them" in reason


def test_a_stack_in_getitem_under_an_old_fetch_line_is_not_a_collation() -> None:
    """1.0's one line both indexes the dataset and calls the collate_fn: a stack in
    ``__getitem__`` under it joins the pieces of one sample."""
    log = f"""Traceback (most recent call last):
  File "train.py", line 30, in <module>
    for x, y in loader:
  File "{SITE}/dataloader.py", line 615, in __next__
    batch = self.collate_fn([self.dataset[i] for i in indices])
  File "{SITE}/dataloader.py", line 615, in <listcomp>
    batch = self.collate_fn([self.dataset[i] for i in indices])
  File "train.py", line 18, in __getitem__
    return torch.stack(self.frames[idx])
{STACK}
"""
    assert _reason(log) is None


def test_a_helper_named_collate_outside_torch_utils_data_is_not_a_collation() -> None:
    log = f"""Traceback (most recent call last):
  File "train.py", line 40, in <module>
    feats = collate_features(outputs)
  File "train.py", line 9, in collate_features
    return torch.stack(outputs)
{STACK}
"""
    assert _reason(log) is None


def test_the_exception_line_alone_is_not_recognised() -> None:
    """The words alone do not tell a batch from any other stack."""
    assert _reason(STACK + "\n") is None
