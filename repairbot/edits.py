"""A fix as a set of edits on nodes, and the one applier of them: runtime patterns' rewrites
and lint rules' fixes alike.

An ``Edit`` swaps one node of a parsed module, found by identity, for its replacement: another
node, ``cst.RemovalSentinel.REMOVE``, or a ``cst.FlattenSentinel`` (statements put around it).
A replacement is built from the original node and may hold original nodes (its children, or
the node itself: ``FlattenSentinel([node, new_statement])``); an edit of a node held inside
another edit's replacement is applied there. ``apply_edits`` makes them all in one pass and
checks that each landed exactly once: an edit whose node its neighbour's replacement dropped,
or a node edited twice, is an ``EditError``, never a silently lost change.

A runtime pattern's ``Site`` carries a ``Rewrite``: the frozen dataclass of the pattern's
parameters, whose ``edits`` asks ``SiteNodes`` for the node at each span of the site, by the
node type it edits, and returns the edits.
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from repairbot.types import Applicability, Span

Replacement = cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]
N = TypeVar("N", bound=cst.CSTNode)


class EditError(Exception):
    """A set of edits that does not apply to the module it was made for."""


@dataclass(frozen=True, eq=False)
class Edit:
    """``node`` (of the module being edited, by identity) becomes ``replacement``."""

    node: cst.CSTNode
    replacement: Replacement


def edits_of(replacements: Mapping[cst.CSTNode, Replacement]) -> list[Edit]:
    """The edits of a node -> replacement mapping (a lint finding's fix)."""
    return [Edit(node, replacement) for node, replacement in replacements.items()]


class _Applier(cst.CSTTransformer):
    """Replaces each edited node it meets (without walking inside it: its replacement is
    walked instead, for the edits nested in it), counting where each edit lands."""

    def __init__(self, edits: Mapping[cst.CSTNode, Replacement], landed: Counter[cst.CSTNode], inside: cst.CSTNode | None) -> None:
        super().__init__()
        self.edits = edits
        self.landed = landed
        self.inside = inside  # the edited node whose replacement is being walked: kept there as it is

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node is self.inside or node not in self.edits

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Replacement:  # type: ignore[override]
        if original_node is self.inside or original_node not in self.edits:
            return updated_node
        self.landed[original_node] += 1
        return _walk_replacement(self.edits[original_node], _Applier(self.edits, self.landed, original_node))


def _walk_replacement(replacement: Replacement, applier: _Applier) -> Replacement:
    if isinstance(replacement, cst.RemovalSentinel):
        return replacement
    if isinstance(replacement, cst.FlattenSentinel):
        nodes: list[cst.CSTNode] = []
        for node in replacement.nodes:
            walked = node.visit(applier)
            if isinstance(walked, cst.FlattenSentinel):
                nodes.extend(walked.nodes)
            elif isinstance(walked, cst.CSTNode):
                nodes.append(walked)
        return cst.FlattenSentinel(nodes)
    return replacement.visit(applier)


def apply_edits(module: cst.Module, edits: Iterable[Edit]) -> cst.Module:
    """``module`` with every edit made, in one pass; EditError unless each landed exactly once."""
    table: dict[cst.CSTNode, Replacement] = {}
    for edit in edits:
        if edit.node in table:
            raise EditError(f"two edits of one {type(edit.node).__name__}")
        table[edit.node] = edit.replacement
    if not table:
        raise EditError("no edit")
    landed: Counter[cst.CSTNode] = Counter()
    result = module.visit(_Applier(table, landed, None))
    missed = [node for node in table if landed[node] != 1]
    if missed:
        counts = ", ".join(f"{type(node).__name__} {landed[node]} times" for node in missed)
        raise EditError(f"an edit did not land exactly once ({counts})")
    return cst.ensure_type(result, cst.Module)


class SiteNodes:
    """The nodes of a module that a site's spans designate, resolved once by position and
    handed out by the node type a rewrite edits there."""

    def __init__(self, site: Site, wrapper: MetadataWrapper) -> None:
        self.site = site
        self.wrapper = wrapper
        self.module = wrapper.module
        self.resolved: set[Span] = set()
        wanted = {site.span, *site.extra_spans}
        self._at: dict[Span, list[cst.CSTNode]] = {span: [] for span in wanted}
        # looked up by the position's numbers: a Span made for every node of the module (what
        # analysis.spans gives) costs more than the rewrite itself
        at_numbers = {(s.line, s.col, s.end_line, s.end_col): self._at[s] for s in wanted}
        for node, where in wrapper.resolve(PositionProvider).items():
            found = at_numbers.get((where.start.line, where.start.column, where.end.line, where.end.column))
            if found is not None:
                found.append(node)
        self._parents: Mapping[cst.CSTNode, cst.CSTNode] | None = None

    def at(self, span: Span, kind: type[N] | tuple[type[N], ...]) -> N:
        """The one node of type ``kind`` at ``span`` (one of the site's spans)."""
        found = [node for node in self._at.get(span, ()) if isinstance(node, kind)]
        if len(found) != 1:
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise EditError(f"{len(found)} {names} nodes at {span.line}:{span.col}-{span.end_line}:{span.end_col}")
        self.resolved.add(span)
        return found[0]

    def node(self, kind: type[N] | tuple[type[N], ...]) -> N:
        """The node at the site's span."""
        return self.at(self.site.span, kind)

    def extra(self, kind: type[N] | tuple[type[N], ...]) -> list[N]:
        """The nodes at the site's extra spans, in their order."""
        return [self.at(span, kind) for span in self.site.extra_spans]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        if self._parents is None:
            self._parents = self.wrapper.resolve(ParentNodeProvider)
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The nodes around ``node``, innermost first."""
        found = []
        parent = self.parent(node)
        while parent is not None:
            found.append(parent)
            parent = self.parent(parent)
        return found

    def unresolved(self) -> list[Span]:
        """The site's spans that no edit asked for."""
        return [span for span in (self.site.span, *self.site.extra_spans) if span not in self.resolved]


class Rewrite(abc.ABC):
    """A runtime pattern's fix at one site: a frozen dataclass of the pattern's typed
    parameters (what ``locate`` decided) that says which nodes the site's spans designate and
    what each becomes."""

    @abc.abstractmethod
    def edits(self, nodes: SiteNodes) -> Sequence[Edit]:
        """The edits of this fix; EditError where the nodes are not what it edits."""


@dataclass(frozen=True)
class Site:
    """Where a fix goes and what it does: the answer of a pattern's ``locate``."""

    pattern: str
    file: str  # absolute path of the file to change
    span: Span  # the node the rewrite edits, in the current source
    rewrite: Rewrite  # the fix, with its typed parameters (what the pattern's locate decided)
    summary: str  # the report's "Fix:" line
    applicability: Applicability
    evidence: Mapping[str, Any] = field(default_factory=dict)  # what backs the fix (JSON)
    evidence_text: str = ""  # the same, in one line for people
    notes: tuple[str, ...] = ()  # caveats for the report
    # Other places in the same file the fix may touch (a device line it introduces, say).
    extra_spans: tuple[Span, ...] = ()
    # Next candidates for the same failure, tried in order when this one's rerun fails.
    alternatives: tuple[Site, ...] = ()
