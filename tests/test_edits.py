"""The one applier of node edits (repairbot/edits.py), shared by runtime patterns and lint rules."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
import pytest
from libcst.metadata import MetadataWrapper

from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes, apply_edits
from repairbot.pattern import Pattern, TransformError
from repairbot.types import Applicability, Span

SOURCE = "import torch\n\n# the model\nmodel = build(1)\nrun(model, 2)\n"


def first(module: cst.Module, matcher: m.BaseMatcherNode) -> cst.CSTNode:
    return m.findall(module, matcher)[0]


def test_a_replacement_lands_by_identity_and_the_rest_keeps_its_bytes() -> None:
    module = cst.parse_module(SOURCE)
    one = first(module, m.Integer(value="1"))
    assert apply_edits(module, [Edit(one, cst.Integer("3"))]).code == SOURCE.replace("build(1)", "build(3)")


def test_an_edit_inside_another_edits_replacement_is_applied_there() -> None:
    module = cst.parse_module(SOURCE)
    statement = first(module, m.SimpleStatementLine(body=[m.Assign()]))
    one = first(module, m.Integer(value="1"))
    assert isinstance(statement, cst.SimpleStatementLine)
    added = cst.parse_statement("device = 'cpu'\n").with_changes(leading_lines=statement.leading_lines)
    # the statement keeps its children by identity, so the edit of `1` lands inside it
    moved = cst.FlattenSentinel([added, statement.with_changes(leading_lines=[])])
    result = apply_edits(module, [Edit(statement, moved), Edit(one, cst.Integer("3"))])
    assert result.code == "import torch\n\n# the model\ndevice = 'cpu'\nmodel = build(3)\nrun(model, 2)\n"


def test_a_statement_inserted_after_its_anchor_keeps_the_edits_inside_the_anchor() -> None:
    module = cst.parse_module(SOURCE)
    statement = first(module, m.SimpleStatementLine(body=[m.Assign()]))
    one = first(module, m.Integer(value="1"))
    after = cst.FlattenSentinel([statement, cst.parse_statement("model.eval()\n")])
    result = apply_edits(module, [Edit(statement, after), Edit(one, cst.Integer("3"))])
    assert result.code == "import torch\n\n# the model\nmodel = build(3)\nmodel.eval()\nrun(model, 2)\n"


def test_a_statement_is_removed() -> None:
    module = cst.parse_module(SOURCE)
    run = first(module, m.SimpleStatementLine(body=[m.Expr()]))
    assert apply_edits(module, [Edit(run, cst.RemovalSentinel.REMOVE)]).code == SOURCE.replace("run(model, 2)\n", "")


def test_an_edit_dropped_by_its_neighbours_replacement_is_refused() -> None:
    module = cst.parse_module(SOURCE)
    call = first(module, m.Call(func=m.Name("build")))
    one = first(module, m.Integer(value="1"))
    with pytest.raises(EditError, match="did not land exactly once"):
        apply_edits(module, [Edit(call, cst.parse_expression("other()")), Edit(one, cst.Integer("3"))])


def test_a_node_held_twice_by_a_replacement_is_refused() -> None:
    module = cst.parse_module(SOURCE)
    call = first(module, m.Call(func=m.Name("build")))
    one = first(module, m.Integer(value="1"))
    assert isinstance(call, cst.Call)
    twice = call.with_changes(args=[*call.args, cst.Arg(one)])
    with pytest.raises(EditError, match="2 times"):
        apply_edits(module, [Edit(call, twice), Edit(one, cst.Integer("3"))])


def test_two_edits_of_one_node_no_edit_and_a_foreign_node_are_refused() -> None:
    module = cst.parse_module(SOURCE)
    one = first(module, m.Integer(value="1"))
    with pytest.raises(EditError, match="two edits"):
        apply_edits(module, [Edit(one, cst.Integer("3")), Edit(one, cst.Integer("4"))])
    with pytest.raises(EditError, match="no edit"):
        apply_edits(module, [])
    with pytest.raises(EditError, match="0 times"):
        apply_edits(module, [Edit(cst.Integer("1"), cst.Integer("3"))])


@dataclass(frozen=True)
class SetArgument(Rewrite):
    value: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        return [Edit(call.args[0].value, cst.parse_expression(self.value))]


class SetsArgument(Pattern):
    ID = "sets-argument"
    APPLICABILITY = Applicability.SAFE
    REWRITES = (SetArgument,)


def site(span: Span, rewrite: Rewrite, extra: tuple[Span, ...] = ()) -> Site:
    return Site(pattern="sets-argument", file="train.py", span=span, rewrite=rewrite, summary="",
                applicability=Applicability.SAFE, extra_spans=extra)


def test_a_site_designates_its_node_by_span_and_the_type_the_rewrite_edits() -> None:
    wrapper = MetadataWrapper(cst.parse_module(SOURCE))
    result = SetsArgument().transform(site(Span(4, 8, 4, 16), SetArgument("64")), wrapper)
    assert result.code == SOURCE.replace("build(1)", "build(64)")
    assert wrapper.module.code == SOURCE  # the wrapper's module is left as it was


@pytest.mark.parametrize(("span", "extra", "reason"), [
    (Span(4, 0, 4, 16), (), "0 Call nodes"),  # the statement's span: no call there
    (Span(9, 0, 9, 3), (), "0 Call nodes"),  # nowhere in the file
    (Span(4, 8, 4, 16), (Span(5, 0, 5, 13),), "never asked for the node at 5:0"),
])
def test_a_site_whose_spans_do_not_hold_what_the_rewrite_edits_is_refused(
    span: Span, extra: tuple[Span, ...], reason: str,
) -> None:
    with pytest.raises(TransformError, match=reason):
        SetsArgument().transform(site(span, SetArgument("64"), extra), MetadataWrapper(cst.parse_module(SOURCE)))


def test_a_site_carrying_another_patterns_rewrite_is_refused() -> None:
    @dataclass(frozen=True)
    class Other(Rewrite):
        def edits(self, nodes: SiteNodes) -> list[Edit]:
            return []

    with pytest.raises(TransformError, match="not one of this pattern's rewrites"):
        SetsArgument().transform(site(Span(4, 8, 4, 16), Other()), MetadataWrapper(cst.parse_module(SOURCE)))
