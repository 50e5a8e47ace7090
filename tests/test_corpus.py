"""Round trip over a real corpus: every ``.py`` file of the installed torch package.

Each file goes through repairbot's reader (``repairbot.sources.parse``: the bytes are parsed
and regenerated, and the file is refused unless they come back identical): it is either
reproduced byte for byte or refused with a stated reason, never silently changed. Every fixing
pattern's transformer then runs, with a site that locates nothing, over the files that use
what the transformers rewrite (calls such as ``nn.Linear``, ``torch.load``, ``.view``,
augmented assignments): the module must come back byte-identical. The corpus is split in
shards that run in parallel; each prints its figures (files, MB, seconds, files/s, refusals).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from repairbot import registry
from repairbot.edits import Site
from repairbot.evidence import evidence_from_json
from repairbot.pattern import Pattern, TransformError
from repairbot.sources import SourceError, Sources, parse
from repairbot.types import Span
from tests.support import pattern_cases

pytestmark = pytest.mark.slow

SHARDS = 8
# Refusals that are the reader doing its job; anything else (LibCST could not reproduce a
# file, say) is a finding.
STATED_REASONS = {
    "mixed line endings": re.compile(r"mixes CRLF and LF line endings"),
    "bare CR line endings": re.compile(r"bare CR line endings"),
}
# What the transformers rewrite: a file using several of these gets every transformer run
# over it. The selection is bounded (a transformer's pass costs about as much as parsing).
CONSTRUCTS = {
    name: re.compile(regex.encode())
    for name, regex in {
        "Linear": r"\bLinear\(",
        "load": r"\bload\(",
        "view": r"\.view\(",
        "augmented assignment": r"[-+*/]= ",
        "inplace": r"\binplace\s*=|_\(",
        "to": r"\.to\(",
        "numpy": r"\.numpy\(",
        "dtype": r"\.(?:float|long|double)\(",
        "squeeze": r"squeeze\(",
        "no_grad": r"no_grad\(",
        "cuda": r"\.cuda\(|\"cuda\"|'cuda'",
    }.items()
}
TRANSFORM_BUDGET = 1_200_000  # bytes of source over which every transformer runs
TRANSFORM_MAX_FILE = 40_000


def _torch_root() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


@functools.cache
def corpus() -> tuple[Path, ...]:
    """Every file of torch's package; listed once per test process, for every shard."""
    root = _torch_root()
    return tuple(sorted(root.rglob("*.py"))) if root else ()


def shard(files: tuple[Path, ...], number: int) -> list[Path]:
    """Every SHARDS-th file by size, so that the shards weigh about the same."""
    by_size = sorted(files, key=lambda p: (-p.stat().st_size, p))
    return sorted(by_size[number::SHARDS])


@functools.cache
def transform_selection(files: tuple[Path, ...]) -> frozenset[Path]:
    """The files that use the most of what the transformers rewrite, up to the budget (chosen
    over the whole corpus, once per test process: it reads every file)."""
    scored = []
    for path in files:
        size = path.stat().st_size
        if size > TRANSFORM_MAX_FILE:
            continue
        data = path.read_bytes()
        kinds = sum(1 for regex in CONSTRUCTS.values() if regex.search(data))
        if kinds >= 3:
            scored.append((-kinds, size, path))
    chosen: set[Path] = set()
    total = 0
    for _, size, path in sorted(scored):
        if total + size > TRANSFORM_BUDGET:
            continue
        chosen.add(path)
        total += size
    return frozenset(chosen)


def fixing_patterns() -> list[Pattern]:
    return [p for p in registry.all_patterns() if p.FIXES]


@functools.cache
def transformers() -> tuple[tuple[Pattern, Site], ...]:
    """Each fixing pattern with its site pointing nowhere, made once per test process."""
    return tuple((pattern, nowhere_site(pattern)) for pattern in fixing_patterns())


def nowhere_site(pattern: Pattern) -> Site:
    """A site of the pattern with real parameters (its first fix case's), pointing nowhere."""
    for case in pattern_cases():
        if case.pattern_id != pattern.ID or not case.expects_fix:
            continue
        data = json.loads((case.folder / "evidence.json").read_text(encoding="utf-8"))
        evidence = evidence_from_json(data, root=case.before.resolve())
        assert evidence.failure is not None
        match = pattern.match(evidence.failure)
        assert match is not None
        site = pattern.locate(evidence.failure, match, evidence, Sources())
        if isinstance(site, Site):
            nowhere = Span(0, 0, 0, 0)
            return replace(site, span=nowhere, extra_spans=tuple(nowhere for _ in site.extra_spans))
    raise AssertionError(f"{pattern.ID}: no fix case locates a site")


@pytest.mark.skipif(_torch_root() is None, reason="torch is not installed")
@pytest.mark.parametrize("number", range(SHARDS))
def test_torch_corpus_round_trips_and_transformers_change_nothing(number: int, capsys: pytest.CaptureFixture[str]) -> None:
    files = corpus()
    assert len(files) > 1000
    mine = shard(files, number)
    selected = transform_selection(files) & set(mine)
    patterns = transformers()
    assert patterns
    refusals: dict[str, list[str]] = {}
    size = transformed = 0
    started = time.perf_counter()
    for path in mine:
        data = path.read_bytes()
        size += len(data)
        try:
            module = parse(path, data)
        except SourceError as error:
            reason = next((name for name, regex in STATED_REASONS.items() if regex.search(str(error))), str(error))
            refusals.setdefault(reason, []).append(path.as_posix())
            continue
        # parse regenerated the bytes and compared them; a refusal would have said so
        assert isinstance(module, cst.Module)
        if path not in selected:
            continue
        transformed += 1
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        for pattern, site in patterns:
            # a site that designates no node of the file: the rewrite refuses, and edits nothing
            with pytest.raises(TransformError):
                pattern.transform(replace(site, file=str(path)), wrapper)
        # LibCST's nodes are immutable: only a transformer writing into a node could change the
        # module's bytes, and such a change stays. One regeneration after all of them finds it
        # (each after every transformer costs as much as the round trip); then each transformer
        # runs alone on a fresh parse, to name the one that did it.
        if wrapper.module.bytes != data:
            for pattern, site in patterns:
                alone = MetadataWrapper(parse(path, data), unsafe_skip_copy=True)
                with pytest.raises(TransformError):
                    pattern.transform(replace(site, file=str(path)), alone)
                assert alone.module.bytes == data, f"{pattern.ID} rewrote bytes of {path} without a site"
            raise AssertionError(f"the transformers together rewrote bytes of {path} without a site")
    took = time.perf_counter() - started
    root = _torch_root()
    listed = "; ".join(
        f"{reason}: {len(paths)} ({', '.join(Path(p).relative_to(root).as_posix() for p in paths)})"  # type: ignore[arg-type]
        for reason, paths in sorted(refusals.items())
    )
    with capsys.disabled():
        sys.stderr.write(
            f"\ntorch corpus shard {number + 1}/{SHARDS}: {len(mine)} files, {size / 1e6:.1f} MB in {took:.1f} s "
            f"({len(mine) / took:.0f} files/s); {transformed} files through {len(patterns)} transformers; "
            f"refused {sum(map(len, refusals.values()))}{': ' + listed if listed else ''}\n"
        )
    unexplained = {reason: paths for reason, paths in refusals.items() if reason not in STATED_REASONS}
    assert not unexplained, f"refused for reasons other than the stated ones: {unexplained}"
