"""Fuzzing (issue 7 §3): the classifier, the patterns' transformers and the lint engine, attacked
with generated input (hypothesis, and hypothesmith for generated programs).

1. The classifier and the traceback parser never raise on any text (random text, random bytes
   decoded as the CLI decodes them, megabyte lines, real tracebacks cut short and wrapped in CI
   noise), stay fast on big inputs, are blind to the noise they promise to remove, and
   ``repairbot classify -`` exits 0 or 1 on any of it.
2. Every fix case of every pattern, with its site file embedded in generated surroundings
   (statements, comments, blank lines, decorated functions, CRLF and tab variants): the fix
   applies, touches only the site's lines, gives the case's own fix, parses, and a second
   application changes nothing. And every transformer, pointed at any node of a generated
   module or of a case's file, either refuses (``TransformError``) or leaves a module that parses.
3. The lint engine over generated programs and over mutations of the rules' own INVALID examples
   never crashes, every fixed output parses, and fixing the fixed output changes nothing.
4. Every pattern's ``locate``, fed each case's recorded evidence mutated (values zeroed, made
   negative or huge, strings cut, lists truncated or emptied, keys dropped), the failure's
   numbers zeroed or randomised, or no evidence at all, answers a Site or a Decline and never
   raises (issue 14 §6; the loop also turns any exception into a decline). The typed parts of
   the evidence (described locals and globals, the failing module, the limits, the environment)
   also get values of the wrong JSON type: they parse to None or empty, never to an exception.

Reproducible: examples are derandomized and nothing is stored between runs. The defaults keep
the file well under a minute on one core; ``REPAIRBOT_FUZZ_EXAMPLES=2000`` runs every property
with that many examples instead (by hand, before a release).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import os
import random
import re
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from libcst.metadata import MetadataWrapper, PositionProvider

from repairbot import registry
from repairbot.classify import Classification, classify_log
from repairbot.edits import Site
from repairbot.evidence import (
    DescribedValue,
    Environment,
    FailingModule,
    Scope,
    TracedLimits,
    evidence_from_json,
)
from repairbot.lint.engine import FixLevel, lint_bytes
from repairbot.pattern import Pattern, TransformError, span_of
from repairbot.registry import all_rules
from repairbot.sources import SourceError, Sources, line_endings, parse
from repairbot.tracebacks import is_user_path, parse_log, strip_noise, worker_frames
from repairbot.types import Decline, Failure, Span
from tests.support import PYTHON, ROOT, PatternCase, broken_by_fix
from tests.test_pattern_cases import CASES, _locate, _pattern, _relative
from tests.test_tracebacks import SPECIMENS, read_specimen

# --------------------------------------------------------------------------------------------
# Budget
# --------------------------------------------------------------------------------------------

# Examples per property: each property's default, or this many for a long run by hand.
EXAMPLES = int(os.environ.get("REPAIRBOT_FUZZ_EXAMPLES", "0") or 0)


def fuzz(default: int, deadline_s: float = 2.0, cap: int | None = None) -> settings:
    """Settings of one property: ``default`` examples (``REPAIRBOT_FUZZ_EXAMPLES`` overrides,
    up to ``cap`` for the costly ones), derandomized, no example database, and a deadline
    generous enough that a loaded CI machine does not flake (a hang still fails)."""
    examples = EXAMPLES or default
    if cap is not None and EXAMPLES:
        examples = max(default, min(examples, cap))
    return settings(
        max_examples=examples,
        deadline=deadline_s * 1000,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


PATTERNS = registry.all_patterns()
RULES = all_rules()

# hypothesmith compiles what it generates: its programs' SyntaxWarnings are not ours
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")


def compiles(data: bytes | str) -> bool:
    """Whether the interpreter accepts the module (its SyntaxWarnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(data, "<fuzz>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, UnicodeDecodeError):
            return False
    return True


# --------------------------------------------------------------------------------------------
# 1. The classifier never raises, on any text
# --------------------------------------------------------------------------------------------

# Texts that steer the parser into its branches: traceback keywords, frame pieces, log and
# prompt prefixes, escape sequences, the characters its regexes repeat over.
TRACEBACK_PIECES = (
    "Traceback (most recent call last):", "raceback (most recent call last)", 'File "',
    'ile "', '  File "train.py", line 12, in <module>', ", line ", " in ", "Error", "Exception",
    "RuntimeError: ", "Warning", ": ", "\n", "\n  ", "\n\n", "\r", "\r\n", "\t", " ", "\x1b[",
    "\x1b[31m", "\x1b]8;;", "\\x1b[0m", "~~~^^^", "^", "-->", "----> 41 ", "Cell In[3], line 5",
    "Input In [2]", "<ipython-input-1-abc>", "ipykernel_123/", ".py in ", "Original Traceback",
    "-- Process 0 terminated with the following error:", "Caught RuntimeError in DataLoader "
    "worker process 0.", "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:", "$ ", "python ",
    "train.py", "user@host:~$ ", "Run ", "+ ", ">>> ", "> ", "```", "`", "**", "[rank0]: ",
    "2024-01-02T03:04:05.1234567Z ", "[2023-01-01 10:00:00,123] ", "ERROR:root:", "INFO ",
    "svc_1  | ", "100%|####| ", "\u201c", "\u2019", "Exception has occurred: ValueError",
    "*** ", "(", ")", "[", "]", '"', "'", ".", "\\", "x", "0", "9",
)

# Lines a CI log or a terminal puts between and around traceback lines.
NOISE_LINES = (
    "", "   ", "epoch 1/10: 100%|██████████| 50/50 [00:03<00:00, 14.2it/s]",
    "\rtraining:  10%|#         | 1/10\rtraining:  20%|##        | 2/10",
    "2024-01-02T03:04:05.1234567Z ##[group]Run python train.py",
    "##[error]Process completed with exit code 1.", "::error file=train.py,line=3::boom",
    "\x1b[1;31mERROR\x1b[0m something went wrong", "[2023-01-01 10:00:00,123] INFO step 3",
    "W0102 03:04:05.123456 1234 file.cc:42] warning", "wandb: Run summary:", "$ python train.py",
    "Killing subprocess 1234", "> quoted line", "```python", "```", "Error: Process completed "
    "with exit code 1.", "ValueError", "    x = model(x)", "        ^^^^^^^^", '  File "x.py"',
)

# Noise the parser promises to remove wherever it is: transport prefixes on every line,
# escape sequences anywhere, CRLF line ends.
LINE_PREFIXES = ("2024-01-02T03:04:05.1234567Z ", "[rank0]: ", "[default3]:", "trainer_1  | ")
ESCAPES = ("\x1b[0m", "\x1b[1;31m", "\x1b[36;1m", "\x1b[2K", "\x1b]0;title\x07", "\x1b[?25l")


@functools.cache
def specimens() -> tuple[tuple[str, str], ...]:
    """(name, body) of every real traceback of the corpus."""
    return tuple((f"{p.parent.name}/{p.name}", read_specimen(p)[1]) for p in SPECIMENS)


def check_classification(text: str) -> Classification:
    """Everything the classifier offers, on ``text``: none of it may raise."""
    result = classify_log(text, PATTERNS)
    assert isinstance(result, Classification)
    if result.failure is not None:
        failure = result.failure
        assert isinstance(failure, Failure)
        assert isinstance(failure.exc_type, str) and isinstance(failure.message, str)
        assert isinstance(failure.headline, str)
        _ = failure.user_frame
        worker_frames(failure.message)
        for frame in failure.frames:
            is_user_path(frame.file)
    for candidate in result.candidates:
        assert candidate.pattern in PATTERNS
    strip_noise(text)
    return result


def summary(result: Classification) -> tuple[str | None, str | None, str | None]:
    failure = result.failure
    frame = failure.user_frame if failure else None
    return result.pattern, failure.exc_type if failure else None, frame.location if frame else None


# Any text at all: any code point the CLI could hand over (it decodes bytes with "replace").
any_text = st.text(st.characters(codec="utf-8"), max_size=3000)
decoded_bytes = st.binary(max_size=3000).map(lambda data: data.decode("utf-8", "replace"))
piece_soup = st.lists(
    st.one_of(st.sampled_from(TRACEBACK_PIECES), st.text(max_size=12)), max_size=80
).map("".join)


@fuzz(300)
@given(st.one_of(any_text, decoded_bytes, piece_soup))
def test_classifier_never_raises_on_any_text(text: str) -> None:
    check_classification(text)


@fuzz(300)
@given(st.text(st.characters(codec="utf-8"), max_size=300))
def test_is_user_path_and_worker_frames_never_raise(text: str) -> None:
    assert isinstance(is_user_path(text), bool)
    assert isinstance(worker_frames(text), tuple)
    assert isinstance(worker_frames("Original Traceback (most recent call last):\n" + text), tuple)
    parse_log(text)


@st.composite
def huge_texts(draw: st.DrawFn, size: int, newlines: bool) -> str:
    """About ``size`` characters: a drawn chunk of parser-steering pieces, repeated. Without
    newlines it is one line (a flattened log, a minified blob); with them, a long log."""
    chunk = draw(st.lists(st.sampled_from(TRACEBACK_PIECES), min_size=1, max_size=6).map("".join))
    if not newlines:
        chunk = chunk.replace("\n", " ").replace("\r", " ") or "x"
    tail = draw(st.sampled_from(("", "\nRuntimeError: boom", "Error", '  File "a.py", line 1')))
    return chunk * (size // len(chunk) + 1) + tail


@fuzz(8, deadline_s=2.0, cap=100)
@given(huge_texts(1_000_000, newlines=False))
def test_classifier_on_a_megabyte_line_is_fast(text: str) -> None:
    check_classification(text)


@fuzz(12, deadline_s=2.0, cap=200)
@given(huge_texts(300_000, newlines=True))
def test_classifier_on_long_logs_is_fast(text: str) -> None:
    check_classification(text)


@st.composite
def broken_tracebacks(draw: st.DrawFn) -> str:
    """A real traceback cut at random points, with noise lines interleaved and prefixes,
    escapes or CRs sprinkled over its lines."""
    _, body = draw(st.sampled_from(specimens()))
    start = draw(st.integers(0, len(body)))
    end = draw(st.integers(start, len(body)))
    lines = body[start:end].split("\n")
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(st.sampled_from(NOISE_LINES)))
    mangle = draw(st.sampled_from(("none", "prefix", "escapes", "crlf", "dedent", "flatten")))
    if mangle == "prefix":
        prefix = draw(st.sampled_from(LINE_PREFIXES))
        lines = [prefix + line for line in lines]
    elif mangle == "escapes":
        escape = draw(st.sampled_from(ESCAPES))
        lines = [escape + line + escape if draw(st.booleans()) else line for line in lines]
    elif mangle == "dedent":
        lines = [line.lstrip() for line in lines]
    text = ("\r\n" if mangle == "crlf" else "\n").join(lines)
    if mangle == "flatten":  # an issue tracker that lost the newlines
        text = text.replace("\n", " ")
    return text


@fuzz(300)
@given(broken_tracebacks())
def test_classifier_never_raises_on_broken_tracebacks(text: str) -> None:
    check_classification(text)


@st.composite
def noisy_specimens(draw: st.DrawFn) -> tuple[str, str, str]:
    """(name, clean body, the body with only noise the parser always removes added)."""
    name, body = draw(st.sampled_from(specimens()))
    text = body
    if draw(st.booleans()):  # escape codes at arbitrary places
        positions = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)), reverse=True)
        for at in positions:
            text = text[:at] + draw(st.sampled_from(ESCAPES)) + text[at:]
    if draw(st.booleans()):  # a transport prefix on every line, as GitHub Actions writes them
        prefix = draw(st.sampled_from(LINE_PREFIXES))
        text = "\n".join(prefix + line for line in text.split("\n"))
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return name, body, text


