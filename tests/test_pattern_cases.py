"""Every case of every pattern, without torch, from its recorded traceback and evidence.

Per case: the traceback classifies to the pattern with the right user frame; ``locate`` finds
the recorded site (or declines); the transform gives ``after/`` byte for byte; the diff stays
inside the located node and under ``max_changed_lines``; a second pass changes nothing.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from repairbot import registry
from repairbot.classify import candidates
from repairbot.edits import Site
from repairbot.evidence import evidence_from_json
from repairbot.output.diff import unified_diff
from repairbot.pattern import Pattern
from repairbot.sources import Sources
from repairbot.tracebacks import parse_log
from repairbot.types import Decline
from tests.support import PatternCase, pattern_cases, split_location

CASES = pattern_cases()


@pytest.fixture(scope="session", autouse=True)
def regenerate(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--regen"):
        from tests.record import record, recording_runner

        with recording_runner() as runner:
            for case in CASES:
                record(case, runner)


def _pattern(case: PatternCase) -> Pattern:
    return next(p for p in registry.all_patterns() if case.pattern_id == p.ID)


def _evidence(case: PatternCase):  # type: ignore[no-untyped-def]
    data = json.loads((case.folder / "evidence.json").read_text(encoding="utf-8"))
    return evidence_from_json(data, root=case.before.resolve())


def _locate(case: PatternCase, sources: Sources) -> Site | Decline:
    pattern = _pattern(case)
    evidence = _evidence(case)
    assert evidence.failure is not None, "the recorded run did not fail"
    match = pattern.match(evidence.failure)
    assert match is not None, f"{case.pattern_id} does not match {evidence.failure.headline}"
    return pattern.locate(evidence.failure, match, evidence, sources)


def _relative(case: PatternCase, file: str) -> str:
    return Path(file).resolve().relative_to(case.before.resolve()).as_posix()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_traceback_classifies_to_its_pattern(case: PatternCase) -> None:
    failure = parse_log((case.folder / "traceback.txt").read_text(encoding="utf-8"))
    assert failure is not None
    ranked = candidates(failure, registry.all_patterns())
    if case.unclaimed:
        assert case.pattern_id not in [c.pattern.ID for c in ranked], "an unclaimed look-alike is recognised"
        assert failure.user_frame is not None and failure.user_frame.location == case.config["failing"]
        return
    # `after`: patterns that rank first on the same message and must decline this case's
    # evidence, so that the loop reaches this one (conv-in-channels before conv-input-rank)
    earlier = case.config.get("after", [])
    assert [c.pattern.ID for c in ranked][: len(earlier) + 1] == [*earlier, case.pattern_id]
    evidence = _evidence(case) if earlier else None
    for candidate in ranked[: len(earlier)]:
        assert evidence is not None
        match = candidate.pattern.match(evidence.failure) if evidence.failure else None
        assert match is not None and evidence.failure is not None
        found = candidate.pattern.locate(evidence.failure, match, evidence, Sources())
        assert isinstance(found, Decline), f"{candidate.pattern.ID} fixes this case first: {getattr(found, 'summary', found)}"
    frame = failure.user_frame
    assert frame is not None
    assert f"{frame.file}:{frame.line}" == case.config["failing"]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_locate_transform_and_fixed_point(case: PatternCase) -> None:
    sources = Sources()
    if case.unclaimed:
        evidence = _evidence(case)
        assert case.expect == "decline" and not case.after.exists()
        assert evidence.failure is not None, "the recorded run did not fail"
        assert _pattern(case).match(evidence.failure) is None, "an unclaimed look-alike is recognised"
        return
    found = _locate(case, sources)
    if not case.expects_fix:
        assert isinstance(found, Decline), f"expected a decline, got a fix: {getattr(found, 'summary', found)}"
        assert found.reason
        assert not case.after.exists()
        if case.expect == "diagnose":
            assert found.diagnosis, "a diagnosis must carry the remedy"
            if "site" in case.config:
                assert found.file is not None
                assert (_relative(case, found.file), found.line) == split_location(case.config["site"])
        return
    assert isinstance(found, Site), f"declined: {getattr(found, 'reason', found)}"
    site_file, site_line = split_location(case.config["site"])
    assert (_relative(case, found.file), found.span.line) == (site_file, site_line)

    pattern = _pattern(case)
    path = Path(found.file)
    before = sources.current(path)
    after = pattern.transform(found, sources.metadata(path)).bytes
    expected = (case.after / site_file).read_bytes()
    assert after == expected

    # Surgical: few lines, all inside the nodes the site names.
    _, changed = unified_diff(before, after, site_file)
    assert 0 < changed <= case.config.get("max_changed_lines", pattern.MAX_CHANGED_LINES)
    allowed = [(span.line, span.end_line) for span in (found.span, *found.extra_spans)]
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        # old lines i1+1..i2 changed (an insertion sits after line i1)
        first, last = (i1 + 1, i2) if i2 > i1 else (i1, i1 + 1)
        assert any(first <= end and last >= start for start, end in allowed), (
            f"lines {first}-{last} changed outside the located node(s) {allowed}"
        )
    # Only the files in after/ change.
    assert sorted(p.relative_to(case.after).as_posix() for p in case.after.rglob("*") if p.is_file()) == [site_file]

    # Fixed point: on the fixed source, the pattern declines or rewrites to the same bytes.
    sources.set(path, after)
    again = _locate(case, sources)
    if isinstance(again, Site):
        assert pattern.transform(again, sources.metadata(path)).bytes == after


@pytest.mark.parametrize("pattern", registry.all_patterns(), ids=lambda p: p.ID)
def test_every_pattern_has_its_cases(pattern: Pattern) -> None:
    mine = [c for c in CASES if c.pattern_id == pattern.ID]
    for case in mine:
        assert not case.unclaimed or case.expect == "decline", case.id
    if not pattern.FIXES:
        assert sum(c.expect == "diagnose" for c in mine) >= 2, "at least two diagnose cases"
        # its look-alikes are refused in `match` (see PatternCase.unclaimed)
        assert all(c.expect == "diagnose" or c.unclaimed for c in mine), "a diagnose-only pattern has only diagnose cases"
        assert all(c.name.startswith("decline_") for c in mine if c.unclaimed)
        return
    assert sum(c.expects_fix for c in mine) >= 4, "at least four fix cases"
    assert sum(c.expect == "decline" for c in mine) >= 2, "at least two decline cases"
    for case in mine:
        assert case.name.startswith("decline_") == (case.expect == "decline"), case.id
