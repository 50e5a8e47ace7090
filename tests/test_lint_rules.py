"""Every lint rule against its own VALID/INVALID examples, and the invariants of the rule set."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from repairbot import registry as pattern_registry
from repairbot.lint.engine import FileResult, FixLevel, lint_bytes
from repairbot.lint.registry import all_rules, rule_folder, select
from repairbot.lint.rule import DOC_SECTIONS, Invalid, LintRule, Valid
from repairbot.types import Applicability, BadInput

ROOT = Path(__file__).resolve().parent.parent
RULES = all_rules()
VALID = [(rule, example) for rule in RULES for example in rule.VALID]
INVALID = [(rule, example) for rule in RULES for example in rule.INVALID]


def _id(item: tuple[type[LintRule], Valid | Invalid]) -> str:
    rule, example = item
    cases = rule.VALID if isinstance(example, Valid) else rule.INVALID
    return f"{rule.ID}/{cases.index(example)}"  # type: ignore[arg-type]


def lint(rule: type[LintRule], source: str, fix: FixLevel = FixLevel.NONE) -> FileResult:
    result = lint_bytes(source.encode("utf-8"), Path("example.py"), "example.py", [rule], fix)
    assert result.error is None, result.error
    return result


@pytest.mark.parametrize("item", VALID, ids=list(map(_id, VALID)))
def test_valid_examples_have_no_finding(item: tuple[type[LintRule], Valid]) -> None:
    rule, example = item
    assert [(f.line, f.column, f.message) for f in lint(rule, example.source).findings] == []


@pytest.mark.parametrize("item", INVALID, ids=list(map(_id, INVALID)))
def test_invalid_examples_are_found_and_fixed(item: tuple[type[LintRule], Invalid]) -> None:
    rule, example = item
    findings = lint(rule, example.source).findings
    assert [(f.rule, f.line, f.column) for f in findings] == [(rule.ID, example.line, example.column)]
    finding = findings[0]
    assert finding.fix == example.fix
    if example.message is not None:
        assert example.message in finding.message
    # the fix alone gives the expected text, byte for byte, and only when its label allows it
    fixed = lint(rule, example.source, FixLevel.UNSAFE)
    safe_only = lint(rule, example.source, FixLevel.SAFE)
    if example.fixed_source is None:
        assert example.fix == "none"
        assert fixed.new_data is None and fixed.findings == findings
        return
    assert example.fix in ("safe", "unsafe")
    assert fixed.new_data is not None and fixed.new_data.decode("utf-8") == example.fixed_source
    assert fixed.fixed == 1 and fixed.findings == ()
    assert (safe_only.new_data is not None) == (example.fix == "safe")
    # a second pass changes nothing
    again = lint(rule, example.fixed_source, FixLevel.UNSAFE)
    assert again.new_data is None and again.findings == ()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.ID)
def test_rule_metadata(rule: type[LintRule]) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.ID)
    assert rule.__name__ == "".join(part.title() for part in rule.ID.split("-"))
    assert rule.TITLE and len(rule.TITLE) < 90 and rule.MESSAGE
    assert rule.APPLICABILITY in (None, Applicability.SAFE, Applicability.UNSAFE)
    sections = rule.documentation()
    for section in DOC_SECTIONS:
        assert sections.get(section), f"docstring section {section!r} missing"
    assert rule.VALID and rule.INVALID, "every rule shows what it finds and what it leaves alone"
    # a rule without a fix never claims one
    if rule.APPLICABILITY is None:
        assert all(case.fix == "none" for case in rule.INVALID)
    # a rule with a folder of its own names the folder after itself
    folder = rule_folder(rule)
    pattern_folders = {pattern_registry.pattern_folder(p) for p in pattern_registry.all_patterns()}
    if folder not in pattern_folders and (folder / "pattern.py").exists() is False:
        siblings = [r for r in RULES if rule_folder(r) == folder]
        if len(siblings) == 1:
            assert folder.name == rule.ID.replace("-", "_")


def test_rule_ids_are_unique_and_never_a_pattern_id_with_another_meaning() -> None:
    ids = [rule.ID for rule in RULES]
    assert len(ids) == len(set(ids))
    assert not set(ids) & {p.ID for p in pattern_registry.all_patterns()}


def test_folders_with_only_lint_rules_are_not_runtime_patterns() -> None:
    lint_only = {rule_folder(r) for r in RULES} - {pattern_registry.pattern_folder(p) for p in pattern_registry.all_patterns()}
    assert lint_only, "some rules have folders of their own"
    for folder in lint_only:
        assert not (folder / "pattern.py").exists()
        assert (folder / "__init__.py").read_text().startswith('"""')


def test_select_by_id() -> None:
    assert [r.ID for r in select(RULES, include=["forward-call"])] == ["forward-call"]
    assert "forward-call" not in {r.ID for r in select(RULES, exclude=["forward-call"])}
    with pytest.raises(BadInput, match="unknown lint rule id: nope"):
        select(RULES, include=["nope"])


def test_the_generated_rules_page_is_fresh() -> None:
    script = ROOT / "scripts" / "gen_lint_docs.py"
    spec = importlib.util.spec_from_file_location("gen_lint_docs", script)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.PAGE.read_text(encoding="utf-8") == generator.render(), (
        "docs/lint-rules.md is stale: run python scripts/gen_lint_docs.py"
    )
