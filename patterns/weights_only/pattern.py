"""weights-only: a checkpoint holding plain Python or NumPy objects, or a whole pickled model,
refused by ``torch.load``'s ``weights_only=True`` default (torch >= 2.6)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    bindings_of,
    dotted_name,
    is_torch_name,
    one_line,
    place,
    reads,
    source_lines,
    spans,
    traced_line_matches,
)
from repairbot.codemod import string_literal
from repairbot.edits import Edit, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import parameter_names
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame, Span

from . import probe
from .probe import NUMPY_DTYPE_CLASS, PLAIN_DATA

# The loaders whose weights_only default changed; a call of another function reaches one.
_LOADERS = ("torch.load", "torch.serialization.load")
_SAFE_GLOBALS = ("torch.serialization.safe_globals",)
# How the evidence rerun's probe is asked for, and where its record is read.
_PROBE = probe.NAME
_NUMPY_ALIAS = "np"
# A `with` line longer than black's default gets the allowlist on a line of its own.
_LINE_LENGTH = 88
# A tab in an indent counts as one level of four columns, as the spaces of a space-indented file
# would: the layout of a fix must not depend on which of the two the file uses.
_TAB_COLUMNS = 4


def _width(indent: str) -> int:
    return len(indent.expandtabs(_TAB_COLUMNS))


def is_plain_data(name: str) -> bool:
    """A global that only rebuilds plain data (no code runs but its own constructor): the
    argparse options a training script saves with its weights, NumPy scalars and arrays,
    collections and builtins. The list is the probe's, so that the fix allowlists exactly what
    the rerun proved enough."""
    return name in PLAIN_DATA or bool(NUMPY_DTYPE_CLASS.match(name))


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
        edits.append(Edit(statement, _extended_import(nodes.module, statement, names, _indent_of(nodes.module, span.line))))
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
        extended = _extended(listed, [cst.parse_expression(code) for code in self.elements])
        return [Edit(listed, extended), *_import_edits(nodes, self.imports, self.additions, self.inserted)]


class WeightsOnly(Pattern):
    """Allowlists a checkpoint's plain-data globals, or a whole model's nn.Module classes, around
    the ``torch.load`` that refuses them.

    What it fixes:
        A checkpoint saved with more than tensors, ``torch.save({"args": args, "state":
        model.state_dict(), "best_acc": np.float64(...)}, path)``, loaded back with a plain
        ``torch.load(path)`` on torch 2.6 or later: the usual resume-from-checkpoint code. A
        whole model saved with ``torch.save(model, path)`` and loaded back the same way
        (``Unsupported global: GLOBAL __main__.Net``).

    Why it fails:
        Since 2.6 ``torch.load`` defaults to ``weights_only=True``: it unpickles tensors and a
        small set of known types only, because unpickling anything else can run arbitrary code.
        ``_pickle.UnpicklingError: Weights only load failed. ... WeightsUnpickler error:
        Unsupported global: GLOBAL argparse.Namespace was not an allowed global by default.``
        (NumPy values: ``numpy._core.multiarray.scalar``, then ``Can only build Tensor ... but
        got <class 'numpy.dtypes.Float64DType'>``). Each failure names one global only; the
        evidence rerun lists them all with ``torch.serialization.get_unsafe_globals_in_checkpoint``
        (the ``unsafe-globals`` probe) and checks that the file loads with them allowlisted.

    Example:
        ``ckpt = torch.load(args.resume)`` becomes ``with
        torch.serialization.safe_globals([argparse.Namespace]):`` and the same statement,
        indented, inside it; the names follow the file's imports (``np.dtypes.Float64DType``
        for ``import numpy as np``) and a missing import (``import argparse``, ``import
        numpy as np``) is added before the first import. A global saved under an older module
        path is given as a pair, ``(np._core.multiarray.scalar, "numpy.core.multiarray.scalar")``.
        A load already inside such a ``with`` gets the missing names added to its list. A whole
        model gets its own classes (``Net`` where the script defines it, ``models.SmallCNN``
        through the load site's imports) and torch's (``nn.Linear``) listed; a class of a
        module the load file already imports from (``from previous_chapters import GPTModel``,
        the checkpoint also naming ``TransformerBlock``) is added to that ``from ... import``.
        A name is used only where it is, at the load, what its import says: a module name the
        file rebinds (``import model`` then ``model = model.RNNModel(...)``, so that
        ``model`` holds the instance when the checkpoint is loaded) names nothing, and the class
        is imported by name instead, ``from model import RNNModel`` right after ``import
        model``. The allowlist is one line: on the ``with`` line when it fits, else on a line of
        its own inside the call's parentheses, however many classes it names.

    Fix safety:
        Safe for plain data; unsafe when classes of a model are allowlisted: the project's own
        nn.Module subclasses (a class defined at module level of the script or of a traced
        project module, whose bases lead to ``torch.nn.Module`` in the source) run their code at
        load. Otherwise only plain data types are ever allowlisted (``argparse.Namespace``, NumPy
        scalars, arrays and dtypes, ``collections`` containers, builtins such as ``set``), and
        only for the one statement; ``weights_only=True`` stays in force for everything else.
        ``weights_only=False`` is never written: it would also load the file, and run any code
        it holds; that choice is the user's, for files they trust.

    Not handled:
        A checkpoint whose globals include anything else (a class of the project that is not an
        nn.Module, a function, ``functools.partial``, an OmegaConf config, a NumPy random
        generator), a model class whose module the load site does not import from, whose name
        the load file already uses for something else (a rebound module whose class name the
        file also binds: ``model = model.RNNModel(...)`` beside a class ``RNNModel`` of the
        script), or saved as ``__main__.Net`` and imported
        under that name from another module: declined with the list of globals and the
        two remedies (allowlist them with ``safe_globals`` if the file is trusted, or resave the
        checkpoint with plain types). A run without the ``unsafe-globals`` evidence (the list
        of globals is unknown). A load in the header of a compound statement (``for k, v in
        torch.load(p).items():``).
    """

    ID = "weights-only"
    TITLE = "torch.load refuses a checkpoint's plain data or whole pickled model (weights_only=True)"
    TAGS = frozenset({"checkpoint", "serialization"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature(
            ("UnpicklingError",),
            phrase("Weights only load failed.") + r".*?" + phrase("Unsupported global:") + r"\s*GLOBAL\s+(?P<global>[\w.]+)",
        ),
        signature(
            ("UnpicklingError",),
            phrase("Weights only load failed.") + r".*?" + phrase("but got") + r"\s*<class\s+'(?P<build>[\w.]+)'>",
        ),
        signature(("UnpicklingError",), phrase("Weights only load failed")),
    )
    EVIDENCE = frozenset({"locals", _PROBE})
    RERUN_PROBES = frozenset({_PROBE})
    BATCH_INVARIANT = True
    MAX_CHANGED_LINES = 4
    REWRITES = (WrapInSafeGlobals, ExtendSafeGlobals)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        named = match.groupdict().get("global") or match.groupdict().get("build")
        frame = failure.user_frame
        record = _probe_record(evidence)
        if record is None:
            return self.decline(
                "the checkpoint's full list of unsafe globals was not collected (the unsafe-globals rerun did "
                f"not run){f'; the message names only {named}' if named else ''}",
                diagnosis=_remedy([named] if named else []),
                at=frame,
            )
        checkpoint = str(record.get("path") or "the checkpoint")
        if record.get("error"):
            return self.decline(
                f"the globals of {checkpoint} could not be listed: {record['error']}",
                diagnosis=_remedy([named] if named else []),
                at=frame,
            )
        needed = _globals(record)
        if not needed:
            return self.decline(
                f"get_unsafe_globals_in_checkpoint lists no global for {checkpoint}: the load fails for another "
                "reason than an allowlist can fix"
            )
        classes = _model_classes(needed, failure, evidence, sources)
        refused = [entry.name for entry in needed if not is_plain_data(entry.name) and entry.name not in classes]
        if refused:
            return self.decline(
                f"{checkpoint} needs globals that are neither plain data nor nn.Module classes of the project or "
                f"of torch: {', '.join(refused)}; allowlisting them would let the file run their code",
                diagnosis=_remedy([entry.name for entry in needed]),
                at=frame,
            )
        if record.get("loads") is False:
            return self.decline(
                f"{checkpoint} still did not load in the evidence rerun with {', '.join(e.name for e in needed)} "
                "allowlisted",
                diagnosis=_remedy([entry.name for entry in needed]),
                at=frame,
            )
        if frame is None:
            return self.decline(
                "the checkpoint is loaded inside a library, with no line of the project's code on the way",
                diagnosis=_remedy([entry.name for entry in needed]),
            )
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        if not traced_line_matches(wrapper.module.code, frame):
            return self.decline(
                f"line {frame.line} of {report_path(path)} is no longer the traced load: the source changed since the run",
                at=frame,
            )
        found = _statement_of(wrapper, frame)
        if isinstance(found, str):
            return self.decline(found, diagnosis=_remedy([entry.name for entry in needed]), at=frame)
        return self._site(wrapper, path, frame, found, needed, checkpoint, record, classes)

    def _site(
        self, wrapper: MetadataWrapper, path: Path, frame: Frame, statement: cst.SimpleStatementLine,
        needed: Sequence[_Global], checkpoint: str, record: Mapping[str, Any],
        classes: Mapping[str, _ModelClass],
    ) -> Site | Decline:
        module = wrapper.module
        positions = spans(wrapper)
        where = place(frame)
        import_lines = _visible_imports(wrapper, statement)
        rebound = _Rebinding.around(wrapper, statement)
        visible = _import_table(import_lines, rebound)
        project = {name: found for name, found in classes.items() if found.file is not None}
        reached = _project_class_names(project, path, module, import_lines, rebound)
        if isinstance(reached, str):
            return self.decline(reached, diagnosis=_remedy([entry.name for entry in needed]), at=frame)
        named = reached.named
        torch_name = _local_name_of(visible, "torch")
        if torch_name is None:
            return self.decline(
                f"{report_path(path)} has no `import torch` to write torch.serialization.safe_globals with",
                diagnosis=_remedy([entry.name for entry in needed]), at=frame,
            )
        spelled = _spell(module, visible, needed, named)
        applicability = Applicability.UNSAFE if classes else self.APPLICABILITY
        existing = _enclosing_safe_globals(wrapper, statement, visible)
        loader = _loader_text(wrapper, frame)
        names = ", ".join(entry.name for entry in needed)
        evidence = {
            "checkpoint": checkpoint,
            "globals": [entry.name for entry in needed],
            "resolved": {e.name: e.resolved for e in needed if e.resolved and e.resolved != e.name},
            "probe_loaded": record.get("loads"),
            "load": where,
            "loader": loader,
        }
        scanned = ", ".join(e.name for e in needed if not e.build) or "nothing"
        built = ", ".join(e.name for e in needed if e.build)
        evidence_text = (
            f"get_unsafe_globals_in_checkpoint({report_path(Path(checkpoint))}) lists {scanned}"
            + (f"; loading then also asked for {built}" if built else "")
            + _kinds_text(needed, classes)
            + ("; the evidence rerun loaded the file with them allowlisted" if record.get("loads") else "")
        )
        notes: tuple[str, ...] = (
            "weights_only=False would load the file as well, but lets it run arbitrary code: use it only for "
            "files you trust; it was not written.",
        )
        if project:
            notes += (
                f"Unsafe: loading runs the code of {', '.join(sorted(named.values()))} (the project's own "
                "classes); saving model.state_dict() and loading it into a new model needs no allowlist.",
            )
        anchors = self._import_anchor(wrapper, spelled)
        if spelled.imports and not anchors:
            return self.decline(
                f"{report_path(path)} has no import statement at module level to add {'; '.join(spelled.imports)} next to",
                diagnosis=_remedy([entry.name for entry in needed]), at=frame,
            )
        everywhere = ImportTable(module).aliases
        rebinding = [
            code for code in spelled.imports
            if rebound(code.split()[-1]) or everywhere.get(code.split()[-1], code.split()[1]) != code.split()[1]
        ]
        if rebinding:
            return self.decline(
                f"{report_path(path)} binds the name {rebinding[0].split()[-1]} to something else: adding "
                f"`{rebinding[0]}` would rebind it",
                diagnosis=_remedy([entry.name for entry in needed]), at=frame,
            )
        from_spans = tuple(positions[statement] for statement, _ in reached.additions)
        after_spans = tuple(positions[line] for line, _ in reached.inserted)
        extended_lines = {positions[line] for line in import_lines if any(s in line.body for s, _ in reached.additions)}
        if set(anchors) & (extended_lines | set(after_spans)) or extended_lines & set(after_spans):
            return self.decline(
                f"the imports to add and the import statements to extend in {report_path(path)} are one statement",
                diagnosis=_remedy([entry.name for entry in needed]), at=frame,
            )
        additions = tuple(names for _, names in reached.additions)
        inserted = tuple(code for _, code in reached.inserted)
        extended = "".join(
            f"; imported {', '.join(names)} in the file's `from {dotted_name(statement.module or cst.Name(''))} import ...`"
            for statement, names in reached.additions
        ) + "".join(
            f"; added `{code}` after the file's `{one_line(module, line)}` (the name {code.split()[1]} is "
            "rebound in the file: at the load it is not the module)"
            for line, code in reached.inserted
        )
        if existing is not None:
            listed, list_span = existing
            missing = [s for s in spelled.elements if s not in listed]
            if not missing:
                return self.decline(
                    f"the load at {where} is already inside safe_globals([...]) with every global the checkpoint "
                    "needs: the source changed since the traced run"
                )
            return Site(
                pattern=self.ID, file=str(path), span=list_span,
                rewrite=ExtendSafeGlobals(tuple(missing), tuple(spelled.imports), additions, inserted),
                summary=(
                    f"Added {', '.join(missing)} to the safe_globals([...]) list around {loader} at {where}: "
                    f"{checkpoint} also holds {names}{extended}"
                ),
                applicability=applicability, evidence=evidence, evidence_text=evidence_text, notes=notes,
                extra_spans=anchors + from_spans + after_spans,
            )
        context = _context(module, torch_name, spelled.elements, _indent_of(module, positions[statement].line))
        statement_text = one_line(module, statement)
        shown = f"`{statement_text}`" if len(statement_text) <= 60 else f"the statement at {where}"
        added = f"; added `{'`, `'.join(spelled.imports)}`" if spelled.imports else ""
        shown_context = f"{torch_name}.serialization.safe_globals([{', '.join(spelled.elements)}])"
        return Site(
            pattern=self.ID, file=str(path), span=positions[statement],
            rewrite=WrapInSafeGlobals(context, tuple(spelled.imports), additions, inserted),
            summary=(
                f"Wrapped {shown} in `with {shown_context}:` so that weights_only=True (torch >= 2.6) loads "
                f"{report_path(Path(checkpoint))}, which holds {names}{added}{extended}"
            ),
            applicability=applicability, evidence=evidence, evidence_text=evidence_text, notes=notes,
            extra_spans=anchors + from_spans + after_spans,
        )

    def _import_anchor(self, wrapper: MetadataWrapper, spelled: _Spelling) -> tuple[Span, ...]:
        """The statement the missing imports go before: the module's first import (after
        ``from __future__``)."""
        if not spelled.imports:
            return ()
        positions = spans(wrapper)
        for statement in wrapper.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and statement.body and all(
                isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
            ):
                first = statement.body[0]
                if isinstance(first, cst.ImportFrom) and dotted_name(first.module or cst.Name("")) == "__future__":
                    continue
                return (positions[statement],)
        return ()


# --------------------------------------------------------------------------------------------
# The probe's record


@dataclass(frozen=True)
class _Global:
    name: str  # as the checkpoint names it
    resolved: str | None  # the object's own module.qualname in the run, when the probe resolved it
    build: bool = False  # asked for while loading (a NumPy dtype class), not listed by the scan


def _probe_record(evidence: Evidence | None) -> Mapping[str, Any] | None:
    """The last record of the unsafe-globals probe: one per failed ``torch.load``."""
    records = evidence.probe_records.get(probe.EVIDENCE_KEY) if evidence is not None else None
    if not records:
        return None
    last = records[-1]
    return last if isinstance(last, Mapping) else None


def _globals(record: Mapping[str, Any]) -> list[_Global]:
    found: list[_Global] = []
    for build, key in ((False, "globals"), (True, "build_types")):
        for entry in record.get(key) or ():
            if isinstance(entry, str):
                found.append(_Global(entry, None, build))
            elif isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                resolved = entry.get("resolved")
                found.append(_Global(entry["name"], resolved if isinstance(resolved, str) else None, build))
    unique: dict[str, _Global] = {}
    for entry in found:
        unique.setdefault(entry.name, entry)
    return list(unique.values())


def _context(module: cst.Module, torch_name: str, elements: Sequence[str], indent: str) -> str:
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


def _indent_of(module: cst.Module, line: int) -> str:
    text = source_lines(module.code)[line - 1]
    return text[: len(text) - len(text.lstrip())]


def _remedy(names: Sequence[str]) -> str:
    listed = ", ".join(names) if names else "the globals the message names"
    return (
        f"if you trust the file, allowlist {listed} around the load: `with torch.serialization.safe_globals([...]):` "
        "(or torch.serialization.add_safe_globals once); otherwise resave the checkpoint with plain types "
        "(vars(args) instead of an argparse.Namespace, float() instead of NumPy scalars"
        + ("; model.state_dict() instead of the whole model" if any(_TORCH_MODULE_CLASS.match(n) for n in names) else "")
        + "). weights_only=False also loads it, but runs any code the file holds"
    )


# --------------------------------------------------------------------------------------------
# Source


def _statement_of(wrapper: MetadataWrapper, frame: Frame) -> cst.SimpleStatementLine | str:
    """The simple statement the frame was executing."""
    positions = spans(wrapper)
    parents = wrapper.resolve(ParentNodeProvider)
    where = place(frame)
    lines = [
        (node, span) for node, span in positions.items()
        if isinstance(node, cst.SimpleStatementLine) and span.line <= frame.line <= span.end_line
    ]
    if not lines:
        kind = next(
            (type(node).__name__ for node, span in sorted(positions.items(), key=lambda item: -item[1].line)
             if isinstance(node, cst.BaseCompoundStatement) and span.line == frame.line),
            "compound",
        )
        return (
            f"the load at {where} is in the header of a {kind.lower()} statement: wrapping it would put the "
            "whole block under the allowlist"
        )
    statement = min(lines, key=lambda item: item[1].end_line - item[1].line)[0]
    for node in m.findall(statement, m.Lambda()):
        if frame.col is not None and _inside(positions.get(node), frame):
            return f"the load at {where} is inside a lambda, which runs later than its statement"
    parent = parents.get(statement)
    if parent is not None and not isinstance(parent, cst.IndentedBlock | cst.Module):
        return f"the statement at {where} shares its line with a compound statement's header"
    return cst.ensure_type(statement, cst.SimpleStatementLine)


def _inside(span: Span | None, frame: Frame) -> bool:
    if span is None or frame.col is None:
        return False
    return (span.line, span.col) <= (frame.line, frame.col) and (frame.end_line or frame.line, frame.end_col or 0) <= (span.end_line, span.end_col)


def _loader_text(wrapper: MetadataWrapper, frame: Frame) -> str:
    """``torch.load(args.resume)`` when the frame calls it, else the call that leads there."""
    imports = ImportTable(wrapper.module)
    for node, span in spans(wrapper).items():
        if not isinstance(node, cst.Call) or frame.col is None:
            continue
        if (span.line, span.col, span.end_line, span.end_col) == (frame.line, frame.col, frame.end_line, frame.end_col):
            text = one_line(wrapper.module, node)
            if is_torch_name(imports.qualify(node.func), *_LOADERS):
                return text
            return f"{text} (which calls torch.load)"
    return "torch.load"


def _visible_imports(wrapper: MetadataWrapper, statement: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    """The import statements bound at module level, plus those of the functions around the
    statement."""
    parents = wrapper.resolve(ParentNodeProvider)
    body = [s for s in wrapper.module.body if _is_import_line(s)]
    node: cst.CSTNode | None = parents.get(statement)
    while node is not None:
        if isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock):
            body.extend(s for s in node.body.body if _is_import_line(s))
        node = parents.get(node)
    return body


def _is_import_line(statement: cst.CSTNode) -> TypeGuard[cst.SimpleStatementLine]:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )


def _local_name_of(imports: ImportTable, full: str) -> str | None:
    """The local name bound to module or object ``full`` (``np`` for numpy), if any."""
    names = [local for local, target in imports.aliases.items() if target == full]
    return sorted(names, key=len)[0] if names else None


@dataclass(frozen=True)
class _Spelling:
    elements: list[str]  # one code expression per global, in the file's names
    imports: list[str]  # import statements to add


def _spell(
    module: cst.Module, imports: ImportTable, needed: Sequence[_Global], named: Mapping[str, str]
) -> _Spelling:
    """Each global as code that names it in this file (``named``: the project's classes, already
    spelled), and the imports that makes work."""
    elements: list[str] = []
    added: list[str] = []
    added_aliases: dict[str, str] = {}
    for entry in needed:
        if entry.name in named:
            elements.append(named[entry.name])
            continue
        target = _public_torch_name(entry.resolved or entry.name)
        code = _expression_for(imports, target, added_aliases)
        if code is None:
            top = target.split(".")[0]
            alias = _NUMPY_ALIAS if top == "numpy" and _NUMPY_ALIAS not in imports.aliases else top
            added.append(f"import {top} as {alias}" if alias != top else f"import {top}")
            added_aliases[top] = alias
            code = alias + target[len(top):]
        if entry.resolved and entry.resolved != entry.name and not _TORCH_MODULE_CLASS.match(entry.name):
            # saved under an older module path: safe_globals matches the checkpoint's name
            code = f"({code}, {string_literal(module, entry.name)})"
        elements.append(code)
    return _Spelling(elements, added)


def _expression_for(imports: ImportTable, target: str, added: Mapping[str, str]) -> str | None:
    """``np.dtypes.Float64DType`` for numpy.dtypes.Float64DType under ``import numpy as np``."""
    module, _, attr = target.rpartition(".")
    if module == "builtins":
        return attr
    exact = _local_name_of(imports, target)
    if exact is not None:
        return exact
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        local = _local_name_of(imports, prefix) or added.get(prefix)
        if local is not None:
            return ".".join([local, *parts[cut:]])
    return None


def _enclosing_safe_globals(
    wrapper: MetadataWrapper, statement: cst.CSTNode, imports: ImportTable
) -> tuple[list[str], Span] | None:
    """The list literal of a ``with torch.serialization.safe_globals([...]):`` around the statement,
    with the code of its elements."""
    parents = wrapper.resolve(ParentNodeProvider)
    positions = spans(wrapper)
    node: cst.CSTNode | None = parents.get(statement)
    while node is not None and not isinstance(node, cst.FunctionDef):
        if isinstance(node, cst.With):
            for item in node.items:
                call = item.item
                if (
                    isinstance(call, cst.Call) and is_torch_name(imports.qualify(call.func), *_SAFE_GLOBALS)
                    and call.args and isinstance(call.args[0].value, cst.List)
                ):
                    listed = call.args[0].value
                    codes = [" ".join(wrapper.module.code_for_node(e.value).split()) for e in listed.elements]
                    return codes, positions[listed]
        node = parents.get(node)
    return None


def _extended(listed: cst.List, new: Sequence[cst.BaseExpression]) -> cst.List:
    """The list with ``new`` appended in its own layout (a trailing comma stays trailing)."""
    elements = list(listed.elements)
    if not elements:
        return listed.with_changes(elements=[cst.Element(value) for value in new])
    last = elements[-1]
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing = last.comma if isinstance(last.comma, cst.Comma) else None
    if trailing is not None and len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma):
        separator = elements[-2].comma
    elements[-1] = last.with_changes(comma=separator)
    added = [cst.Element(value, comma=separator) for value in new]
    added[-1] = added[-1].with_changes(comma=trailing if trailing is not None else cst.MaybeSentinel.DEFAULT)
    return listed.with_changes(elements=[*elements, *added])


# --------------------------------------------------------------------------------------------
# A whole pickled model: the nn.Module classes it names

# A class of torch's own nn modules, as a pickled model names it.
_TORCH_MODULE_CLASS = re.compile(r"torch\.nn\.modules\.\w+\.(?P<cls>[A-Z]\w*)\Z")
# Classes of torch.nn.modules that torch.nn does not re-export (MultiheadAttention's out_proj).
_NOT_IN_TORCH_NN = frozenset({"NonDynamicallyQuantizableLinear"})
# torch.nn classes that are not modules: subclassing one does not make an nn.Module.
_NOT_MODULES = re.compile(r"(Uninitialized)?(Parameter|Buffer)\Z")


@dataclass(frozen=True)
class _ModelClass:
    name: str  # the class's name in its module
    file: Path | None  # the project file that defines it; None for torch's own module classes
    module: str = ""  # the module that defines it in the run (a checkpoint's __main__.Net may be models.Net)


def _public_torch_name(target: str) -> str:
    """``torch.nn.Linear`` for ``torch.nn.modules.linear.Linear``: the name the code uses."""
    found = _TORCH_MODULE_CLASS.match(target)
    if found is None or found["cls"] in _NOT_IN_TORCH_NN:
        return target
    return f"torch.nn.{found['cls']}"


def _model_classes(
    needed: Sequence[_Global], failure: Failure, evidence: Evidence | None, sources: Sources
) -> dict[str, _ModelClass]:
    """The globals that are nn.Module classes: torch's own, and classes the project defines at
    module level whose bases lead to ``torch.nn.Module`` in its source (a plain class, a
    dataclass, a function of the project is not one)."""
    script = next((f for f in failure.frames if f.user and f.function == "<module>"), None)
    files = [Path(f) for f in getattr(evidence, "imported_files", ()) or ()]
    found: dict[str, _ModelClass] = {}
    for entry in needed:
        name = entry.resolved or entry.name
        torch_class = _TORCH_MODULE_CLASS.match(name)
        if torch_class is not None:
            found[entry.name] = _ModelClass(torch_class["cls"], None)
            continue
        module_name, _, class_name = name.rpartition(".")
        file = Path(script.file) if module_name == "__main__" and script else _module_file(module_name, files)
        if file is not None and _is_module_subclass(sources, file, class_name, files, set()):
            found[entry.name] = _ModelClass(class_name, file, module_name)
    return found


def _module_file(module_name: str, files: Sequence[Path]) -> Path | None:
    """The project file of an imported module (``models`` -> models.py), from the traced imports."""
    if not module_name or module_name == "__main__":
        return None
    tail = module_name.replace(".", "/")
    for file in files:
        text = file.as_posix()
        if any(text == end or text.endswith("/" + end) for end in (f"{tail}.py", f"{tail}/__init__.py")):
            return file
    return None


def _is_module_subclass(sources: Sources, file: Path, class_name: str, files: Sequence[Path], seen: set[str]) -> bool:
    key = f"{file}:{class_name}"
    if key in seen or not class_name.isidentifier():
        return False
    seen.add(key)
    try:
        module = sources.module(file)
    except Exception:  # not readable or not Python: the class is not proved to be a module
        return False
    classes = {s.name.value: s for s in module.body if isinstance(s, cst.ClassDef)}
    definition = classes.get(class_name)
    if definition is None:
        return False
    imports = ImportTable(module)
    for base in definition.bases:
        if base.keyword is not None:
            continue
        local = dotted_name(base.value)
        if local in classes and _is_module_subclass(sources, file, local, files, seen):
            return True
        qualified = imports.qualify(base.value)
        if qualified is None:
            continue
        head, _, attr = qualified.rpartition(".")
        if (head == "torch.nn" or head.startswith("torch.nn.modules.")) and attr[:1].isupper() and not _NOT_MODULES.match(attr):
            return True
        other = _module_file(head, files)
        if other is not None and _is_module_subclass(sources, other, attr, files, seen):
            return True
    return False


@dataclass(frozen=True)
class _ProjectNames:
    named: dict[str, str]  # each project class's global -> the code that names it at the load
    # the ``from module import ...`` statements that get classes added, with the names added
    additions: list[tuple[cst.ImportFrom, tuple[str, ...]]]
    # the ``import module`` lines that get a ``from module import Class`` after them (as code)
    inserted: list[tuple[cst.SimpleStatementLine, str]]


def _project_class_names(
    project: Mapping[str, _ModelClass], load_file: Path, module: cst.Module,
    imports: Sequence[cst.SimpleStatementLine], rebound: _Rebinding,
) -> _ProjectNames | str:
    """Each project class as the load site names it: bare in its own file, through the file's
    imports, or added to a ``from models import Net`` of its module that the load already sees
    (the module is imported by then, so naming another of its classes runs no new code; a name
    the file already uses is never rebound). A module name the file rebinds (``model =
    model.RNNModel(...)``: at the load ``model`` is the instance) names nothing: the class is
    then imported by name, ``from model import RNNModel`` right after the file's ``import
    model``. A reason when one cannot be named (importing its module at the load would run
    code the script never ran at that point)."""
    table = _import_table(imports, rebound)
    used = set(reads(module))
    named: dict[str, str] = {}
    added: dict[str, list[str]] = {}
    inserted: dict[str, list[str]] = {}
    for name, found in project.items():
        if found.file is None:  # torch's own class: spelled by _spell
            continue
        if found.file.resolve() == load_file.resolve():
            if rebound.besides_definition(found.name):
                return (
                    f"the checkpoint names the class {found.name} of {report_path(load_file)}, and the file also "
                    f"binds the name {found.name} to something else: at the load it may not be the class"
                )
            named[name] = found.name
            continue
        module_name, _, class_name = name.rpartition(".")
        if module_name == "__main__" and found.module not in ("", "__main__"):
            return (
                f"the checkpoint names {name}, a class of the script that saved it; at the load in "
                f"{report_path(load_file)} that name is {found.module}.{found.name} (imported from "
                f"{report_path(found.file)}), another class, which would be built from the saved one's pickled state"
            )
        if module_name == "__main__":
            return (
                f"the checkpoint names {name}, a class of the running script (__main__), which "
                f"{report_path(load_file)} cannot import"
            )
        code = _expression_for(table, name, {})
        if code is not None:
            named[name] = code
            continue
        shadowed = _module_import_of(imports, module_name)
        if _from_import_of(imports, module_name) is None and shadowed is None:
            return (
                f"the checkpoint names the project's class {name}, which is not imported at the load in "
                f"{report_path(load_file)} (no import of {module_name} there to name it through)"
            )
        if class_name in used:
            binding = (
                f"binds {module_name} to something else (at the load it is not the module)" if shadowed is not None
                else f"imports from {module_name}"
            )
            return (
                f"the checkpoint names the project's class {name}; {report_path(load_file)} {binding} and already "
                f"uses the name {class_name} for something else, so importing it there would rebind that name"
            )
        named[name] = class_name
        (added if _from_import_of(imports, module_name) is not None else inserted).setdefault(module_name, []).append(class_name)
    additions = []
    for module_name, names in added.items():
        statement = _from_import_of(imports, module_name)
        assert statement is not None  # checked above
        additions.append((statement, tuple(names)))
    insertions = []
    for module_name, names in inserted.items():
        line = _module_import_of(imports, module_name)
        assert line is not None  # checked above
        insertions.append((line, f"from {module_name} import {', '.join(names)}"))
    return _ProjectNames(named, additions, insertions)


def _module_import_of(imports: Sequence[cst.SimpleStatementLine], module_name: str) -> cst.SimpleStatementLine | None:
    """The first ``import module_name`` line among ``imports`` (the module under its own name)."""
    for line in imports:
        for statement in line.body:
            if isinstance(statement, cst.Import) and any(
                dotted_name(alias.name) == module_name and alias.asname is None for alias in statement.names
            ):
                return line
    return None


def _import_table(imports: Sequence[cst.SimpleStatementLine], rebound: Callable[[str], bool]) -> ImportTable:
    """The names ``imports`` bind, without those the file also binds otherwise: those may not
    stand for what was imported when the load runs."""
    table = ImportTable(cst.Module(body=list(imports)))
    table.aliases = {local: target for local, target in table.aliases.items() if not rebound(local)}
    return table


@dataclass(frozen=True)
class _Rebinding:
    """Which names the file binds otherwise than by an import where the load sees them: at
    module level (an assignment, a loop or ``with`` target, a ``def`` or ``class``, a ``global``
    declaration in any function) or in a function around the load (its parameters too). Such
    a name may not stand for what was imported when the load runs."""

    module: cst.Module
    functions: tuple[cst.FunctionDef, ...]  # around the load, innermost first
    declared: frozenset[str]  # declared global in some function
    defined: tuple[str, ...]  # each module-level def and class, once per definition

    @classmethod
    def around(cls, wrapper: MetadataWrapper, statement: cst.CSTNode) -> _Rebinding:
        module = wrapper.module
        parents = wrapper.resolve(ParentNodeProvider)
        functions: list[cst.FunctionDef] = []
        node: cst.CSTNode | None = parents.get(statement)
        while node is not None:
            if isinstance(node, cst.FunctionDef):
                functions.append(node)
            node = parents.get(node)
        declared = frozenset(
            name.name.value for node in m.findall(module, m.Global()) if isinstance(node, cst.Global) for name in node.names
        )
        defined = tuple(s.name.value for s in module.body if isinstance(s, cst.FunctionDef | cst.ClassDef))
        return cls(module, tuple(functions), declared, defined)

    def __call__(self, name: str) -> bool:
        return name in self.defined or self.besides_definition(name)

    def besides_definition(self, name: str) -> bool:
        """Bound otherwise than by an import and by one module-level definition (the class itself)."""
        if name in self.declared or self.defined.count(name) > 1 or bindings_of(self.module, name):
            return True
        return any(name in parameter_names(function) or bindings_of(function, name) for function in self.functions)


def _from_import_of(imports: Sequence[cst.SimpleStatementLine], module_name: str) -> cst.ImportFrom | None:
    """The first ``from module_name import a, b`` (absolute, not a star import) among ``imports``."""
    for line in imports:
        for statement in line.body:
            if (
                isinstance(statement, cst.ImportFrom) and not statement.relative and statement.module is not None
                and dotted_name(statement.module) == module_name and not isinstance(statement.names, cst.ImportStar)
            ):
                return statement
    return None


def _kinds_text(needed: Sequence[_Global], classes: Mapping[str, _ModelClass]) -> str:
    plain = [e.name for e in needed if e.name not in classes]
    project = [e.name for e in needed if e.name in classes and classes[e.name].file is not None]
    torch_classes = [e.name for e in needed if e.name in classes and classes[e.name].file is None]
    parts = []
    if plain:
        parts.append(f"{'all are' if not classes else ', '.join(plain) + ' are'} plain data types")
    if project:
        defined = ", ".join(
            f"{name} ({report_path(cast_file)})" for name in project if (cast_file := classes[name].file) is not None
        )
        parts.append(f"{defined} {'is an nn.Module subclass' if len(project) == 1 else 'are nn.Module subclasses'} of the project")
    if torch_classes:
        parts.append(f"{len(torch_classes)} {'is' if len(torch_classes) == 1 else 'are'} torch's own module classes")
    return "; " + "; ".join(parts)
