"""Every lint rule against its own VALID/INVALID examples, and the invariants of the rule set."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from repairbot.lint.engine import (
    FileResult,
    FixLevel,
    lint_bytes,
    needed_positions,
    positions,
    run_rules,
)
from repairbot.lint.rule import Invalid, LintRule, Valid
from repairbot.registry import all_patterns, all_rules, select_rules
from repairbot.types import Applicability, BadInput
from tests.support import broken_by_fix, catalogue_generator

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
        assert example.fix is Applicability.NONE
        assert fixed.new_data is None and fixed.findings == findings
        return
    assert example.fix in (Applicability.SAFE, Applicability.UNSAFE)
    assert fixed.new_data is not None and fixed.new_data.decode("utf-8") == example.fixed_source
    assert fixed.fixed == 1 and fixed.findings == ()
    # the fixed code compiles and uses no name the example did not already leave undefined
    assert broken_by_fix(example.source, fixed.new_data) == []
    assert (safe_only.new_data is not None) == (example.fix is Applicability.SAFE)
    # a second pass changes nothing
    again = lint(rule, example.fixed_source, FixLevel.UNSAFE)
    assert again.new_data is None and again.findings == ()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.ID)
def test_rule_metadata(rule: type[LintRule]) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.ID)
    assert rule.__name__ == "".join(part.title() for part in rule.ID.split("-"))
    assert rule.TITLE and len(rule.TITLE) < 90 and rule.MESSAGE
    assert rule.APPLICABILITY in (Applicability.NONE, Applicability.SAFE, Applicability.UNSAFE)
    assert rule.undocumented() == [], "docstring sections missing"
    assert rule.VALID and rule.INVALID, "every rule shows what it finds and what it leaves alone"
    assert all(isinstance(case.fix, Applicability) for case in rule.INVALID)
    # a rule without a fix never claims one
    if rule.APPLICABILITY is Applicability.NONE:
        assert all(case.fix is Applicability.NONE for case in rule.INVALID)
    # a rule with a folder of its own names the folder after itself
    folder = rule.folder()
    pattern_folders = {p.folder() for p in all_patterns()}
    if folder not in pattern_folders and (folder / "pattern.py").exists() is False:
        siblings = [r for r in RULES if r.folder() == folder]
        if len(siblings) == 1:
            assert folder.name == rule.ID.replace("-", "_")


def test_rule_ids_are_unique_and_never_a_pattern_id_with_another_meaning() -> None:
    ids = [rule.ID for rule in RULES]
    assert len(ids) == len(set(ids))
    assert not set(ids) & {p.ID for p in all_patterns()}


def test_folders_with_only_lint_rules_are_not_runtime_patterns() -> None:
    lint_only = {r.folder() for r in RULES} - {p.folder() for p in all_patterns()}
    assert lint_only, "some rules have folders of their own"
    for folder in lint_only:
        assert not (folder / "pattern.py").exists()
        assert (folder / "__init__.py").read_text().startswith('"""')


def test_select_by_id() -> None:
    assert [r.ID for r in select_rules(RULES, include=["forward-call"])] == ["forward-call"]
    assert "forward-call" not in {r.ID for r in select_rules(RULES, exclude=["forward-call"])}
    with pytest.raises(BadInput, match=r"unknown lint rule id: nope \(see docs/lint-rules.md\)"):
        select_rules(RULES, include=["nope"])


def test_the_generated_rules_page_is_fresh() -> None:
    generator = catalogue_generator()
    page = next(page for page in generator.PAGES if page.path.name == "lint-rules.md")
    assert generator.read(page.path) == page.text(), "docs/lint-rules.md is stale: run python scripts/gen_docs.py"


def test_findings_carry_the_applicability_enum_and_print_its_word() -> None:
    # one enum for patterns and rules; the formats print the same words as before
    fixable = next(rule for rule in RULES if rule.APPLICABILITY is Applicability.SAFE)
    finding = lint(fixable, fixable.INVALID[0].source).findings[0]
    assert finding.fix is fixable.INVALID[0].fix
    assert isinstance(finding.fix, Applicability) and f"{finding.fix}" == finding.fix.value
    assert f"{Applicability.NONE}" == "none" and Applicability("none") is Applicability.NONE


