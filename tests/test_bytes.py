"""Bytes outside an edit never change: line endings, BOM, encodings, a missing final newline."""

from __future__ import annotations

import difflib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from repairbot import registry
from repairbot.edits import Site
from repairbot.evidence import Evidence, evidence_from_json
from repairbot.output.diff import unified_diff
from repairbot.pattern import Pattern
from repairbot.sources import SourceError, Sources, parse, write_atomic
from repairbot.types import Applicability, Span
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


# Variants that may move characters (a tab for four spaces, a cookie line on top) or touch only
# lines a fix leaves alone. Each maps (before, after) of the fixed file to the variant's pair,
# and a position (line, column) in the before file to the variant's: the recorded evidence is
# moved with it, so the site is located on the altered file itself.
Position = tuple[int, int]


@dataclass(frozen=True)
class OddVariant:
    convert: Callable[[bytes, bytes, frozenset[int]], tuple[bytes, bytes]]  # (before, after, site lines)
    position: Callable[[bytes, Position], Position] = lambda before, at: at


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _tabs(line: bytes) -> bytes:
    body = line.lstrip(b" ")
    spaces = len(line) - len(body)
    return b"\t" * (spaces // 4) + b" " * (spaces % 4) + body


def tabs(before: bytes, after: bytes, site_lines: frozenset[int] = frozenset()) -> tuple[bytes, bytes]:
    return b"".join(map(_tabs, _lines(before))), b"".join(map(_tabs, _lines(after)))


def tab_position(before: bytes, at: Position) -> Position:
    line, col = at
    text = _lines(before)[line - 1]
    spaces = len(text) - len(text.lstrip(b" "))
    return line, col - 3 * (min(spaces, col) // 4)


def form_feeds(before: bytes, after: bytes, site_lines: frozenset[int]) -> tuple[bytes, bytes]:
    """A form feed on every blank line, as old Emacs page breaks put them."""

    def convert(data: bytes) -> bytes:
        return b"".join(b"\x0c" + line if not line.strip() else line for line in _lines(data))

    return convert(before), convert(after)


def trailing_whitespace(before: bytes, after: bytes, site_lines: frozenset[int]) -> tuple[bytes, bytes]:
    """Spaces and a tab at the end of every line outside the located node (and no continuation).

    Inside the node, the rewrite may give a line the layout of its neighbour (an argument
    appended or removed keeps the commas' whitespace of the others), trailing whitespace too.
    """
    old, new = _lines(before), _lines(after)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)

    def pad(line: bytes) -> bytes:
        body = line.rstrip(b"\r\n")
        if not body.strip() or body.endswith(b"\\"):
            return line
        return body + b"  \t" + line[len(body):]

    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if tag != "equal":
            continue
        for k in range(i2 - i1):
            if i1 + k + 1 not in site_lines:
                old[i1 + k], new[j1 + k] = pad(old[i1 + k]), pad(new[j1 + k])
    return b"".join(old), b"".join(new)


LATIN1_HEAD = b"# -*- coding: latin-1 -*-\n"
LATIN1_TAIL = b"# r\xe9sum\xe9: na\xefve caf\xe9 \xa7 \xb5\n"


def latin1(before: bytes, after: bytes, site_lines: frozenset[int]) -> tuple[bytes, bytes]:
    """A PEP 263 cookie on top, latin-1 bytes (not UTF-8) in a comment at the end."""
    return LATIN1_HEAD + before + LATIN1_TAIL, LATIN1_HEAD + after + LATIN1_TAIL


ODD_VARIANTS: dict[str, OddVariant] = {
    "tabs": OddVariant(tabs, tab_position),
    "form-feeds": OddVariant(form_feeds),
    "trailing-whitespace": OddVariant(trailing_whitespace),
    "latin-1-cookie": OddVariant(latin1, lambda before, at: (at[0] + 1, at[1])),
    "tabs+crlf+no-final-newline": OddVariant(
        lambda b, a, lines: tuple(crlf(x).rstrip(b"\r\n") for x in tabs(b, a)),  # type: ignore[return-value]
        tab_position,
    ),
}


def _moved_evidence(data: Any, variant: OddVariant, file: str, before: bytes) -> Any:
    """The recorded evidence with every position in ``file`` moved as the variant moved it."""
    if isinstance(data, list):
        return [_moved_evidence(item, variant, file, before) for item in data]
    if isinstance(data, str):
        # a recorded construction site, "train.py:10" (a failing module's "site")
        where, _, line = data.rpartition(":")
        if where == file and line.isdigit():
            return f"{where}:{variant.position(before, (int(line), 0))[0]}"
        return data
    if not isinstance(data, dict):
        return data
    moved = {key: _moved_evidence(value, variant, file, before) for key, value in data.items()}
    if data.get("file") == file and isinstance(data.get("line"), int):
        line, col = variant.position(before, (data["line"], data.get("col") or 0))
        moved["line"] = line
        if data.get("col") is not None:
            moved["col"] = col
        if isinstance(data.get("end_line"), int):
            end_line, end_col = variant.position(before, (data["end_line"], data.get("end_col") or 0))
            moved["end_line"] = end_line
            if data.get("end_col") is not None:
                moved["end_col"] = end_col
    return moved


def _odd_params() -> list[object]:
    return [
        pytest.param(case, variant, id=f"{case.id}-{variant}") for case in FIX_CASES for variant in ODD_VARIANTS
    ]


def _locate(pattern: Pattern, evidence: Evidence, sources: Sources) -> Site:
    assert evidence.failure is not None
    match = pattern.match(evidence.failure)
    assert match is not None
    site = pattern.locate(evidence.failure, match, evidence, sources)
    assert isinstance(site, Site), site
    return site


@pytest.mark.parametrize(("case", "variant"), _odd_params())
def test_fix_keeps_every_other_byte_of_odd_files(case: PatternCase, variant: str, tmp_path: Path) -> None:
    """Tabs, form feeds, trailing whitespace, a latin-1 file with its cookie: every fix case's
    rewrite, on the file so altered, changes exactly what it changed in the plain file."""
    odd = ODD_VARIANTS[variant]
    project = tmp_path / "project"
    shutil.copytree(case.before, project)
    site_file, _ = split_location(case.config["site"])
    target = project / site_file
    before = target.read_bytes()
    recorded = json.loads((case.folder / "evidence.json").read_text())
    pattern = _pattern(case)
    plain = _locate(pattern, evidence_from_json(recorded, root=project.resolve()), Sources())
    site_lines = frozenset(
        line for span in (plain.span, *plain.extra_spans) for line in range(span.line, span.end_line + 1)
    )
    new_before, expected = odd.convert(before, (case.after / site_file).read_bytes(), site_lines)
    try:
        compile(new_before, str(target), "exec", dont_inherit=True)
    except SyntaxError as error:  # e.g. tabs in a file whose indents are not multiples of 4
        pytest.skip(f"the {variant} variant of this file is no valid Python: {error}")
    target.write_bytes(new_before)

    evidence = evidence_from_json(_moved_evidence(recorded, odd, site_file, before), root=project.resolve())
    sources = Sources()
    site = _locate(pattern, evidence, sources)
    result = pattern.transform(site, sources.metadata(target)).bytes
    assert result == expected
    write_atomic(target, result)
    assert target.read_bytes() == expected


def test_latin1_file_with_a_coding_cookie(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    source = b"# -*- coding: latin-1 -*-\n# r\xe9sum\xe9 of the run\nimport torch\nstate = torch.load('best.pt')\n"
    path.write_bytes(source)
    pattern = next(p for p in registry.all_patterns() if p.ID == "map-location")
    (add_map_location,) = pattern.REWRITES  # the class of the module the registry loaded
    site = Site(
        pattern=pattern.ID, file=str(path), span=Span(4, 8, 4, 29), rewrite=add_map_location("'cpu'"),
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
