"""Invariants of the pattern catalogue, across every pattern the registry discovers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repairbot import registry
from repairbot.pattern import DOC_SECTIONS, Pattern
from repairbot.types import Applicability, BadInput

PATTERNS = registry.all_patterns()
README = Path(__file__).resolve().parent.parent / "README.md"


def _readme_ids() -> set[str]:
    """The ids the README's pattern table lists (first column, one or more per row)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Patterns\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {found for row in rows for found in re.findall(r"`([a-z0-9-]+)`", row.split(" | ")[0])}


def test_ids_are_unique_and_each_is_documented() -> None:
    ids = [p.ID for p in PATTERNS]
    assert len(ids) == len(set(ids))
    # no list of ids here: the catalogue is what the folders hold, and the README names each
    assert set(ids) == _readme_ids()
    assert {"linear-in-features", "map-location"} <= set(ids)


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.ID)
def test_pattern_metadata(pattern: Pattern) -> None:
    assert registry.pattern_folder(pattern).name == pattern.ID.replace("-", "_")
    assert type(pattern).__name__ == "".join(part.title() for part in pattern.ID.split("-"))
    assert pattern.TITLE and len(pattern.TITLE) < 90
    assert isinstance(pattern.APPLICABILITY, Applicability)
    assert pattern.SIGNATURES
    sections = pattern.documentation()
    for section in DOC_SECTIONS:
        assert sections.get(section), f"docstring section {section!r} missing"
    if pattern.FIXES:
        assert pattern.Transformer is not None
    else:
        assert pattern.REMEDY, "a diagnose-only pattern states the standard remedy"
        assert pattern.APPLICABILITY is Applicability.DISPLAY_ONLY


def test_select_by_id() -> None:
    chosen = registry.select(PATTERNS, include=["map-location"])
    assert [p.ID for p in chosen] == ["map-location"]
    rest = registry.select(PATTERNS, exclude=["map-location"])
    assert "map-location" not in {p.ID for p in rest}
    with pytest.raises(BadInput, match="unknown pattern id: nope"):
        registry.select(PATTERNS, include=["nope"])


def test_the_generated_catalogue_page_is_fresh() -> None:
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "gen_pattern_docs.py"
    spec = importlib.util.spec_from_file_location("gen_pattern_docs", script)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.PAGE.read_text(encoding="utf-8") == generator.render(), (
        "docs/patterns.md is stale: run python scripts/gen_pattern_docs.py"
    )
