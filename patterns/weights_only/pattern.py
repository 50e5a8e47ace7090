"""weights-only: a checkpoint holding plain Python or NumPy objects, or a whole pickled model,
refused by ``torch.load``'s ``weights_only=True`` default (torch >= 2.6).

This module holds the pattern and its choice of fix; ``record.py`` reads the probe's record
of the refused globals, ``source.py`` reads the load site and how the file names each global,
``model_classes.py`` handles a whole pickled model's classes, and ``rewrites.py`` holds the
fixes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper

from repairbot.analysis import (
    ImportTable,
    dotted_name,
    one_line,
    place,
    spans,
    traced_line_matches,
)
from repairbot.edits import Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame, Span

from .model_classes import (
    ModelClass,
    Rebinding,
    import_table,
    kinds_text,
    model_classes,
    project_class_names,
)
from .record import PROBE, PickledGlobal, is_plain_data, probe_record, refused_globals, remedy
from .rewrites import ExtendSafeGlobals, WrapInSafeGlobals, indent_of, safe_globals_context
from .source import (
    Spelling,
    enclosing_safe_globals,
    loader_text,
    local_name_of,
    spell,
    statement_of,
    visible_imports,
)


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
    EVIDENCE = frozenset({"locals", PROBE})
    RERUN_PROBES = frozenset({PROBE})
    BATCH_INVARIANT = True
    MAX_CHANGED_LINES = 4
    REWRITES = (WrapInSafeGlobals, ExtendSafeGlobals)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        named = match.groupdict().get("global") or match.groupdict().get("build")
        frame = failure.user_frame
        record = probe_record(evidence)
        if record is None:
            return self.decline(
                "the checkpoint's full list of unsafe globals was not collected (the unsafe-globals rerun did "
                f"not run){f'; the message names only {named}' if named else ''}",
                diagnosis=remedy([named] if named else []),
                at=frame,
            )
        checkpoint = str(record.get("path") or "the checkpoint")
        if record.get("error"):
            return self.decline(
                f"the globals of {checkpoint} could not be listed: {record['error']}",
                diagnosis=remedy([named] if named else []),
                at=frame,
            )
        needed = refused_globals(record)
        if not needed:
            return self.decline(
                f"get_unsafe_globals_in_checkpoint lists no global for {checkpoint}: the load fails for another "
                "reason than an allowlist can fix"
            )
        classes = model_classes(needed, failure, evidence, sources)
        refused = [entry.name for entry in needed if not is_plain_data(entry.name) and entry.name not in classes]
        if refused:
            return self.decline(
                f"{checkpoint} needs globals that are neither plain data nor nn.Module classes of the project or "
                f"of torch: {', '.join(refused)}; allowlisting them would let the file run their code",
                diagnosis=remedy([entry.name for entry in needed]),
                at=frame,
            )
        if record.get("loads") is False:
            return self.decline(
                f"{checkpoint} still did not load in the evidence rerun with {', '.join(e.name for e in needed)} "
                "allowlisted",
                diagnosis=remedy([entry.name for entry in needed]),
                at=frame,
            )
        if frame is None:
            return self.decline(
                "the checkpoint is loaded inside a library, with no line of the project's code on the way",
                diagnosis=remedy([entry.name for entry in needed]),
            )
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        if not traced_line_matches(wrapper.module.code, frame):
            return self.decline(
                f"line {frame.line} of {report_path(path)} is no longer the traced load: the source changed since the run",
                at=frame,
            )
        found = statement_of(wrapper, frame)
        if isinstance(found, str):
            return self.decline(found, diagnosis=remedy([entry.name for entry in needed]), at=frame)
        return self._site(wrapper, path, frame, found, needed, checkpoint, record, classes)

    def _site(
        self, wrapper: MetadataWrapper, path: Path, frame: Frame, statement: cst.SimpleStatementLine,
        needed: Sequence[PickledGlobal], checkpoint: str, record: Mapping[str, Any],
        classes: Mapping[str, ModelClass],
    ) -> Site | Decline:
        module = wrapper.module
        positions = spans(wrapper)
        where = place(frame)
        import_lines = visible_imports(wrapper, statement)
        rebound = Rebinding.around(wrapper, statement)
        visible = import_table(import_lines, rebound)
        project = {name: found for name, found in classes.items() if found.file is not None}
        reached = project_class_names(project, path, module, import_lines, rebound)
        if isinstance(reached, str):
            return self.decline(reached, diagnosis=remedy([entry.name for entry in needed]), at=frame)
        named = reached.named
        torch_name = local_name_of(visible, "torch")
        if torch_name is None:
            return self.decline(
                f"{report_path(path)} has no `import torch` to write torch.serialization.safe_globals with",
                diagnosis=remedy([entry.name for entry in needed]), at=frame,
            )
        spelled = spell(module, visible, needed, named)
        applicability = Applicability.UNSAFE if classes else self.APPLICABILITY
        existing = enclosing_safe_globals(wrapper, statement, visible)
        loader = loader_text(wrapper, frame)
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
            + kinds_text(needed, classes)
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
                diagnosis=remedy([entry.name for entry in needed]), at=frame,
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
                diagnosis=remedy([entry.name for entry in needed]), at=frame,
            )
        from_spans = tuple(positions[statement] for statement, _ in reached.additions)
        after_spans = tuple(positions[line] for line, _ in reached.inserted)
        extended_lines = {positions[line] for line in import_lines if any(s in line.body for s, _ in reached.additions)}
        if set(anchors) & (extended_lines | set(after_spans)) or extended_lines & set(after_spans):
            return self.decline(
                f"the imports to add and the import statements to extend in {report_path(path)} are one statement",
                diagnosis=remedy([entry.name for entry in needed]), at=frame,
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
        context = safe_globals_context(module, torch_name, spelled.elements, indent_of(module, positions[statement].line))
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

    def _import_anchor(self, wrapper: MetadataWrapper, spelled: Spelling) -> tuple[Span, ...]:
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
