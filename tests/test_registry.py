"""Invariants of the pattern catalogue, across every pattern the registry discovers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repairbot import registry
from repairbot.lint.rule import LintRule
from repairbot.pattern import Pattern
from repairbot.types import Applicability, BadInput
from repairbot.unit import DocFormat, discover
from tests.support import catalogue_generator

gen_docs = catalogue_generator()
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
    assert pattern.folder().name == pattern.ID.replace("-", "_")
    assert type(pattern).__name__ == "".join(part.title() for part in pattern.ID.split("-"))
    assert pattern.TITLE and len(pattern.TITLE) < 90
    assert pattern.APPLICABILITY in (Applicability.SAFE, Applicability.UNSAFE, Applicability.DIAGNOSE_ONLY)
    assert pattern.SIGNATURES
    assert pattern.undocumented() == [], "docstring sections missing"
    if pattern.FIXES:
        assert pattern.REWRITES, "a fixing pattern declares the rewrites its sites carry"
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
    page = next(page for page in gen_docs.PAGES if page.path.name == "patterns.md")
    assert gen_docs.read(page.path) == page.text(), (
        "docs/patterns.md is stale: run python scripts/gen_docs.py"
    )


# --------------------------------------------------------------------------------------------
# The unit authoring API itself: one docstring parser, one discovery, the catalogue's hook
# --------------------------------------------------------------------------------------------


def test_the_parser_knows_only_its_formats_titles() -> None:
    doc = DocFormat(required=("What it finds", "Not handled"), optional=("Differs",))
    text = """First paragraph
    on two lines.

    What it finds:
        Indented text,

        two paragraphs.
    Why it fails
        a title of another kind is text of the section it is in.
    Not handled
        Nothing.
    """
    sections = doc.parse(text)
    assert sections == {
        "": "First paragraph\non two lines.",
        "What it finds": "Indented text,\n\n    two paragraphs.\nWhy it fails\n    a title of another kind is text of the section it is in.",
        "Not handled": "Nothing.",
    }
    assert doc.missing(sections) == []
    assert doc.missing(doc.parse("Only a paragraph.\n\nNot handled\n    x")) == ["What it finds"]
    assert doc.missing({"": "x", "What it finds": "", "Not handled": "x"}) == ["What it finds"]


def test_one_discovery_finds_every_kind_in_the_same_folders() -> None:
    patterns, rules = discover(Pattern), discover(LintRule)
    assert [type(p) for p in PATTERNS] == list(patterns)
    folders = {unit.folder() for unit in (*patterns, *rules)}
    assert all((folder / "pattern.py").is_file() or (folder / "lint.py").is_file() for folder in folders)
    # a folder with both kinds is one folder of the walk, found by each kind's discovery
    both = {p.folder() for p in patterns} & {r.folder() for r in rules}
    assert both, "some patterns have lint rules beside them"
    assert all(issubclass(p, Pattern) for p in patterns) and all(issubclass(r, LintRule) for r in rules)


def test_a_page_can_be_a_generated_region_of_a_hand_written_file(tmp_path: Path) -> None:
    # the hook a third kind (the health checks' README table) uses
    readme = tmp_path / "README.md"
    readme.write_bytes(
        b"# Title\r\n\nHand text.\n<!-- BEGIN GENERATED ids -->\nold\n<!-- END GENERATED ids -->\nAfter.\n"
    )
    page = gen_docs.Page(readme, lambda: discover(Pattern), lambda units: "".join(f"- {u.ID}\n" for u in units), region="ids")
    expected = "".join(f"- {p.ID}\n" for p in PATTERNS)
    assert page.text() == (
        "# Title\r\n\nHand text.\n<!-- BEGIN GENERATED ids -->\n" + expected + "<!-- END GENERATED ids -->\nAfter.\n"
    )
    readme.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no region"):
        page.text()
