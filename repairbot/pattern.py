"""The pattern authoring API: one failure class, how to recognise it, where and how to fix it.

A pattern is one class in ``patterns/<snake_id>/pattern.py``, a unit of the catalogue
(``repairbot.unit``). Its docstring is its user documentation, in fixed sections (``What it
fixes``, ``Why it fails``, ``Example``, ``Fix safety``, ``Not handled``). It declares:

- ``ID``, ``TITLE``, ``TAGS``, ``APPLICABILITY`` (``DIAGNOSE_ONLY`` for a pattern that never edits);
- ``SIGNATURES``: exception types plus a message regex with named groups, older message forms
  too. The classifier matches these against a failure;
- ``EVIDENCE``: the probes it reads from a traced run;
- ``locate(...)``: from the failure, the signature match and the traced evidence, the fix site
  (a ``Site``), or a reasoned ``Decline``. Pure: it reads only the parsed sources it is given;
- ``REWRITES``: the ``Rewrite`` classes its sites carry (repairbot/edits.py): each a frozen
  dataclass of the fix's typed parameters whose ``edits`` asks for the node at each of the
  site's spans, by the node type it edits, and returns the edits (node -> replacement); the
  one applier makes them, by node identity, and checks that each landed exactly once.

``repairbot.unit.discover`` finds the pattern folders; there is no list to edit.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper

from repairbot.edits import EditError, Rewrite, Site, SiteNodes, apply_edits
from repairbot.evidence import Evidence
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame, Span
from repairbot.unit import DocFormat, Kind, Unit


@dataclass(frozen=True)
class Signature:
    """An exception type (any of ``exc_types``; empty for any) and a message regex."""

    exc_types: tuple[str, ...]
    regex: re.Pattern[str]

    def match(self, exc_type: str, message: str) -> re.Match[str] | None:
        if self.exc_types and not any(type_matches(exc_type, t) for t in self.exc_types):
            return None
        return self.regex.search(message)


def signature(exc_types: str | Iterable[str], regex: str, flags: int = 0) -> Signature:
    """A signature; ``regex`` is searched in the message, with ``re.DOTALL`` added."""
    types = (exc_types,) if isinstance(exc_types, str) else tuple(exc_types)
    return Signature(types, re.compile(regex, flags | re.DOTALL))


def phrase(text: str) -> str:
    """A fixed phrase as a regex that also matches it wrapped over lines (terminals, logs)."""
    return r"\s+".join(re.escape(word) for word in text.split())


def type_matches(exc_type: str, expected: str) -> bool:
    """``torch.OutOfMemoryError`` matches ``OutOfMemoryError``; a dotted ``expected`` must match whole."""
    return exc_type == expected or exc_type.endswith("." + expected)


def span_of(code_range: CodeRange) -> Span:
    return Span(code_range.start.line, code_range.start.column, code_range.end.line, code_range.end.column)


class Pattern(Unit):
    """Base class of every pattern; see the module docstring."""

    KIND: ClassVar[Kind] = Kind(
        name="pattern",
        file="pattern.py",
        doc=DocFormat(required=("What it fixes", "Why it fails", "Example", "Fix safety", "Not handled")),
        one_per_file=True,
        listed_in="`repairbot patterns`",
    )
    TAGS: ClassVar[frozenset[str]] = frozenset()
    APPLICABILITY: ClassVar[Applicability]
    SIGNATURES: ClassVar[tuple[Signature, ...]]
    EVIDENCE: ClassVar[frozenset[str]] = frozenset()
    # Opt-in harness probes: PROBES are cheap and on in every run while the pattern is
    # selected; RERUN_PROBES are costly and on only in a rerun that gathers evidence for a
    # failure this pattern recognised (that rerun is not an attempt).
    PROBES: ClassVar[frozenset[str]] = frozenset()
    RERUN_PROBES: ClassVar[frozenset[str]] = frozenset()
    # False for a diagnose-only pattern: it explains the failure and never edits.
    FIXES: ClassVar[bool] = True
    # The standard remedy, for a failure known only from its text (`repairbot classify`);
    # required of diagnose-only patterns.
    REMEDY: ClassVar[str] = ""
    # Lines a fix of this pattern may change (the surgical-diff check of the case tests).
    MAX_CHANGED_LINES: ClassVar[int] = 1
    # True when the failure cannot be caused by the harness forcing a smaller batch size, so a
    # confirmation run at the script's own batch size is never needed.
    BATCH_INVARIANT: ClassVar[bool] = False
    # Library frames that raise this failure and no other, as (path ending, function) or
    # (path ending, function, start of the frame's source line) where the function raises other
    # failures too and only its own ``raise`` line proves this one: a traceback posted without
    # its exception line (a CI log cut after the frames) that ends in one is this failure.
    RAISING_FRAMES: ClassVar[tuple[tuple[str, str] | tuple[str, str, str], ...]] = ()
    # The rewrites (frozen dataclasses of the fix's parameters) that this pattern's sites carry.
    REWRITES: ClassVar[tuple[type[Rewrite], ...]] = ()

    def match(self, failure: Failure) -> re.Match[str] | None:
        """The first signature that matches the failure itself (not its causes)."""
        for sig in self.SIGNATURES:
            found = sig.match(failure.exc_type, failure.message)
            if found is not None:
                return found
        return None

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        """Where the fix goes, or why this pattern will not fix this failure."""
        raise NotImplementedError

    def transform(self, site: Site, wrapper: MetadataWrapper) -> cst.Module:
        """The module with the fix applied at ``site`` (the wrapper's module, untouched elsewhere):
        the edits of the site's rewrite, made by the one applier."""
        where = f"{site.file}:{site.span.line}"
        if not isinstance(site.rewrite, self.REWRITES):
            raise TransformError(f"{self.ID}: a site carrying {type(site.rewrite).__name__}, not one of this pattern's rewrites")
        nodes = SiteNodes(site, wrapper)
        try:
            edits = site.rewrite.edits(nodes)
            unresolved = nodes.unresolved()
            if unresolved:
                raise EditError(f"the rewrite never asked for the node at {', '.join(f'{s.line}:{s.col}' for s in unresolved)}")
            result = apply_edits(wrapper.module, edits)
        except (EditError, cst.CSTValidationError, cst.CSTLogicError, ValueError, TypeError, AttributeError,
                LookupError, AssertionError) as error:
            # A site that does not hold the node the rewrite edits (the source changed under
            # it, say) is a refusal like any other, never a crash of the repair.
            raise TransformError(f"{self.ID}: the rewrite does not apply at {where}: {error}") from error
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the user's own invalid escapes and the like
                compile(result.code, where, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            raise TransformError(f"{self.ID}: the rewrite at {where} is not valid Python: {error}") from error
        return result

    def rerun_probes(self, match: re.Match[str]) -> frozenset[str]:
        """The costly probes this failure needs (a pattern with several signatures may need
        them for some only)."""
        return self.RERUN_PROBES

    def needs_confirmation(self, failure: Failure, evidence: Evidence | None) -> bool:
        """Could this failure be an artefact of the forced batch size? (Then confirm it first.)"""
        return not self.BATCH_INVARIANT

    def decline(self, reason: str, diagnosis: str | None = None, at: Frame | None = None) -> Decline:
        """A refusal; ``at`` is the place the remedy applies to, when it is known."""
        return Decline(
            pattern=self.ID, reason=reason, diagnosis=diagnosis,
            file=at.file if at else None, line=at.line if at else None,
        )

    @classmethod
    def remedy(cls) -> str:
        """What to do about the failure, from its text alone: the standard remedy of a
        diagnose-only pattern, or what a fixing pattern's rewrite does."""
        text = cls.REMEDY or " ".join(cls.documentation().get("", "").split())
        return text.replace("``", "`")  # docstrings quote code reST-style


class TransformError(Exception):
    """A pattern's rewrite does not apply at its site (its edits, or the code they leave)."""
