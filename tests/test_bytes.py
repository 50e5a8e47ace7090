"""Bytes outside an edit never change: line endings, BOM, encodings, a missing final newline."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import libcst as cst
import pytest

from repairbot import registry
from repairbot.evidence import evidence_from_json
from repairbot.output.diff import unified_diff
from repairbot.pattern import Pattern
from repairbot.sources import SourceError, Sources, parse, write_atomic
from repairbot.types import Applicability, Site, Span
from tests.support import PatternCase, pattern_cases, split_location

FIX_CASES = [c for c in pattern_cases() if c.expects_fix]


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def bom(data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def no_final_newline(data: bytes) -> bytes:
    return data.rstrip(b"\n")


VARIANTS: dict[str, Callable[[bytes], bytes]] = {
    "crlf": crlf,
    "bom": bom,
    "crlf+bom": lambda data: bom(crlf(data)),
    "no-final-newline": no_final_newline,
}


def _pattern(case: PatternCase) -> Pattern:
    return next(p for p in registry.all_patterns() if case.pattern_id == p.ID)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", FIX_CASES, ids=[c.id for c in FIX_CASES])
def test_fix_keeps_every_other_byte(case: PatternCase, variant: str, tmp_path: Path) -> None:
    convert = VARIANTS[variant]
    project = tmp_path / "project"
    shutil.copytree(case.before, project)
    site_file, _ = split_location(case.config["site"])
    target = project / site_file
    target.write_bytes(convert(target.read_bytes()))
    expected = convert((case.after / site_file).read_bytes())

    evidence = evidence_from_json(json.loads((case.folder / "evidence.json").read_text()), root=project.resolve())
    assert evidence.failure is not None
    pattern = _pattern(case)
    match = pattern.match(evidence.failure)
    assert match is not None
    sources = Sources()
    site = pattern.locate(evidence.failure, match, evidence, sources)
    assert isinstance(site, Site), site
    assert pattern.transform(site, sources.metadata(Path(site.file))).bytes == expected


def test_latin1_file_with_a_coding_cookie(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    source = b"# -*- coding: latin-1 -*-\n# r\xe9sum\xe9 of the run\nimport torch\nstate = torch.load('best.pt')\n"
    path.write_bytes(source)
    pattern = next(p for p in registry.all_patterns() if p.ID == "map-location")
    site = Site(
        pattern=pattern.ID, file=str(path), span=Span(4, 8, 4, 29), params={"map_location": "'cpu'"},
        summary="", applicability=Applicability.SAFE,
    )
    result = pattern.transform(site, Sources().metadata(path)).bytes
    assert result == source.replace(b"torch.load('best.pt')", b"torch.load('best.pt', map_location='cpu')")
    diff, changed = unified_diff(source, result, "train.py")
    assert changed == 1 and " # r\xe9sum\xe9 of the run\n" in diff  # decoded by its cookie
    write_atomic(path, result)
    assert path.read_bytes() == result


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"x = 1\r\ny = 2\n", "mixes CRLF and LF"),
        (b"x = 1\ry = 2\r", "bare CR line endings"),
    ],
)
def test_files_that_cannot_be_rewritten_exactly_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(SourceError, match=message):
        parse(Path("train.py"), data)


def test_diff_marks_a_missing_final_newline() -> None:
    diff, changed = unified_diff(b"a = 1\nb = 2", b"a = 1\nb = 3", "x.py")
    assert diff.endswith("-b = 2\n\\ No newline at end of file\n+b = 3\n\\ No newline at end of file\n")
    assert changed == 1


def test_round_trip_is_exact_for_odd_but_valid_files() -> None:
    for data in (b"if True:\n\tx = 1  \n", b"x = 1\n\n\n", b"# only a comment", b"\xef\xbb\xbfx = '\xc3\xa9'\r\n"):
        assert parse(Path("t.py"), data).bytes == data
    assert isinstance(parse(Path("t.py"), b"x = 1\n"), cst.Module)