@fuzz(150)
@given(noisy_specimens())
def test_removable_noise_does_not_change_the_classification(sample: tuple[str, str, str]) -> None:
    name, clean, noisy = sample
    assert summary(check_classification(noisy)) == summary(classify_log(clean, PATTERNS)), name


def test_torchrun_tee_prefix_is_noise() -> None:
    """Found by the property above: torchrun's ``--tee`` prefix ``[default0]:`` (role and local
    rank) was kept, and a traceback behind it was not found."""
    for name, body in specimens():
        noisy = "\n".join("[default0]:" + line for line in body.split("\n"))
        assert summary(classify_log(noisy, PATTERNS)) == summary(classify_log(body, PATTERNS)), name


@fuzz(3, deadline_s=30.0, cap=40)
@given(st.one_of(broken_tracebacks().map(str.encode), st.binary(max_size=2000)))
def test_cli_classify_exits_0_or_1(data: bytes) -> None:
    """The real command on stdin: a verdict (0) or none (1), never a crash or a usage error."""
    result = subprocess.run(
        [PYTHON, "-m", "repairbot", "classify", "-"], input=data, capture_output=True,
        cwd=ROOT, timeout=60, check=False,
    )
    assert result.returncode in (0, 1), result.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback (most recent call last)" not in result.stderr


