"""Every pattern case's recorded ``evidence.json`` is what the harness records today.

The case tests (``test_pattern_cases.py``) read the recordings without torch; a recording the
harness no longer produces would keep them green while the live tool sees something else. Each
case is re-recorded here (``tests/record.py``, the same code ``--regen`` runs) and compared with
the committed file; a difference fails with the first differing lines. Re-record a stale case
with ``python -m tests.record <case-or-pattern-id>`` once the harness is known to be right.
"""

from __future__ import annotations

import difflib
import json
import re
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from repairbot.trace.runner import WarmRunner
from tests.record import recordable, recording, recording_runner
from tests.support import PatternCase, PlainForkServer, pattern_cases, unmet_requirement

CASES = pattern_cases()
_SHOWN = 40  # diff lines in a failure: enough to see the first differences, short enough to read

# What differs between two recordings of the same script by the same harness, and nothing else:
# - environment: the interpreter's and torch's versions and torch's thread count are the
#   machine's (a case recorded on 3.11.7 is still right on 3.11.9); whether CUDA is there is not
#   normalised: a case recorded with a GPU is not recordable here (``recordable``) and skipped.
_MACHINE = ("python", "torch", "torch_threads")
# - object addresses in messages and reprs (``<Net object at 0x7f3a...>``) change every run.
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,16}\b")
# - temporary folders other than the copied project (already made relative by the recorder):
#   the harness's scratch folder and the recorder's own, named by ``tempfile`` at random.
_TEMP = re.compile(re.escape(tempfile.gettempdir()) + r"/[^\s\"':]*?repairbot-[A-Za-z0-9_-]+")


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return _TEMP.sub("<tmp>", _ADDRESS.sub("0x<address>", value))
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


# - values a script computes from unseeded random data (``correct += (pred == y).sum().item()``
#   on ``torch.randn`` inputs): no rule can know them, so a case that differs is recorded a
#   second time, and what differs between today's two recordings is masked in all three.
Path_ = tuple[str | int, ...]


def comparable(text: str, varying: frozenset[Path_] = frozenset()) -> str:
    """A recording's ``evidence.json`` text with the run-dependent parts masked."""
    data = json.loads(text)
    environment = data.get("environment")
    if isinstance(environment, dict):
        for key in _MACHINE:
            if key in environment:
                environment[key] = "<machine>"
    data = _normalise(data)
    for path in varying:
        data = _masked(data, path)
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def differing(a: Any, b: Any, at: Path_ = ()) -> set[Path_]:
    """The paths where two JSON values differ (a list of another length differs as a whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {p for k in set(a) | set(b) for p in differing(a.get(k), b.get(k), (*at, k))}
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return {p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in differing(x, y, (*at, i))}
    return set() if a == b else {at}


def _masked(value: Any, path: Path_) -> Any:
    if not path:
        return "<varies between runs>"
    head, rest = path[0], path[1:]
    if isinstance(value, dict) and head in value:
        return {**value, head: _masked(value[head], rest)}
    if isinstance(value, list) and isinstance(head, int) and head < len(value):
        return [_masked(v, rest) if i == head else v for i, v in enumerate(value)]
    return value


def first_differences(committed: str, recorded: str, shown: int = _SHOWN) -> str:
    diff = list(difflib.unified_diff(
        committed.splitlines(), recorded.splitlines(), "committed", "recorded today", lineterm="", n=2,
    ))
    more = f"\n... {len(diff) - shown} more diff lines" if len(diff) > shown else ""
    return "\n".join(diff[:shown]) + more


def test_comparable_masks_only_run_dependent_parts() -> None:
    text = json.dumps({
        "environment": {"python": "3.11.7", "torch": "2.13.0", "torch_threads": 1, "cuda_available": False},
        "exception": {"message": "<Net object at 0x7f3a2b1c0d90> in /tmp/repairbot-run-k2j3/run-1/x.pt"},
        "limits": {"batch_size": 2},
    })
    masked = json.loads(comparable(text))
    assert masked["environment"] == {
        "python": "<machine>", "torch": "<machine>", "torch_threads": "<machine>", "cuda_available": False,
    }
    assert masked["exception"]["message"] == "<Net object at 0x<address>> in <tmp>/run-1/x.pt"
    assert masked["limits"] == {"batch_size": 2}
    assert comparable(text) != comparable(text.replace('"batch_size": 2', '"batch_size": 3'))


def test_only_what_varies_between_two_runs_is_masked() -> None:
    first = {"locals": {"correct": {"kind": "number", "value": 1}, "n": {"kind": "number", "value": 4}}}
    second = {"locals": {"correct": {"kind": "number", "value": 2}, "n": {"kind": "number", "value": 4}}}
    varying = frozenset(differing(first, second))
    assert varying == {("locals", "correct", "value")}
    committed = {"locals": {"correct": {"kind": "number", "value": 3}, "n": {"kind": "number", "value": 5}}}
    masked = json.loads(comparable(json.dumps(committed), varying))
    assert masked["locals"]["correct"]["value"] == "<varies between runs>"
    assert masked["locals"]["n"]["value"] == 5  # not varying: still compared


def test_first_differences_shows_the_changed_lines() -> None:
    shown = first_differences("a\nb\nc\n", "a\nB\nc\n")
    assert "-b" in shown and "+B" in shown


@pytest.fixture(scope="session")
def runner() -> Iterator[WarmRunner]:
    """One warm runner per test process (xdist worker) for all its recordings, as ``--regen``
    and ``python -m tests.record`` record them."""
    with recording_runner() as shared:
        yield shared


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_recording_is_current(case: PatternCase, runner: WarmRunner, plain_runner: PlainForkServer) -> None:
    if not recordable(case):
        pytest.skip(unmet_requirement(case.config.get("requires", ())) or "not recordable here")
    recorded = recording(case, runner, plain_runner)
    assert recorded is not None
    committed_text = (case.folder / "evidence.json").read_text(encoding="utf-8")
    committed, today = comparable(committed_text), comparable(recorded[1])
    if committed != today:
        again = recording(case, runner, plain_runner)
        assert again is not None
        varying = frozenset(differing(json.loads(today), json.loads(comparable(again[1]))))
        committed, today = comparable(committed_text, varying), comparable(recorded[1], varying)
    assert committed == today, (
        f"{case.id}: the committed evidence.json differs from what the harness records today "
        f"(python -m tests.record {case.id} re-records it):\n{first_differences(committed, today)}"
    )