@pytest.mark.parametrize("label", [None, Applicability.NONE, Applicability.DIAGNOSE_ONLY])
def test_a_fix_without_a_safe_or_unsafe_label_is_a_bug_of_the_rule(label: Applicability | None) -> None:
    class UnlabelledFix(LintRule):
        """Replaces every ``pass`` (and claims no applicability for it)."""

        ID = "unlabelled-fix"
        TITLE = MESSAGE = "x"

        def visit_Pass(self, node: cst.Pass) -> None:
            self.report(node, replacement=cst.Expr(cst.Ellipsis()), applicability=label)

    result = lint_bytes(b"pass\n", Path("example.py"), "example.py", [UnlabelledFix], FixLevel.UNSAFE)
    assert result.error is not None and "a fix needs an applicability, safe or unsafe" in result.error


# --------------------------------------------------------------------------------------------
# Real code: fixes that break nothing, prefilters that skip nothing, positions of the
# statements with findings equal to those of the whole module
# --------------------------------------------------------------------------------------------

TORCH_SAMPLE_EVERY = 12  # one torch file in 12 (by path): the whole package takes minutes here


def _torch_sample() -> list[Path]:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return []
    return sorted(Path(spec.origin).parent.rglob("*.py"))[::TORCH_SAMPLE_EVERY]


def real_files() -> list[Path]:
    """The tests' real code: the fixtures' projects, the patterns' cases, a sample of torch."""
    own = [*sorted((ROOT / "fixtures").rglob("*.py")), *sorted((ROOT / "patterns").glob("*/cases/**/*.py"))]
    return [*own, *_torch_sample()]


def test_unsafe_fixes_of_real_files_compile_and_bind_every_name() -> None:
    """`--fix --unsafe-fixes` over real code (as a copy outside its package would be linted:
    every rule on): the result compiles and has no undefined or redefined name it lacked."""
    files = real_files()
    assert len(files) > 100
    changed = 0
    for path in files:
        data = path.read_bytes()
        result = lint_bytes(data, Path(path.name), str(path), RULES, FixLevel.UNSAFE)
        assert result.error is None, (path, result.error)
        if result.new_data is not None:
            changed += 1
            assert broken_by_fix(data, result.new_data) == [], path
    assert changed, "some real file has something to fix"


def _prefilter_agrees(data: bytes) -> list[str]:
    """The rules whose prefilter would skip a file they report on (the skipped rules run
    anyway, all in one walk)."""
    skipped = [rule for rule in RULES if not rule.applies(data, None)]
    if not skipped:
        return []
    try:
        module = cst.parse_module(data)
    except Exception:
        return []
    return sorted({report.rule for report in run_rules(module, skipped, Path("x.py"), None)})


def test_prefilters_skip_no_real_file_a_rule_reports_on() -> None:
    sources = [example.source.encode() for rule in RULES for example in (*rule.VALID, *rule.INVALID)]
    for data in [*sources, *(path.read_bytes() for path in real_files())]:
        assert _prefilter_agrees(data) == [], data[:200]


class _Respell(cst.CSTTransformer):
    """Spells the same program another way: calls split over lines or with a space before
    their parenthesis, imports parenthesised over several lines or given an alias (its uses
    renamed), sums without spaces; what a prefilter that reads spellings could miss."""

    def __init__(self, draw: st.DrawFn) -> None:
        super().__init__()
        self.draw = draw
        self.renames: dict[str, str] = {}

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.draw(st.booleans()):
            updated = updated.with_changes(whitespace_after_func=cst.SimpleWhitespace(" "))
        if updated.args and self.draw(st.booleans()):
            updated = updated.with_changes(whitespace_before_args=cst.ParenthesizedWhitespace(
                first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                last_line=cst.SimpleWhitespace("    "),
            ))
        return updated

    def leave_BinaryOperation(self, original: cst.BinaryOperation, updated: cst.BinaryOperation) -> cst.BinaryOperation:
        if isinstance(updated.operator, cst.Add | cst.Subtract) and self.draw(st.booleans()):
            operator = type(updated.operator)(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
            return updated.with_changes(operator=operator)
        return updated

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        if isinstance(updated.names, cst.ImportStar):
            return updated
        names = []
        for alias in updated.names:
            if alias.asname is None and isinstance(alias.name, cst.Name) and self.draw(st.booleans()):
                new = f"{alias.name.value}_alias"
                self.renames[alias.name.value] = new
                alias = alias.with_changes(asname=cst.AsName(name=cst.Name(new)))
            names.append(alias)
        if self.draw(st.booleans()):
            indented = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                                   last_line=cst.SimpleWhitespace("    "))
            names = [n.with_changes(comma=cst.Comma(whitespace_after=indented)) for n in names]
            return updated.with_changes(
                names=names, lpar=cst.LeftParen(whitespace_after=indented), rpar=cst.RightParen(),
            )
        return updated.with_changes(names=names)

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        names = []
        for alias in updated.names:
            if alias.asname is None and isinstance(alias.name, cst.Name) and self.draw(st.booleans()):
                new = f"{alias.name.value}_alias"
                self.renames[alias.name.value] = new
                alias = alias.with_changes(asname=cst.AsName(name=cst.Name(new)))
            names.append(alias)
        return updated.with_changes(names=names)