# --------------------------------------------------------------------------------------------
# 2. Transformers: a case's fix in generated surroundings; any node of any module
# --------------------------------------------------------------------------------------------

FIX_CASES = [case for case in CASES if case.expects_fix]


@dataclass(frozen=True)
class Located:
    """A fix case, located as tests/test_pattern_cases.py locates it."""

    case: PatternCase
    pattern: Pattern
    site: Site
    before: bytes  # the site's file as in before/
    after: bytes  # the same file as in after/


_LOCATED: dict[str, Located] = {}


def located(case: PatternCase) -> Located:
    if case.id in _LOCATED:
        return _LOCATED[case.id]
    sources = Sources()
    found = _locate(case, sources)
    assert isinstance(found, Site), f"{case.id} declined"
    site_file = _relative(case, found.file)
    _LOCATED[case.id] = Located(
        case, _pattern(case), found, sources.current(Path(found.file)),
        (case.after / site_file).read_bytes(),
    )
    return _LOCATED[case.id]


def positions(module: cst.Module) -> dict[cst.CSTNode, Span]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    return {node: span_of(where) for node, where in wrapper.resolve(PositionProvider).items()}


def statements(module: cst.Module) -> list[tuple[int, int]]:
    """(first line, last line) of every statement, a decorated one from its first decorator."""
    where = positions(module)
    found = []
    for node, span in where.items():
        if isinstance(node, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            first = span.line
            if isinstance(node, cst.FunctionDef | cst.ClassDef) and node.decorators:
                first = where[node.decorators[0]].line
            found.append((first, span.end_line))
    return found


def insertion_line(module: cst.Module, spans: Sequence[Span]) -> int:
    """The line before which statements may go so that no span is cut: the start of the
    innermost statement holding the site, moved up while it would cut another span."""
    starts = statements(module)
    line = spans[0].line
    while True:
        holding = [first for first, last in starts if first <= line <= last]
        line = max(holding) if holding else line
        cut = [span for span in spans if span.line < line <= span.end_line]
        if not cut:
            return line
        line = min(span.line for span in cut)


# Lines put around a site: each a list of lines, indented as the place they go to.
identifier = st.from_regex(r"_fuzz[a-z0-9_]{0,6}", fullmatch=True)
comment_text = st.text(
    st.characters(codec="utf-8", exclude_characters="\r\n\x0c\x00"), max_size=24
)

# Modules of Python's grammar (hypothesmith). Building its parser costs seconds of CPU: deferred,
# it is built once (deferred keeps what it built), and only when a property draws, not at
# collection in every xdist worker.
python_modules = st.deferred(lambda: hypothesmith.from_grammar())
generated_code = python_modules.filter(
    lambda code: "\r" not in code and "\x0c" not in code and "\\\n" not in code
)
surrounding = st.one_of(
    st.just([""]),
    st.sampled_from([[" "], ["\t"], ["    "]]),
    comment_text.map(lambda text: ["#" + text]),
    st.just(["pass"]),
    st.tuples(identifier, st.integers()).map(lambda t: [f"{t[0]} = {t[1]}"]),
    st.tuples(identifier, identifier).map(lambda t: [f"@{t[0]}", f"def {t[1]}():", "    pass"]),
    st.tuples(identifier, st.text("'\"abc \\", max_size=6)).map(
        lambda t: [f"{t[0]} = {t[1]!r}"]
    ),
    generated_code.map(lambda code: code.rstrip("\n").split("\n")),
)
surroundings = st.lists(surrounding, max_size=4).map(lambda blocks: [ln for b in blocks for ln in b])


def split_lines(data: bytes) -> list[bytes]:
    """Lines with their ends, split on the newline alone (as Python and LibCST do)."""
    return data.splitlines(keepends=True) if b"\r" in data else data.split(b"\n")


def embed(data: bytes, line: int, before: list[str], end: list[str]) -> bytes:
    """``data`` with ``before`` inserted before ``line`` (at that line's indentation) and ``end``
    appended."""
    lines = data.split(b"\n")
    target = lines[line - 1]
    indent = target[: len(target) - len(target.lstrip(b" \t"))]
    block = [indent + text.encode() if text else b"" for text in before]
    lines[line - 1 : line - 1] = block
    out = b"\n".join(lines)
    if end:
        out = (out if out.endswith(b"\n") or not out else out + b"\n") + b"\n".join(
            text.encode() for text in end
        ) + b"\n"
    return out


def tabify(data: bytes, unit: int) -> tuple[bytes, dict[int, int]]:
    """Leading spaces as tabs (``unit`` spaces each), and per line how many characters shorter
    the leading whitespace became."""
    out, shrink = [], {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        spaces = len(line) - len(line.lstrip(b" "))
        tabs, rest = divmod(spaces, unit)
        out.append(b"\t" * tabs + b" " * rest + line[spaces:])
        shrink[number] = spaces - tabs - rest
    return b"\n".join(out), shrink


def moved(span: Span, at: int, by: int, shrink: dict[int, int] | None) -> Span:
    """A span after ``by`` lines were inserted before line ``at`` and indentation shrank."""
    line, end_line = (span.line + by, span.end_line + by) if span.line >= at else (span.line, span.end_line)
    shrink = shrink or {}
    return Span(line, span.col - shrink.get(line, 0), end_line, span.end_col - shrink.get(end_line, 0))


def mapped_line(before: bytes, after: bytes, line: int) -> int | None:
    """Where line ``line`` of ``before`` is in ``after`` (a fix may add or remove lines above
    it); None when the fix changed the lines around it, so that the place is ambiguous."""
    matcher = difflib.SequenceMatcher(a=before.split(b"\n"), b=after.split(b"\n"), autojunk=False)
    index = line - 1
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if tag == "equal" and i1 <= index < i2:
            # the line before it must be unchanged too, or the fix may have inserted after it
            return j1 + index - i1 + 1 if index > i1 or index == 0 else None
    return None


def changed_outside(before: bytes, after: bytes, spans: Sequence[Span]) -> list[tuple[int, int]]:
    """Line ranges of ``before`` that differ in ``after`` outside every span (as
    tests/test_pattern_cases.py judges a fix surgical)."""
    allowed = [(span.line, span.end_line) for span in spans]
    matcher = difflib.SequenceMatcher(a=split_lines(before), b=split_lines(after), autojunk=False)
    outside = []
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        first, last = (i1 + 1, i2) if i2 > i1 else (i1, i1 + 1)
        if not any(first <= end and last >= start for start, end in allowed):
            outside.append((first, last))
    return outside


def transformed(pattern: Pattern, site: Site, data: bytes, module: cst.Module | None = None) -> bytes:
    """The pattern's rewrite of ``data`` at ``site``, read as repairbot reads a user's file
    (``module``: what ``parse`` already gave for ``data``)."""
    module = parse(Path(site.file), data) if module is None else module
    return pattern.transform(site, MetadataWrapper(module, unsafe_skip_copy=True)).bytes


def retarget(site: Site, moves: Mapping[Span, Span]) -> Site:
    """The site with its spans moved (a rewrite's parameters hold no positions)."""
    return dataclasses.replace(
        site,
        span=moves.get(site.span, site.span),
        extra_spans=tuple(moves.get(span, span) for span in site.extra_spans),
    )


# Patterns whose transformer, given its site again on its own output, rewrites again: the
# site's node survives inside the fix (``x`` in ``x.float()``, ``"cuda"`` in ``"cuda" if ...
# else "cpu"``), and only ``locate`` (which declines on the fixed file, see
# tests/test_pattern_cases.py) keeps the loop from applying it twice. For them the second
# application here must only not crash and parse; for every other pattern it must change
# nothing or be refused.
REAPPLY_AT_SAME_SITE = frozenset({
    "cuda-unavailable", "device-mismatch", "dtype-mismatch", "numpy-grad", "target-shape",
})


@dataclass(frozen=True)
class Variant:
    before: list[str]  # lines put before the site's statement
    end: list[str]  # lines appended to the file
    tabs: bool  # indentation as tabs
    crlf: bool  # CRLF line ends

    @property
    def only_trivia(self) -> bool:
        """Nothing but comments and blank lines before the site: the fix must still apply."""
        return all(not line.strip() or line.startswith("#") for line in self.before)


variants = st.builds(
    Variant, surroundings, st.lists(surrounding, max_size=2).map(lambda bs: [ln for b in bs for ln in b]),
    st.booleans(), st.booleans(),
)


@pytest.mark.parametrize("case", FIX_CASES, ids=[c.id for c in FIX_CASES])
def test_fix_in_generated_surroundings(case: PatternCase) -> None:
    item = located(case)
    site = item.site
    spans = (site.span, *site.extra_spans)
    module = parse(Path(site.file), item.before)
    at = insertion_line(module, spans)
    unit = len(module.default_indent) if module.default_indent.strip(" ") == "" else 0
    at_after = mapped_line(item.before, item.after, at)

    @fuzz(4, deadline_s=5.0, cap=300)
    @given(variants)
    def check(variant: Variant) -> None:
        data = embed(item.before, at, variant.before, variant.end)
        expected = embed(item.after, at_after, variant.before, variant.end) if at_after else None
        shrink = None
        if variant.tabs and unit:
            data, shrink = tabify(data, unit)
            expected = tabify(expected, unit)[0] if expected is not None else None
        if variant.crlf:
            data = data.replace(b"\n", b"\r\n")
            expected = expected.replace(b"\n", b"\r\n") if expected is not None else None
        assume(compiles(data))
        try:
            module = parse(Path(site.file), data)
        except SourceError:
            assume(False)  # a file repairbot refuses to edit at all (LibCST cannot round-trip it)
        shifted = retarget(site, {span: moved(span, at, len(variant.before), shrink) for span in spans})
        try:
            out = transformed(item.pattern, shifted, data, module)
        except TransformError:
            # a clean refusal: statements put between the site and a neighbour it needs
            assert not variant.only_trivia, "comments and blank lines made the fix refuse"
            return
        assert compiles(out), "the fix left a module the interpreter rejects"
        if variant.crlf:
            assert line_endings(out) == {"\r\n"}, "the fix wrote a line ending of its own"
        outside = changed_outside(data, out, (shifted.span, *shifted.extra_spans))
        assert not outside, f"lines {outside} changed outside the site"
        if expected is not None:
            assert out == expected, "the fix differs from the case's own fix"
        try:
            again = transformed(item.pattern, shifted, out)
        except TransformError:
            return  # refused by the pattern's own check: fine
        assert compiles(again)
        if item.pattern.ID not in REAPPLY_AT_SAME_SITE:
            assert again == out, "a second application changed the fixed file"

    check()


def node_spans(module: cst.Module) -> list[Span]:
    return sorted(set(positions(module).values()), key=lambda s: (s.line, s.col, s.end_line, s.end_col))


def random_site(data: st.DataObject, template: Site, spans: list[Span]) -> Site:
    """The template's site moved to drawn nodes (its params kept, their positions moved too)."""
    pick = st.sampled_from(spans)
    return retarget(template, {span: data.draw(pick) for span in (template.span, *template.extra_spans)})


def transform_anywhere(pattern: Pattern, site: Site, module: cst.Module) -> None:
    """A transformer pointed at any node: it refuses, or leaves a module that parses."""
    try:
        result = pattern.transform(site, MetadataWrapper(module))
    except TransformError:
        return
    code = result.bytes
    assert compiles(code), f"{pattern.ID} at {site.span} wrote code that does not compile"
    assert cst.parse_module(code).bytes == code


@functools.cache
def templates() -> tuple[tuple[Pattern, Site], ...]:
    """One site per fix case: the pattern and the parameters a real locate gave."""
    return tuple((located(case).pattern, located(case).site) for case in FIX_CASES)


# Deferred: locating every case takes seconds, which must not count against the first example.
TEMPLATES = st.deferred(lambda: st.sampled_from(templates()))


@fuzz(60, deadline_s=5.0, cap=1000)
@given(python_modules, TEMPLATES, st.data())
def test_transformers_at_any_node_of_a_generated_module(
    code: str, chosen: tuple[Pattern, Site], data: st.DataObject
) -> None:
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError:
        assume(False)  # valid Python that LibCST cannot read: repairbot refuses such a file
    spans = node_spans(module)
    assume(spans)
    pattern, template = chosen
    transform_anywhere(pattern, random_site(data, template, spans), module)


@fuzz(150, deadline_s=5.0, cap=3000)
@given(TEMPLATES, st.data())
def test_transformers_at_any_node_of_a_case_file(chosen: tuple[Pattern, Site], data: st.DataObject) -> None:
    """The nodes patterns care about (torch calls, losses, loaders) but the wrong ones."""
    source = data.draw(st.sampled_from(FIX_CASES))
    module = cst.parse_module(located(source).before)
    pattern, template = chosen
    transform_anywhere(pattern, random_site(data, template, node_spans(module)), module)


# --------------------------------------------------------------------------------------------
# 3. Lint: generated programs and mutated INVALID examples
# --------------------------------------------------------------------------------------------

INVALID_SOURCES = tuple(example.source for rule in RULES for example in rule.INVALID)
TORCH_PRELUDE = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nimport numpy as np\n"
)


def check_lint(data: bytes) -> None:
    """Lint with every fix level: no crash, fixed output parses, fixing it again is a no-op."""
    for level in (FixLevel.NONE, FixLevel.SAFE, FixLevel.UNSAFE):
        result = lint_bytes(data, Path("fuzz.py"), "fuzz.py", RULES, level)
        assert result.error is None, result.error
        assert not [note for note in result.notes if "does not parse" in note], result.notes
        assert not [note for note in result.notes if "converge" in note], result.notes
        if result.new_data is None:
            continue
        assert level is not FixLevel.NONE
        assert compiles(result.new_data), "a fixed file the interpreter rejects"
        assert broken_by_fix(data, result.new_data) == [], "a fix left a name undefined or redefined"
        if b"\r\n" in data:
            assert line_endings(result.new_data) == {"\r\n"}, "a fix wrote a line ending of its own"
        again = lint_bytes(result.new_data, Path("fuzz.py"), "fuzz.py", RULES, level)
        assert again.error is None, again.error
        assert again.new_data is None, "fixing the fixed file changed it again"


@fuzz(60, deadline_s=5.0, cap=1000)
@given(python_modules, st.booleans())
def test_lint_on_generated_programs(code: str, prelude: bool) -> None:
    text = TORCH_PRELUDE + code if prelude and not code.lstrip().startswith("from __future__") else code
    assume(compiles(text))
    check_lint(text.encode("utf-8"))


@st.composite
def mutated_examples(draw: st.DrawFn) -> bytes:
    """One to three INVALID examples joined, with generated statements and comments at
    statement boundaries, maybe wrapped in a function, indented with tabs, with CRLF ends."""
    parts = draw(st.lists(st.sampled_from(INVALID_SOURCES), min_size=1, max_size=3))
    text = "\n".join(parts)
    assume(compiles(text))
    module = cst.parse_module(text)
    starts = sorted({first for first, _ in statements(module)})
    data = text.encode("utf-8")
    for line in sorted(draw(st.lists(st.sampled_from(starts), max_size=3)), reverse=True):
        data = embed(data, line, draw(surroundings), [])
    if draw(st.booleans()):
        wrapped = [b"def _fuzz_wrapper():"] + [b"    " + line if line else line for line in data.split(b"\n")]
        data = b"\n".join(wrapped)
    if draw(st.booleans()):
        data = tabify(data, 4)[0]
    if draw(st.booleans()):
        data = data.replace(b"\n", b"\r\n")
    assume(compiles(data))
    return data


@fuzz(150, deadline_s=5.0, cap=5000)
@given(mutated_examples())
def test_lint_on_mutated_invalid_examples(data: bytes) -> None:
    check_lint(data)



# --------------------------------------------------------------------------------------------
# 4. locate never raises, on any evidence
# --------------------------------------------------------------------------------------------

_DIGITS = re.compile(r"\d+")


def mutate_json(value: Any, rng: random.Random, rate: float) -> Any:
    """``value`` with some leaves zeroed, negated, enlarged, cut or dropped (``rate`` of them)."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if rng.random() < rate / 3:
                continue  # a key the harness did not write
            out[key] = mutate_json(item, rng, rate)
        return out
    if isinstance(value, list):
        items = [mutate_json(item, rng, rate) for item in value]
        if rng.random() < rate:
            items = items[: rng.randrange(len(items) + 1)] if items else items
        return items
    if rng.random() >= rate:
        return value
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([0, 0, -1, 1, value + 1, value * 1000, -value])
    if isinstance(value, float):
        return rng.choice([0.0, -0.0, float("nan"), float("inf"), -value])
    if isinstance(value, str):
        return rng.choice(["", value[: rng.randrange(len(value) + 1)], _DIGITS.sub("0", value)])
    return value


def _case_data(case: PatternCase) -> dict[str, Any]:
    return json.loads((case.folder / "evidence.json").read_text(encoding="utf-8"))


@functools.cache
def _case_sources(case_id: str) -> Sources:
    return Sources()


def _locate_mutated(case: PatternCase, data: Mapping[str, Any], message: str | None) -> None:
    try:
        evidence = evidence_from_json(data, root=case.before.resolve())
    except (ValueError, TypeError, KeyError, AttributeError):
        return  # evidence the parent could not read is never handed to a pattern
    pattern = _pattern(case)
    failure = evidence.failure
    if failure is None:
        return
    if message is not None:
        failure = dataclasses.replace(failure, message=message)
        evidence = dataclasses.replace(evidence, failure=failure)
    match = pattern.match(failure)
    if match is None:
        return
    for given_evidence in (evidence, None):
        try:
            found = pattern.locate(failure, match, given_evidence, _case_sources(case.id))
        except SourceError:
            continue  # a file that cannot be read: the loop reports it as a decline
        assert isinstance(found, Site | Decline), f"{pattern.ID}.locate returned {found!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_locate_never_raises_on_mutated_evidence(case: PatternCase) -> None:
    original = _case_data(case)

    @fuzz(6, deadline_s=5.0, cap=500)
    @given(st.randoms(use_true_random=False), st.sampled_from([0.05, 0.2, 0.6]), st.sampled_from(["keep", "zero", "random"]))
    def check(rng: random.Random, rate: float, numbers: str) -> None:
        data = mutate_json(original, rng, rate)
        data["schema"] = original.get("schema")
        message = None
        raw = (original.get("exception") or {}).get("message")
        if isinstance(raw, str) and numbers != "keep":
            message = _DIGITS.sub(lambda m: "0" if numbers == "zero" else str(rng.randrange(0, 5)), raw)
        _locate_mutated(case, data, message)

    check()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_locate_never_raises_on_zeroed_evidence(case: PatternCase) -> None:
    """Every number of the evidence and of the message 0: the ZeroDivisionError of issue 14."""
    original = _case_data(case)

    def zero(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: zero(v) for k, v in value.items()}
        if isinstance(value, list):
            return [zero(v) for v in value]
        if isinstance(value, int) and not isinstance(value, bool):
            return 0
        return value

    data = zero(original)
    raw = (original.get("exception") or {}).get("message")
    _locate_mutated(case, data, _DIGITS.sub("0", raw) if isinstance(raw, str) else None)
    _locate_mutated(case, original, _DIGITS.sub("0", raw) if isinstance(raw, str) else None)


# Any JSON value: what a harness of another version, or a broken one, could write anywhere.
any_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["kind", "shape", "dtype", "device", "requires_grad", "type", "devices", "site", "value",
                         "length", "element", "input_shape", "num_embeddings", "forced", "what", "last_batches",
                         "left_loops", "batch_size", "batches", "python", "torch", "cuda_available", "x"]),
        inner, max_size=6,
    ),
    max_leaves=12,
)


@fuzz(300)
@given(any_json)
def test_typed_evidence_parts_never_raise(raw: Any) -> None:
    """Each typed part parses any JSON to its type, fields of the wrong type read as None."""
    described = DescribedValue.from_json(raw)
    if described is not None:
        assert isinstance(described.kind, str)
        assert described.shape is None or all(type(n) is int for n in described.shape)
        assert described.requires_grad in (None, True, False)
        assert described.element is None or isinstance(described.element, DescribedValue)
    module = FailingModule.from_json(raw)
    if module is not None:
        assert module.num_embeddings is None or type(module.num_embeddings) is int
        assert module.input_shape is None or all(type(n) is int for n in module.input_shape)
    scope = Scope.from_json(raw if isinstance(raw, dict) else {"locals": raw})
    assert all(isinstance(v, DescribedValue) for v in (*scope.locals.values(), *scope.globals.values()))
    limits = TracedLimits.from_json(raw)
    assert limits.batch_size is None or type(limits.batch_size) is int
    assert all(isinstance(str(item), str) for item in limits.forced)
    environment = Environment.from_json(raw)
    assert environment.cuda_available in (True, False)
    assert environment.python is None or isinstance(environment.python, str)


def retype_json(value: Any, rng: random.Random, rate: float) -> Any:
    """``value`` with some values (leaves or whole subtrees) swapped for one of another JSON type."""
    if rng.random() < rate:
        return rng.choice([None, "", "cuda:0", 0, -1, 2.5, True, [], {}, [1, "a"], {"kind": 3}, {"kind": "tensor"}])
    if isinstance(value, Mapping):
        return {key: retype_json(item, rng, rate) for key, item in value.items()}
    if isinstance(value, list):
        return [retype_json(item, rng, rate) for item in value]
    return value


def retype_typed_parts(data: Mapping[str, Any], rng: random.Random, rate: float) -> dict[str, Any]:
    """The record with only its typed parts retyped: what the parser promises to read tolerantly."""
    out = json.loads(json.dumps(data))
    for key in ("limits", "environment"):
        out[key] = retype_json(out.get(key), rng, rate)
    exception = out.get("exception")
    if isinstance(exception, dict):
        exception["failing_module"] = retype_json(exception.get("failing_module"), rng, rate)
        for frame in exception.get("frames") or ():
            for kind in ("locals", "globals"):
                if kind in frame:
                    frame[kind] = retype_json(frame[kind], rng, rate)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_locate_never_raises_on_retyped_evidence(case: PatternCase) -> None:
    original = _case_data(case)

    @fuzz(4, deadline_s=5.0, cap=300)
    @given(st.randoms(use_true_random=False), st.sampled_from([0.05, 0.3, 1.0]))
    def check(rng: random.Random, rate: float) -> None:
        data = retype_typed_parts(original, rng, rate)
        evidence_from_json(data, root=case.before.resolve())  # the typed parts never make it raise
        _locate_mutated(case, data, None)

    check()
