"""weights-only's fixes: the load wrapped in ``with torch.serialization.safe_globals([...])``
(``WrapInSafeGlobals``) or an existing allowlist extended (``ExtendSafeGlobals``), with the
imports they need.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    source_lines,
)
from repairbot.edits import Edit, Rewrite, SiteNodes

from .source import extended_list

# A `with` line longer than black's default gets the allowlist on a line of its own.
_LINE_LENGTH = 88


# A tab in an indent counts as one level of four columns, as the spaces of a space-indented file
# would: the layout of a fix must not depend on which of the two the file uses.
_TAB_COLUMNS = 4


def _width(indent: str) -> int:
    return len(indent.expandtabs(_TAB_COLUMNS))


def _import_edits(
    nodes: SiteNodes, imports: Sequence[str], additions: Sequence[Sequence[str]], inserted: Sequence[str] = (),
) -> list[Edit]:
    """The missing imports inserted before the statement at the first extra span (the blank
    lines and comments above it move above them), the project's classes added to the
    ``from module import ...`` statements at the next extra spans, one name list each, and the
    ``from module import Class`` statements (``inserted``, as code) put after the ``import
    module`` statements at the last extra spans, one each."""
    extra = list(nodes.site.extra_spans)
    cut = len(extra) - len(inserted)
    after_spans = extra[cut:]
    anchor_spans, from_spans = extra[: cut - len(additions)], extra[cut - len(additions): cut]
    edits: list[Edit] = []
    for span, names in zip(from_spans, additions, strict=True):
        statement = nodes.at(span, cst.ImportFrom)
        edits.append(Edit(statement, _extended_import(nodes.module, statement, names, indent_of(nodes.module, span.line))))
    for span, code in zip(after_spans, inserted, strict=True):
        line = nodes.at(span, cst.SimpleStatementLine)
        edits.append(Edit(line, cst.FlattenSentinel([line, cst.parse_statement(code + nodes.module.default_newline)])))
    if not imports or not anchor_spans:
        return edits
    (anchor_span,) = anchor_spans
    anchor = nodes.at(anchor_span, cst.SimpleStatementLine)
    added: list[cst.BaseStatement] = [cst.parse_statement(code + "\n") for code in imports]
    added[0] = added[0].with_changes(leading_lines=anchor.leading_lines)
    return [Edit(anchor, cst.FlattenSentinel([*added, anchor.with_changes(leading_lines=[])])), *edits]


def _extended_import(module: cst.Module, statement: cst.ImportFrom, names: Sequence[str], indent: str) -> cst.ImportFrom:
    """``from m import a, b`` with ``names`` appended: in its own layout when it is
    parenthesized, on its line when that fits in ``_LINE_LENGTH``, else black's layout (one name
    per line inside parentheses)."""
    assert not isinstance(statement.names, cst.ImportStar)  # the pattern extends explicit imports only
    elements = list(statement.names)
    last = elements[-1]
    trailing = last.comma if isinstance(last.comma, cst.Comma) else None
    if statement.lpar is not None:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        if len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma):
            separator = elements[-2].comma
        elif trailing is not None:
            separator = trailing
        added = [cst.ImportAlias(cst.Name(name), comma=separator) for name in names]
        added[-1] = added[-1].with_changes(comma=trailing if trailing is not None else cst.MaybeSentinel.DEFAULT)
        return statement.with_changes(names=[*elements[:-1], last.with_changes(comma=separator), *added])
    flat_separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    flat = statement.with_changes(
        names=[
            *(e.with_changes(comma=flat_separator) for e in elements),
            *(cst.ImportAlias(cst.Name(name), comma=flat_separator) for name in names[:-1]),
            cst.ImportAlias(cst.Name(names[-1])),
        ]
    )
    if _width(indent) + len(module.code_for_node(flat)) <= _LINE_LENGTH:
        return flat

    def line_break(inner: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(newline=cst.Newline()), indent=True,
            last_line=cst.SimpleWhitespace(inner),
        )

    each = cst.Comma(whitespace_after=line_break(module.default_indent))
    wrapped = [*(e.with_changes(comma=each) for e in elements), *(cst.ImportAlias(cst.Name(name), comma=each) for name in names)]
    wrapped[-1] = wrapped[-1].with_changes(comma=cst.Comma(whitespace_after=line_break("")))
    return statement.with_changes(
        names=wrapped, lpar=cst.LeftParen(whitespace_after=line_break(module.default_indent)), rpar=cst.RightParen(),
    )


@dataclass(frozen=True)
class WrapInSafeGlobals(Rewrite):
    """Wraps the statement at the site in ``with torch.serialization.safe_globals([...]):``
    (``context``, as code) and inserts the missing imports."""

    context: str
    imports: tuple[str, ...]
    additions: tuple[tuple[str, ...], ...] = ()  # classes added to the file's `from module import ...`
    inserted: tuple[str, ...] = ()  # `from module import Class` put after the file's `import module`

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.SimpleStatementLine)
        wrapped = cst.With(
            items=[cst.WithItem(cst.parse_expression(self.context))],
            body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=[])]),
            leading_lines=statement.leading_lines,
        )
        return [Edit(statement, wrapped), *_import_edits(nodes, self.imports, self.additions, self.inserted)]


@dataclass(frozen=True)
class ExtendSafeGlobals(Rewrite):
    """Appends the missing globals (``elements``, as code) to the list of the
    ``safe_globals([...])`` block at the site, and inserts the missing imports."""

    elements: tuple[str, ...]
    imports: tuple[str, ...]
    additions: tuple[tuple[str, ...], ...] = ()  # classes added to the file's `from module import ...`
    inserted: tuple[str, ...] = ()  # `from module import Class` put after the file's `import module`

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        listed = nodes.node(cst.List)
        extended = extended_list(listed, [cst.parse_expression(code) for code in self.elements])
        return [Edit(listed, extended), *_import_edits(nodes, self.imports, self.additions, self.inserted)]


def safe_globals_context(module: cst.Module, torch_name: str, elements: Sequence[str], indent: str) -> str:
    """``torch.serialization.safe_globals([...])``, the allowlist on one line: on the ``with``
    line when it fits in ``_LINE_LENGTH`` after ``indent``, else on a line of its own inside the
    call's parentheses (black's layout; a long list stays one line there: it is one thing, the
    classes the checkpoint holds). The lines inside the parentheses are indented relative to
    the block: LibCST adds the block's own."""
    head = f"{torch_name}.serialization.safe_globals("
    listed = f"[{', '.join(elements)}]"
    if _width(indent) + len("with ") + len(head) + len(listed) + len("):") <= _LINE_LENGTH:
        return f"{head}{listed})"
    newline = module.default_newline
    return f"{head}{newline}{module.default_indent}{listed}{newline})"


def indent_of(module: cst.Module, line: int) -> str:
    text = source_lines(module.code)[line - 1]
    return text[: len(text) - len(text.lstrip())]