class _Rename(cst.CSTTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        super().__init__()
        self.renames = renames
        self.in_import = 0

    def visit_Import(self, node: cst.Import) -> None:
        self.in_import += 1

    def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
        self.in_import -= 1
        return updated

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.in_import += 1

    def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
        self.in_import -= 1
        return updated

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # only the head of a chain is a use of the imported name
        return False

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(value=original.value.visit(self))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if self.in_import or original.value not in self.renames:
            return updated
        return updated.with_changes(value=self.renames[original.value])


@st.composite
def respelled_examples(draw: st.DrawFn) -> bytes:
    source = draw(st.sampled_from([example.source for rule in RULES for example in (*rule.INVALID, *rule.VALID)]))
    respell = _Respell(draw)
    module = cst.parse_module(source).visit(respell)
    if respell.renames:
        module = module.visit(_Rename(respell.renames))
    code = module.code
    try:
        compile(code, "<respelled>", "exec", dont_inherit=True)
    except SyntaxError:
        assume(False)
    return code.encode()


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(respelled_examples())
def test_prefilters_skip_no_respelled_example_a_rule_reports_on(data: bytes) -> None:
    assert _prefilter_agrees(data) == []


def test_positions_of_the_statements_with_findings_equal_the_whole_modules() -> None:
    """The engine generates code only for the statements that hold findings; their nodes'
    ranges must be LibCST's own for the whole module."""
    checked = 0
    sources = [example.source.encode() for rule in RULES for example in rule.INVALID]
    # a third of the torch sample: the whole module's positions are what is slow here
    files = [*real_files()[: -len(_torch_sample()) or None], *_torch_sample()[::3]]
    for data in [*sources, *(path.read_bytes() for path in files)]:
        module = cst.parse_module(data)
        reports = run_rules(module, RULES, Path("x.py"), None)
        if not reports:
            continue
        text = data.decode(module.encoding)
        needed = {node for report in reports for node in (report.node, *report.replacements())}
        hints = {report.statements for report in reports if report.statements}
        partial = needed_positions(module, text, needed, hints)
        whole = positions(module)
        assert {n: partial[n] for n in needed} == {n: whole[n] for n in needed}
        checked += 1
    assert checked > 20


def test_softmax_of_forward_reaches_cross_entropy_through_an_attribute_models_forward() -> None:
    """`self.model.forward(x)` in a trainer is the model's forward as much as `self.model(x)`:
    the softmax that ends it is found; a forward that ends in logits is not."""
    from patterns.softmax_before_cross_entropy.lint import SoftmaxBeforeCrossEntropy

    source = (
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 3)\n"
        "    def forward(self, x):\n"
        "        return nn.functional.softmax(self.fc(x), dim=-1)\n"
        "class Trainer:\n"
        "    def __init__(self):\n"
        "        self.model = Net()\n"
        "        self.loss = nn.CrossEntropyLoss()\n"
        "    def step(self, x, y):\n"
        "        return self.loss(self.model.forward(x), y)\n"
    )
    findings = lint(SoftmaxBeforeCrossEntropy, source).findings
    assert [(f.line, f.column, f.fix) for f in findings] == [(7, 16, Applicability.SAFE)]
    fixed = lint(SoftmaxBeforeCrossEntropy, source, FixLevel.SAFE).new_data
    assert fixed is not None and b"        return self.fc(x)\n" in fixed
    logits = source.replace("nn.functional.softmax(self.fc(x), dim=-1)", "self.fc(x)")
    assert lint(SoftmaxBeforeCrossEntropy, logits).findings == ()
    # a method of another name is not forward: what it returns never reaches the loss
    other = source.replace("self.model.forward(x)", "self.model.features(x)")
    assert lint(SoftmaxBeforeCrossEntropy, other).findings == ()
