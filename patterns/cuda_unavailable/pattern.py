"""cuda-unavailable: a script with a hard-coded CUDA device, run where there is no GPU."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    Scope,
    ScopeProvider,
)

from repairbot.analysis import (
    DEVICE_NAMES,
    ImportTable,
    bindings_of,
    bound_once,
    failing_expression,
    is_torch_name,
    keyword_arg,
    one_line,
    place,
    place_in,
    spans,
    walk,
)
from repairbot.codemod import quote_of
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import argparse_dest, bound_at, parameter_names
from repairbot.sources import SourceError, Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame, Span

# A CUDA device written as a string: "cuda", "cuda:0", f"cuda:{rank}".
_CUDA_TEXT = re.compile(r"cuda(?::\d+)?")
_NEW_DEVICE_NAME = "device"
# torch.cuda functions that need a GPU (the fix does not guard them; the report says where).
_NEEDS_GPU = (
    "synchronize", "set_device", "current_device", "get_device_name", "get_device_properties",
    "get_device_capability", "mem_get_info", "get_rng_state", "set_rng_state", "ipc_collect",
    "reset_peak_memory_stats", "Stream", "Event",
)


# --------------------------------------------------------------------------------------------
# The rewrite


@dataclass(frozen=True)
class DeviceEdit:
    """One hard-coded CUDA site made device-agnostic: ``to-device`` turns the ``x.cuda(...)``
    call into ``x.to(code, ...)``; any other kind replaces the expression with ``code``."""

    kind: str
    node: type[cst.BaseExpression]  # the type of the node at the site's span
    code: str


@dataclass(frozen=True)
class MakeDeviceAgnostic(Rewrite):
    """Rewrites every hard-coded CUDA site of the file (one change each, at the site's spans in
    order), and with a ``device_line``, inserts it before the anchor statement (the last extra
    span); blank lines and comments above the anchor move above the device line."""

    changes: tuple[DeviceEdit, ...]
    device_line: str | None = None

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        spans = (nodes.site.span, *nodes.site.extra_spans)
        if len(spans) != len(self.changes) + (1 if self.device_line is not None else 0):
            raise EditError("one change per span, and the device line's anchor")
        edits = [self._edit(nodes.at(span, change.node), change) for span, change in zip(spans, self.changes, strict=False)]
        if self.device_line is not None:
            anchor = nodes.at(spans[-1], cst.BaseStatement)
            if not isinstance(anchor, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                raise EditError("the device line has no statement to go before")
            line = cst.parse_statement(self.device_line + "\n").with_changes(leading_lines=anchor.leading_lines)
            # a def keeps its blank lines above it, now below the device line
            kept = [ln for ln in anchor.leading_lines if ln.comment is None] if isinstance(anchor, cst.FunctionDef | cst.ClassDef) else []
            edits.append(Edit(anchor, cst.FlattenSentinel([line, anchor.with_changes(leading_lines=kept)])))
        return edits

    @staticmethod
    def _edit(node: cst.BaseExpression, change: DeviceEdit) -> Edit:
        if change.kind != "to-device":
            return Edit(node, cst.parse_expression(change.code))
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
            raise EditError("not an `x.cuda(...)` call")
        return Edit(node, _to_device(node, change.code))


def _to_device(call: cst.Call, device: str) -> cst.Call:
    """``x.cuda(non_blocking=True)`` -> ``x.to(device, non_blocking=True)``: the device argument
    replaced, the other keywords kept."""
    assert isinstance(call.func, cst.Attribute)
    kept = [arg for arg in call.args if arg.keyword is not None and arg.keyword.value != "device"]
    first = cst.Arg(cst.parse_expression(device))
    if kept:
        first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=[first, *kept])


# --------------------------------------------------------------------------------------------
# The pattern


class CudaUnavailable(Pattern):
    """Makes every hard-coded CUDA device of the failing file device-agnostic, in one edit.

    What it fixes:
        A script written on a GPU machine and run on one without CUDA (a laptop, a CPU-only CI
        runner, a CPU build of torch): ``model.cuda()``, ``x.cuda()``, ``.to("cuda")``,
        ``torch.device("cuda")``, ``device="cuda:0"`` in a tensor factory, a bare device index
        (``device = 0``, ``.to(0)``), ``torch.set_default_device("cuda")``, and a ``"cuda"``
        default in a config dict, a function parameter or an argparse option.

    Why it fails:
        The first use of the GPU raises: ``AssertionError: Torch not compiled with CUDA
        enabled`` (a CPU build), ``RuntimeError: Found no NVIDIA driver on your system`` or
        ``No CUDA GPUs are available`` (a CUDA build without a usable GPU), ``RuntimeError:
        Cannot access accelerator device when none is available.`` (a bare index). Every
        hard-coded site fails in turn, so they are all part of one fix.

    Example:
        ``model = Net().cuda()`` becomes ``model = Net().to(device)`` and ``x.cuda()``
        becomes ``x.to(device)``, with ``device = torch.device("cuda" if
        torch.cuda.is_available() else "cpu")`` added once (at the top of the one function that
        needs it, else after the imports) when the script has no device variable;
        ``torch.device("cuda")`` becomes ``torch.device("cuda" if torch.cuda.is_available()
        else "cpu")``; ``parser.add_argument("--device", default="cuda")`` gets
        ``default="cuda" if torch.cuda.is_available() else "cpu"``, and so do config values,
        parameter defaults and ``device = "cuda:0"``. ``.to("cuda")`` and ``device="cuda"`` in a
        torch call take the device variable when one is in scope, else the same inline
        expression. A device with an index (``"cuda:1"``, ``.cuda(args.gpu)``) keeps it:
        ``.to(args.gpu if torch.cuda.is_available() else "cpu")``. The site the failure
        reached is found from the traced columns of each user frame, innermost first (the
        failing call itself, or the definition of the device it reads: a variable, an argparse
        option, a config key, through up to three assignments); every other hard-coded site of
        that file is rewritten in the same edit. Where the script already has its own switch
        (``device = torch.device("cuda" if use_cuda else "cpu")``, ``args.cuda``), that one
        switch is gated on ``torch.cuda.is_available()`` where it is written (``use_cuda = not
        args.no_cuda and torch.cuda.is_available()``), or at the choice for an option read as
        it is, instead of rewriting every ``.to(device)``; a switch that already asks for
        availability (``args.force_cuda or torch.cuda.is_available()``) is the user's choice
        and is left alone. So are ``.cuda()`` calls that each run under one switch (``if
        use_cuda: model.cuda()``, ``x.cuda() if args.cuda else x``): ``use_cuda = True`` becomes
        ``use_cuda = torch.cuda.is_available()``, an argparse ``default=True`` alike, one edit
        where the switch is written and not one per call (under ``if args.device == "cuda":``,
        the one device default it compares is made device-agnostic instead, and a device it
        compares that the file does not write, ``os.environ.get(...)``, is declined); a call
        outside every such switch is
        rewritten as above, and a call under a switch that already asks for availability stays
        as it is. Another definition of the device variable on a branch the run did not take
        (``if ddp: device = f"cuda:{rank}"`` in a nanoGPT-style configuration, where the traced
        device is the top's ``"cuda"``) stays as it is.

    Fix safety:
        Safe when every site is made device-agnostic where it is written: on a GPU machine the
        script runs exactly as before. Unsafe when a device line is introduced (a new
        variable, placed by the pattern).

    Not handled:
        A switch that only the command line turns on (``--cuda``, ``action="store_true"``) run
        with that flag: the user asked for the GPU, so nothing is edited (diagnosed: run without
        the flag). Calls that need a GPU whatever the device (``torch.cuda.synchronize()``,
        ``torch.cuda.set_device(...)``, ``torch.cuda.get_device_name()``): they are named in the
        report, not guarded. A device taken from somewhere the file does not show (a JSON
        config, an environment variable, another package). An integer variable that is also
        used as an index (``torch.device("cuda", gpu)``, ``f"cuda:{gpu}"``) is left as it is. Hard-coded sites in other files of the
        project are reported for the next attempt, not edited with this one. When no site of
        the project leads to the failure, the run stops with ``environment``.
    """

    ID = "cuda-unavailable"
    TITLE = "Hard-coded CUDA device on a machine without a GPU"
    TAGS = frozenset({"device", "environment"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature(("AssertionError",), phrase("Torch not compiled with CUDA enabled")),
        signature(("RuntimeError",), phrase("Found no NVIDIA driver on your system")),
        signature(("RuntimeError",), phrase("No CUDA GPUs are available")),
        signature(("RuntimeError",), phrase("Cannot access accelerator device when none is available")),
        signature(("RuntimeError",), phrase("Cannot get CUDA generator without ATen_cuda library")),
    )
    EVIDENCE = frozenset({"locals"})
    BATCH_INVARIANT = True
    MAX_CHANGED_LINES = 8
    REWRITES = (MakeDeviceAgnostic,)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        # Declines carry no diagnosis: with none, the run stops as an environment problem
        # (a GPU this machine lacks), which is what it is when no hard-coded site leads here.
        frames = [f for f in reversed(failure.frames) if f.user]
        if not frames:
            return self.decline("CUDA is asked for inside a library, with no line of the project's code on the way")
        files: dict[Path, _File | None] = {}
        for frame in frames:
            path = Path(frame.file)
            if path not in files:
                files[path] = _File.read(sources, path)
            view = files[path]
            if view is None:
                continue
            linked = view.link(frame, evidence)
            if linked is not None:
                guarded = self._guarded_switch(view, frame, linked)
                if guarded is not None:
                    return guarded
                return self._fix(view, frame, linked, failure, evidence, sources)
        for frame in frames:
            view = files.get(Path(frame.file))
            switch = self._gate_switch(view, frame) if view is not None else None
            if switch is not None:
                return switch
        failing = frames[0]
        shown = one_line_at(files.get(Path(failing.file)), failing)
        return self.decline(
            f"{shown} at {place(failing)} needs a GPU, and no hard-coded CUDA device of the project's code leads "
            "there (the device comes from elsewhere, or the call needs a GPU whatever the device)"
        )

    def _gate_switch(self, view: _File, frame: Frame) -> Site | None:
        """A device chosen by the script's own switch (``torch.device("cuda" if use_cuda else
        "cpu")``) that never asks whether CUDA is there: that one switch is gated on
        ``torch.cuda.is_available()`` where it is written (``use_cuda = not args.no_cuda`` ->
        ``use_cuda = not args.no_cuda and torch.cuda.is_available()``), or at the choice itself
        when the switch is an option read as it is (``args.cuda``)."""
        expression = failing_expression(view.positions, frame)
        if expression is None or view.torch is None:
            return None
        owner = view._owner(expression)
        for name in dict.fromkeys(n.value for n in walk(expression) if isinstance(n, cst.Name)):
            value = bound_once(owner, name)
            choice = _cuda_choice(value) if value is not None else None
            if choice is None or value is None:
                continue
            test = choice.test
            target: cst.BaseExpression = test
            kind = "the device choice"
            if isinstance(test, cst.Name):
                written = bound_once(owner, test.value)
                if written is not None and not isinstance(written, cst.Name) and written in view.positions:
                    target, kind = written, f"`{test.value}`, where it is written"
            if target not in view.positions or "is_available" in view.module.code_for_node(target):
                continue
            return self._gate_site(
                view, target, f"on {view.torch}.cuda.is_available()", kind,
                f"so `{one_line(view.module, value)}` picks the CPU on a machine without CUDA",
                evidence={"switch": one_line(view.module, test), "device": f"{place_in(view.path, view.positions[value].line)}",
                          "failing": place(frame)},
                evidence_text=(
                    f"the failing call at {place(frame)} uses `{name}`, chosen at {report_path(view.path)}:"
                    f"{view.positions[value].line} by the switch `{one_line(view.module, test)}`, which does "
                    "not check that CUDA is available"
                ),
            )
        return None

    def _gate_site(
        self, view: _File, target: cst.BaseExpression, switch: str, kind: str, effect: str,
        evidence: dict[str, object], evidence_text: str,
    ) -> Site:
        """The one edit that gates a switch on CUDA's availability where ``target`` writes it."""
        new = _gated(view, target)
        span = view.positions[target]
        return Site(
            pattern=self.ID,
            file=str(view.path),
            span=span,
            rewrite=MakeDeviceAgnostic((DeviceEdit("gate", type(target), new),)),
            summary=(
                f"Gated the script's CUDA switch {switch} at {place_in(view.path, span.line)} ({kind}): "
                f"`{one_line(view.module, target)}` -> `{new}`, {effect}"
            ),
            applicability=Applicability.SAFE,
            evidence=evidence,
            evidence_text=evidence_text,
        )

    def _guarded_switch(self, view: _File, frame: Frame, linked: _Link) -> Site | Decline | None:
        """``.cuda()`` calls that each run under the script's own switch (``if use_cuda:
        model.cuda()``, ``x.cuda() if args.cuda else x``): the one switch is gated on
        ``torch.cuda.is_available()`` where it is written (``use_cuda = True`` -> ``use_cuda =
        torch.cuda.is_available()``, an argparse ``default=True`` alike), instead of rewriting
        every call. None when a hard-coded site of the file runs outside that switch, or the
        switch cannot be followed to where it is written (today's rewrite of every site)."""
        if view.torch is None or linked.site.kind not in ("cuda-method", "device-argument"):
            return None
        test = view.guard(linked.site.node)
        if test is None:
            return None
        key = view.module.code_for_node(test)
        compared = view.compared_device(test) if isinstance(test, cst.Comparison) else None
        if any(
            ((guard := view.guard(site.node)) is None or view.module.code_for_node(guard) != key) and site is not compared
            for site in view.sites
        ):
            return None
        if isinstance(test, cst.Comparison):
            if compared is None:
                return self.decline(
                    f"every hard-coded CUDA call of {report_path(view.path)} runs under `{key}`, and the device it "
                    "compares is not a hard-coded CUDA device of the file (it comes from elsewhere, or asks for CUDA's "
                    "availability already)"
                )
            return self._compared_site(view, frame, linked, key, compared)
        assert isinstance(test, cst.Name | cst.Attribute)
        written = view.switch_written(test)
        if written is None:
            return None
        if isinstance(written, str):
            return self.decline(
                f"every hard-coded CUDA call of {report_path(view.path)} runs under `{key}`, {written}: the user "
                "asked for the GPU, which this machine lacks",
                diagnosis="run without that flag on a machine without CUDA (it asks for the GPU)",
                at=frame,
            )
        target, kind = written
        if "is_available" in view.module.code_for_node(target):
            return self.decline(
                f"every hard-coded CUDA call of {report_path(view.path)} runs under `{key}`, which asks whether CUDA is "
                f"available where it is written ({place_in(view.path, view.positions[target].line)}): the GPU is asked "
                "for on purpose there"
            )
        line = view.positions[target].line
        guarded = len(view.sites)
        return self._gate_site(
            view, target, f"`{key}` on {view.torch}.cuda.is_available()", kind,
            f"so the {guarded} CUDA call{'s' if guarded > 1 else ''} it guards stay on the CPU on a machine without CUDA",
            evidence={"switch": key, "written": place_in(view.path, line), "failing": place(frame),
                      "guarded": [f"{place_in(view.path, s.span.line)}" for s in view.sites]},
            evidence_text=(
                f"`{linked.site.code}` at {place(frame)} runs under the script's switch `{key}`, like every hard-coded "
                f"CUDA call of {report_path(view.path)} ({guarded}); the switch is written at "
                f"{place_in(view.path, line)} without asking whether CUDA is available"
            ),
        )

    def _compared_site(self, view: _File, frame: Frame, linked: _Link, key: str, device: _Hardcoded) -> Site:
        """Every CUDA call runs under ``if <device> == "cuda":``: the one device definition it
        compares is made device-agnostic, and the calls are skipped on a machine without CUDA."""
        edit = view._edit(device, None)
        guarded = len(view.sites) - 1
        return Site(
            pattern=self.ID,
            file=str(view.path),
            span=device.span,
            rewrite=MakeDeviceAgnostic((edit.param(),)),
            summary=(
                f"Made the device that the script's switch `{key}` compares device-agnostic at "
                f"{place_in(view.path, device.span.line)}: `{edit.before}` -> `{edit.after}`, so the {guarded} CUDA "
                f"call{'s' if guarded > 1 else ''} it guards are skipped on a machine without CUDA"
            ),
            applicability=Applicability.SAFE,
            evidence={"switch": key, "written": place_in(view.path, device.span.line), "failing": place(frame),
                      "guarded": [place_in(view.path, s.span.line) for s in view.sites if s is not device]},
            evidence_text=(
                f"`{linked.site.code}` at {place(frame)} runs under `{key}`, like every hard-coded CUDA call of "
                f"{report_path(view.path)}; the device it compares is written at "
                f"{place_in(view.path, device.span.line)} as `{device.code}`"
            ),
        )

    def _fix(
        self, view: _File, frame: Frame, linked: _Link, failure: Failure, evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        unwritten = _not_written_there(evidence, frame, linked.site)
        if unwritten is not None:
            return self.decline(
                f"`{linked.site.code}` at {place_in(view.path, linked.site.span.line)} cannot have written the device "
                f"the run used there ({unwritten!r}): that definition is on a branch the run did not take"
            )
        plan = view.plan(linked, _traced_value(evidence, frame, linked.site))
        if isinstance(plan, str):
            return self.decline(plan)
        primary = plan.edits[0]
        where = place(frame)
        deepest = failure.user_frame
        failing_at = place(deepest) if deepest is not None else where
        notes = list(view.gpu_calls())
        others = _other_files(evidence, view.path, sources)
        if others:
            notes.append(
                "Hard-coded CUDA devices remain in other files of the project ("
                + ", ".join(others) + "): the next attempt will meet them."
            )
        applicability = self.APPLICABILITY
        changes = "; ".join(f"`{e.before}` -> `{e.after}`" for e in plan.edits[:6])
        if len(plan.edits) > 6:
            changes += f"; and {len(plan.edits) - 6} more"
        summary = (
            f"Made the hard-coded CUDA device{'s' if len(plan.edits) > 1 else ''} of {report_path(view.path)} "
            f"device-agnostic ({len(plan.edits)} site{'s' if len(plan.edits) > 1 else ''}): {changes}"
        )
        if plan.device_line is not None:
            applicability = Applicability.UNSAFE
            summary += f"; added `{plan.device_line}` at {report_path(view.path)}:{plan.anchor_line}"
            notes.append("The script had no device variable: the one added picks the GPU whenever there is one.")
        cuda_available = evidence.environment.cuda_available if evidence else False
        cuda = "not available" if not cuda_available else "available"
        return Site(
            pattern=self.ID,
            file=str(view.path),
            span=primary.span,
            rewrite=MakeDeviceAgnostic(tuple(e.param() for e in plan.edits), plan.device_line if plan.anchor else None),
            summary=summary,
            applicability=applicability,
            evidence={
                "message": failure.headline,
                "cuda_available": cuda_available,
                "failing": failing_at,
                "reached": {"site": f"{place_in(view.path, linked.site.span.line)}", "how": linked.how},
                "sites": [
                    {"line": e.span.line, "code": e.before, "fixed": e.after, "kind": e.kind} for e in plan.edits
                ],
                "device_variable": plan.device_name,
                "introduced": plan.device_line,
                "other_files": others,
            },
            evidence_text=(
                f"{failure.headline} at {failing_at}"
                + (f", called from {where}" if where != failing_at else "")
                + f"; it comes from `{linked.site.code}` ({place_in(view.path, linked.site.span.line)}, {linked.how}); "
                f"CUDA is {cuda} here; {len(plan.edits)} hard-coded CUDA site{'s' if len(plan.edits) > 1 else ''} "
                f"in {report_path(view.path)}"
            ),
            notes=tuple(notes),
            extra_spans=tuple(e.span for e in plan.edits[1:]) + ((plan.anchor,) if plan.anchor else ()),
        )


# --------------------------------------------------------------------------------------------
# Hard-coded sites


@dataclass(frozen=True)
class _Hardcoded:
    """One place a CUDA device is written into the file."""

    kind: str  # "cuda-method", "device-argument" (needs a device), "device-value" (made agnostic in place)
    node: cst.BaseExpression  # the Call of .cuda(), else the literal
    span: Span
    code: str  # the code around it, for the report
    indexed: bool = False  # "cuda:1", .cuda(1): a device index to keep
    binds: tuple[str, ...] = ()  # what it defines: "name:device", "attr:device", "key:device"


@dataclass(frozen=True)
class _Link:
    site: _Hardcoded
    how: str  # for the report: "the failing call", "`device` read at train.py:30"


@dataclass(frozen=True)
class _Edit:
    kind: str
    span: Span
    node: type[cst.BaseExpression]  # the rewrite's check
    before: str
    after: str
    code: str  # the replacement (an expression), or the device for "to-device"

    def param(self) -> DeviceEdit:
        return DeviceEdit(self.kind, self.node, self.code)


@dataclass
class _Plan:
    edits: list[_Edit] = field(default_factory=list)
    device_name: str | None = None
    device_line: str | None = None
    anchor: Span | None = None
    anchor_line: int | None = None


def _span_tuple(span: Span) -> tuple[int, int, int, int]:
    return (span.line, span.col, span.end_line, span.end_col)


def _literal_text(node: cst.CSTNode) -> str | None:
    """The text of a plain string literal, or the leading text of an f-string."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
        return node.parts[0].value + "{}"
    return None


def _cuda_literal(node: cst.CSTNode, allow_index: bool = False) -> tuple[bool, bool]:
    """(is a CUDA device literal, carries an index): ``"cuda"``, ``"cuda:1"``, ``f"cuda:{i}"``,
    and with ``allow_index`` a bare integer (a device index, which means CUDA)."""
    text = _literal_text(node)
    if text is not None:
        if _CUDA_TEXT.fullmatch(text):
            return True, text != "cuda"
        if isinstance(node, cst.FormattedString) and re.fullmatch(r"cuda:\{\}", text):
            return True, True
        return False, False
    if allow_index and isinstance(node, cst.Integer):
        return True, True
    return False, False


def _device_like(name: str) -> bool:
    """A name that holds a device when it holds "cuda": ``device``, ``DEVICE``, ``train_device``,
    ``dev``; not ``device_type`` (autocast's "cuda" means the kind of device, and "cpu" there
    would switch autocast on for the CPU)."""
    lower = name.lower()
    return ("device" in lower or lower in ("dev", "gpu") or lower.endswith("_dev")) and "type" not in lower


def _device_index_name(name: str) -> bool:
    """A name that holds one device when it holds an integer: ``device = 0``, ``gpu_id = 1``
    (not ``num_devices = 2`` or ``device_ids = [0, 1]``)."""
    lower = name.lower()
    return lower in ("device", "dev", "gpu", "gpu_id", "device_id", "cuda_device") or lower.endswith("_device")


def _device_variable(name: str) -> bool:
    """A variable ``.to(...)`` can be given: ``device``, ``DEVICE``, ``train_device``."""
    lower = name.lower()
    return lower in ("device", "dev", "torch_device") or lower.endswith("_device")


class _File:
    """One parsed project file: its hard-coded sites, and how a frame reaches them."""

    def __init__(self, path: Path, wrapper: MetadataWrapper) -> None:
        self.path = path
        self.wrapper = wrapper
        self.module = wrapper.module
        self.positions = spans(wrapper)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.scopes = wrapper.resolve(ScopeProvider)
        self.imports = ImportTable(self.module)
        self.torch = _module_level_alias(self.module, "torch")
        self.quote = quote_of(self.module)
        self.sites = list(self._find())

    @classmethod
    def read(cls, sources: Sources, path: Path) -> _File | None:
        if not path.is_absolute() or not path.is_file():
            return None
        try:
            return cls(path, sources.metadata(path))
        except (SourceError, OSError, cst.ParserSyntaxError):
            return None

    # finding the sites ------------------------------------------------------------------
    def _find(self) -> Iterator[_Hardcoded]:
        seen: set[int] = set()
        for node in walk(self.module):
            for site in self._sites_at(node):
                if id(site.node) not in seen:
                    seen.add(id(site.node))
                    yield site

    def _site(self, kind: str, node: cst.BaseExpression, context: cst.CSTNode, indexed: bool = False,
              binds: tuple[str, ...] = ()) -> _Hardcoded:
        code = one_line(self.module, context).rstrip(",")
        if len(code) > 60:
            # a long call: its argument (``default="cuda"``) says enough
            parent = self.parents.get(node)
            code = one_line(self.module, parent if isinstance(parent, cst.Arg) else node).rstrip(",")
        return _Hardcoded(
            kind=kind, node=node, span=self.positions[node], code=code,
            indexed=indexed, binds=binds or self._bound_by(node),
        )

    def _sites_at(self, node: cst.CSTNode) -> Iterator[_Hardcoded]:
        if isinstance(node, cst.Call):
            yield from self._call_sites(node)
        elif isinstance(node, cst.Assign | cst.AnnAssign) and node.value is not None:
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            names = [n for n in map(_target_name, targets) if n]
            index_names = [n for n in names if _device_index_name(n) and self._used_as_device(n)]
            is_cuda, indexed = _cuda_literal(node.value, allow_index=bool(index_names))
            if is_cuda and any(map(_device_like, names)):
                yield self._site("device-value", node.value, node, indexed)
        elif isinstance(node, cst.Param) and node.default is not None:
            name = node.name.value
            is_cuda, indexed = _cuda_literal(node.default, allow_index=_device_index_name(name) and self._used_as_device(name))
            if is_cuda and _device_like(node.name.value):
                yield self._site("device-value", node.default, node, indexed, binds=(f"name:{node.name.value}",))
        elif isinstance(node, cst.DictElement) and isinstance(node.key, cst.SimpleString):
            key = node.key.evaluated_value
            is_cuda, indexed = _cuda_literal(node.value)
            if is_cuda and isinstance(key, str) and _device_like(key):
                yield self._site("device-value", node.value, node, indexed, binds=(f"key:{key}",))

    def _call_sites(self, call: cst.Call) -> Iterator[_Hardcoded]:
        func = call.func
        qualified = self.imports.qualify(func)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method == "cuda" and isinstance(func, cst.Attribute) and self.imports.qualify(func.value) is None:
            device = next((a for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
            yield self._site("cuda-method", call, call, indexed=device is not None)
            return
        if is_torch_name(qualified, "torch.device"):
            first = next((a for a in call.args if a.keyword is None or a.keyword.value == "type"), None)
            if first is not None:
                is_cuda, indexed = _cuda_literal(first.value, allow_index=True)
                if is_cuda:
                    yield self._site("device-value", first.value, call, indexed)
            return
        if is_torch_name(qualified, "torch.set_default_device") and call.args:
            is_cuda, indexed = _cuda_literal(call.args[0].value)
            if is_cuda:
                yield self._site("device-value", call.args[0].value, call, indexed)
            return
        torch_callee = qualified is not None and qualified.split(".")[0] == "torch"
        for position, arg in enumerate(call.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if method == "to" and (keyword == "device" or (keyword is None and position == 0)):
                is_cuda, indexed = _cuda_literal(arg.value, allow_index=True)
                if is_cuda:
                    yield self._site("device-argument", arg.value, call, indexed)
            elif keyword == "map_location" or (keyword == "device" and torch_callee):
                is_cuda, indexed = _cuda_literal(arg.value, allow_index=torch_callee)
                if is_cuda:
                    yield self._site("device-argument", arg.value, call, indexed)
            elif keyword == "default" and method == "add_argument":
                is_cuda, indexed = _cuda_literal(arg.value)
                dest = argparse_dest(call)
                if is_cuda and dest is not None and _device_like(dest):
                    yield self._site("device-value", arg.value, call, indexed, binds=(f"attr:{dest}",))
            elif keyword is not None and _device_like(keyword) and not torch_callee:
                # Trainer(device="cuda"), dict(device="cuda"), SimpleNamespace(device="cuda")
                is_cuda, indexed = _cuda_literal(arg.value)
                if is_cuda:
                    yield self._site("device-value", arg.value, call, indexed, binds=(f"attr:{keyword}", f"key:{keyword}"))

    def _used_as_device(self, name: str) -> bool:
        """Whether every read of ``name`` in the file hands it over as a device (``.to(name)``,
        ``device=name``, ``torch.device(name)``, an argument of a project function): then an
        integer there is a device index, and "cpu" can take its place. Used as an index
        (``torch.device("cuda", gpu)``, ``f"cuda:{gpu}"``), it cannot."""
        for node in walk(self.module):
            if not isinstance(node, cst.Name) or node.value != name:
                continue
            parent = self.parents.get(node)
            if isinstance(parent, cst.AssignTarget | cst.Param) or (
                isinstance(parent, cst.AnnAssign) and parent.target is node
            ):
                continue
            if not isinstance(parent, cst.Arg) or parent.value is not node:
                return False
            call = self.parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            keyword = parent.keyword.value if parent.keyword is not None else None
            position = [a for a in call.args if a.keyword is None].index(parent) if keyword is None else -1
            qualified = self.imports.qualify(call.func)
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
            if keyword in ("device", "map_location") or (method in ("to", "cuda") and position == 0):
                continue
            if is_torch_name(qualified, "torch.device") and position == 0:
                continue
            if qualified is None and method is None:
                continue  # handed to a function of the project
            return False
        return True

    def _bound_by(self, node: cst.CSTNode) -> tuple[str, ...]:
        """What the statement around ``node`` assigns: ``device = torch.device("cuda")`` binds
        ``device``; ``self.device = "cuda"`` binds the attribute ``device``."""
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, cst.BaseSmallStatement | cst.BaseCompoundStatement):
            current = self.parents.get(current)
        if isinstance(current, cst.Assign):
            targets = [t.target for t in current.targets]
        elif isinstance(current, cst.AnnAssign):
            targets = [current.target]
        else:
            return ()
        in_class = isinstance(self._owner(current, cst.ClassDef), cst.ClassDef)
        bound: list[str] = []
        for target in targets:
            if isinstance(target, cst.Name):
                bound.append(f"name:{target.value}")
                if in_class:  # a class attribute (a config class): read as cfg.device
                    bound.append(f"attr:{target.value}")
            elif isinstance(target, cst.Attribute):
                bound.append(f"attr:{target.attr.value}")
        return tuple(bound)

    # linking a frame to a site -----------------------------------------------------------
    def link(self, frame: Frame, evidence: Evidence | None) -> _Link | None:
        """The hard-coded site this frame's expression reaches: inside it, or the definition of
        a device it reads; or a CUDA literal it passes straight to the call it makes."""
        expression = failing_expression(self.positions, frame)
        if expression is None:
            return None
        where = self.positions[expression]
        inside = [s for s in self.sites if _contains(where, s.span)]
        if inside:
            return _Link(min(inside, key=lambda s: (s.span.line, s.span.col)), "the failing call")
        owner = self._owner(expression)
        reads = self._reads_through(expression, owner)
        candidates: list[tuple[int, int, _Hardcoded, str]] = []
        for site in self.sites:
            for bound in site.binds:
                if bound not in reads:
                    continue
                kind, _, name = bound.partition(":")
                site_owner = self._owner(site.node)
                if kind == "name" and site_owner is not owner and not isinstance(site_owner, cst.Module):
                    continue  # a local of another function
                rank = 0 if site_owner is owner else 1
                shown = {"name": f"`{name}`", "attr": f"`.{name}`", "key": f"`[{self.quote}{name}{self.quote}]`"}[kind]
                candidates.append((reads[bound], rank, site, f"{shown} read at {place_in(self.path, frame.line)}"))
        if candidates:
            # what the expression reads itself first, then what those values read
            _, _, site, how = min(candidates, key=lambda c: (c[0], c[1], c[2].span.line))
            return _Link(site, how)
        if isinstance(expression, cst.Call):
            for arg in expression.args:
                is_cuda, indexed = _cuda_literal(arg.value)
                if is_cuda:
                    site = self._site("device-value", arg.value, expression, indexed)
                    self.sites.append(site)
                    return _Link(site, "passed to the failing call")
        return None

    def _reads_through(self, expression: cst.CSTNode, owner: cst.CSTNode, depth: int = 3) -> dict[str, int]:
        """What the expression reads (depth 0), and what the values of the names it reads read in
        turn (``device = torch.device(config["device"])`` then ``x.to(device)`` reads ``device``,
        then ``config["device"]``), in its function and at module level."""
        found = dict.fromkeys(_reads(expression), 0)
        frontier = {r.partition(":")[2] for r in found if r.startswith("name:")}
        seen: set[str] = set()
        for level in range(1, depth + 1):
            values = [value for name in frontier - seen for value in self._assigned_values(name, owner)]
            seen |= frontier
            more: set[str] = set()
            for value in values:
                more |= _reads(value)
            for read in more:
                found.setdefault(read, level)
            frontier = {r.partition(":")[2] for r in more if r.startswith("name:")}
        return found

    def _assigned_values(self, name: str, owner: cst.CSTNode) -> Iterator[cst.BaseExpression]:
        for node in walk(self.module):
            if isinstance(node, cst.Assign):
                targets = [t.target for t in node.targets]
            elif isinstance(node, cst.AnnAssign):
                targets = [node.target]
            else:
                continue
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                where = self._owner(node)
                if (where is owner or isinstance(where, cst.Module)) and node.value is not None:
                    yield node.value

    def _owner(self, node: cst.CSTNode, *also: type[cst.CSTNode]) -> cst.CSTNode:
        """The function the node runs in (or the first of ``also`` around it), else the module."""
        kinds: tuple[type[cst.CSTNode], ...] = (cst.FunctionDef, cst.Module, *also)
        current = self.parents.get(node)
        while current is not None and not isinstance(current, kinds):
            current = self.parents.get(current)
        return current if current is not None else self.module

    # a switch around the sites -------------------------------------------------------------
    def guard(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The switch the nearest ``if`` (or conditional expression) around ``node`` runs it
        under, when that test is a plain name or attribute (``use_cuda``, ``args.cuda``) or
        compares a device with a CUDA literal (``args.device == "cuda"``), and ``node`` is in
        its body, not its ``else``."""
        child, current = node, self.parents.get(node)
        while current is not None and not isinstance(current, cst.FunctionDef | cst.ClassDef | cst.Module):
            if isinstance(current, cst.If | cst.IfExp) and child is not current.test:
                if child is not current.body:
                    return None  # in the else branch
                test = current.test
                return test if isinstance(test, cst.Name | cst.Attribute) or _cuda_comparison(test) else None
            child, current = current, self.parents.get(current)
        return None

    def compared_device(self, test: cst.Comparison) -> _Hardcoded | None:
        """The one hard-coded device definition a ``X == "cuda"`` test reads (``args.device``
        -> the argparse default ``"cuda"``), when there is exactly one."""
        reads = self._reads_through(test, self._owner(test))
        found = [
            site for site in self.sites
            if site.kind == "device-value" and not site.indexed and any(b in reads for b in site.binds)
        ]
        return found[0] if len(found) == 1 else None

    def switch_written(self, test: cst.Name | cst.Attribute) -> tuple[cst.BaseExpression, str] | str | None:
        """Where the switch's value is written, and how the report names it: the one assignment
        of the name (in the test's function, else at module level), the one ``x.attr = ...`` of
        the file, else the ``default=`` of the argparse option that sets the attribute; a text
        when the option is a flag that only the command line turns on."""
        if isinstance(test, cst.Name):
            owner = self._owner(test)
            if isinstance(owner, cst.FunctionDef) and test.value in parameter_names(owner):
                return None  # the caller's value
            for scope in dict.fromkeys((owner, self.module)):
                if bindings_of(scope, test.value):
                    value = bound_once(scope, test.value)
                    return (value, f"`{test.value}`, where it is written") if value is not None else None
            return None
        attr = test.attr.value
        assigned = [
            node.value for node in walk(self.module) if isinstance(node, cst.Assign)
            and any(isinstance(t.target, cst.Attribute) and t.target.attr.value == attr for t in node.targets)
        ]
        if assigned:
            return (assigned[0], f"`.{attr}`, where it is written") if len(assigned) == 1 else None
        options = [
            node for node in walk(self.module)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "add_argument" and argparse_dest(node) == attr
        ]
        if len(options) != 1:
            return None
        default = keyword_arg(options[0], "default")
        action = keyword_arg(options[0], "action")
        if default is not None and m.matches(default.value, m.Name("True")):
            return default.value, f"the default of the `{attr}` option"
        store_true = action is not None and m.matches(action.value, m.SimpleString(value=m.MatchIfTrue(
            lambda text: text.strip("'\"") == "store_true")))
        if store_true and (default is None or m.matches(default.value, m.Name("False"))):
            flag = one_line(self.module, options[0].args[0].value)
            return f"a flag that is off unless the command line passes it ({flag} at {place_in(self.path, self.positions[options[0]].line)})"
        return None

    # planning the edit ---------------------------------------------------------------------
    def plan(self, linked: _Link, traced: str | None = None) -> _Plan | str:
        """The edits: every site of the file, the linked one first; ``.cuda()`` gets the
        script's device variable (one is introduced when none is visible), ``.to("cuda")`` too
        when one is visible, and every other site is made agnostic where it is written. With
        ``traced`` (the value the failing frame saw of the variable the linked site defines,
        the very literal written there), another definition of that variable inside an ``if``
        around which the linked one is not (``if ddp: device = f"cuda:{rank}"``) is a branch the
        run did not take: it stays as it is."""
        if self.torch is None:
            return f"{report_path(self.path)} has no module-level `import torch` to write a device-agnostic expression with"
        sites = sorted(self.sites, key=lambda s: (s.span.line, s.span.col))
        # a site under a switch that asks for CUDA already (if use_cuda: with use_cuda =
        # torch.cuda.is_available()) runs only where there is a GPU: it stays as it is
        ordered = [
            linked.site,
            *[s for s in sites if s is not linked.site and not self._guarded_by_availability(s)
              and not (traced is not None and self._other_branch(s, linked.site))],
        ]
        plan = _Plan()
        names: dict[int, str | None] = {id(s): self._visible_device(s) for s in ordered if not s.indexed}
        missing = [s for s in ordered if s.kind == "cuda-method" and not s.indexed and names[id(s)] is None]
        if missing:
            # sites that would use the new variable too when it is in scope: .to("cuda")
            users = [s for s in ordered if not s.indexed and s.kind == "device-argument" and names[id(s)] is None]
            introduced = self._introduce(missing, users)
            if isinstance(introduced, str):
                return introduced
            plan.device_line, plan.anchor, owner = introduced
            plan.anchor_line = plan.anchor.line
            for site in ordered:
                if not site.indexed and names[id(site)] is None and self._sees_new_device(site, owner, plan.anchor):
                    names[id(site)] = _NEW_DEVICE_NAME
        for site in ordered:
            device = names.get(id(site)) if site.kind in ("cuda-method", "device-argument") else None
            plan.device_name = plan.device_name or device
            plan.edits.append(self._edit(site, device))
        return plan

    def _other_branch(self, site: _Hardcoded, linked: _Hardcoded) -> bool:
        """Whether ``site`` defines the same variable as ``linked`` inside an ``if`` that does
        not hold ``linked``."""
        names = [b for b in linked.binds if b.startswith("name:")]
        if site.kind != "device-value" or not names or not set(names) & set(site.binds):
            return False
        current = self.parents.get(site.node)
        while current is not None and not isinstance(current, cst.FunctionDef | cst.ClassDef | cst.Module):
            if isinstance(current, cst.If) and not _contains(self.positions[current], linked.span):
                return True
            current = self.parents.get(current)
        return False

    def _guarded_by_availability(self, site: _Hardcoded) -> bool:
        test = self.guard(site.node)
        written = self.switch_written(test) if isinstance(test, cst.Name | cst.Attribute) else None
        return isinstance(written, tuple) and "is_available" in self.module.code_for_node(written[0])

    def _sees_new_device(self, site: _Hardcoded, owner: cst.CSTNode, anchor: Span) -> bool:
        """Whether an introduced device line (at the top of ``owner``) is in scope at the site."""
        if site.span.line < anchor.line:
            return False
        if isinstance(owner, cst.Module):
            scope = self.scopes.get(site.node)
            return scope is not None and not _bound_in(scope, _NEW_DEVICE_NAME)
        current: cst.CSTNode | None = site.node
        while current is not None and current is not owner:
            current = self.parents.get(current)
        return current is owner

    def _agnostic(self, code: str) -> str:
        return f"{code} if {self.torch}.cuda.is_available() else {self.quote}cpu{self.quote}"

    def _edit(self, site: _Hardcoded, device: str | None) -> _Edit:
        node_type = type(site.node)
        before = one_line(self.module, site.node)
        if site.kind == "cuda-method":
            call = cst.ensure_type(site.node, cst.Call)
            if device is None:
                index = next(a for a in call.args if a.keyword is None or a.keyword.value == "device")
                device = self._agnostic(one_line(self.module, index.value))
            after = one_line(self.module, _to_device(call, device))
            return _Edit("to-device", site.span, node_type, before, after, device)
        code = device if device is not None and site.kind == "device-argument" else self._agnostic(before)
        shown_before = site.code
        shown_after = shown_before.replace(before, code, 1) if before in shown_before else code
        return _Edit("replace", site.span, node_type, shown_before, shown_after, code)

    def _visible_device(self, site: _Hardcoded) -> str | None:
        """A device variable the site can use: bound before it in its function, a parameter,
        or a module global."""
        scope = self.scopes.get(site.node)
        if scope is None:
            return None
        line = site.span.line
        found: list[str] = []
        for name in self._device_names():
            if bound_at(scope, name, line, self.positions):
                found.append(name)
        found.sort(key=lambda n: (DEVICE_NAMES.index(n) if n in DEVICE_NAMES else len(DEVICE_NAMES), n))
        return found[0] if found else None

    def _device_names(self) -> list[str]:
        """Names the file binds to a device: ``device = torch.device(...)``, ``device = "cuda"
        if ... else "cpu"``, a ``device`` parameter."""
        names: set[str] = set()
        for node in walk(self.module):
            if isinstance(node, cst.Param) and _device_variable(node.name.value):
                names.add(node.name.value)
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name) and _device_variable(target.target.value):
                        names.add(target.target.value)
            elif isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name) and _device_variable(node.target.value):
                names.add(node.target.value)
        return sorted(names)

    def _introduce(
        self, missing: Sequence[_Hardcoded], users: Sequence[_Hardcoded]
    ) -> tuple[str, Span, cst.CSTNode] | str:
        """The device line, the statement it goes before, and the block that holds it: first in
        the one top-level function whose sites need it (and all that could use it), else after
        the module's imports."""
        owners = {id(self._owner(s.node)): self._owner(s.node) for s in [*missing, *users]}
        function = next(iter(owners.values())) if len(owners) == 1 else None
        if (
            isinstance(function, cst.FunctionDef) and self.parents.get(function) is self.module
            and isinstance(function.body, cst.IndentedBlock)
        ):
            statements = list(function.body.body)
            start = 1 if len(statements) > 1 and _is_docstring(statements[0]) else 0
            anchor: cst.CSTNode = statements[start]
            owner: cst.CSTNode = function
        else:
            # a method, a nested function or several functions: the module level serves them all
            for site in missing:
                scope = self.scopes.get(site.node)
                if scope is not None and _bound_in(scope, _NEW_DEVICE_NAME):
                    return (
                        f"the name `{_NEW_DEVICE_NAME}` is bound in the code around {place_in(self.path, site.span.line)}, "
                        "yet not before the device is needed there: no device variable can be added for it"
                    )
            candidates = [s for s in self.module.body if not _is_docstring(s) and not _is_import(s)]
            if not candidates:
                return f"{report_path(self.path)} has no statement after its imports to put a device line before"
            anchor, owner = candidates[0], self.module
            first_use = min(s.span.line for s in missing)
            if self.positions[anchor].line > first_use:
                return f"{report_path(self.path)} uses CUDA at line {first_use}, before its imports end"
        q = self.quote
        line = f"{_NEW_DEVICE_NAME} = {self.torch}.device({q}cuda{q} if {self.torch}.cuda.is_available() else {q}cpu{q})"
        return line, self.positions[anchor], owner

    # what the fix leaves ---------------------------------------------------------------------
    def gpu_calls(self) -> Iterator[str]:
        """torch.cuda calls that need a GPU whatever the device, for the report."""
        for node in walk(self.module):
            if isinstance(node, cst.Call):
                qualified = self.imports.qualify(node.func)
                if qualified and qualified.startswith("torch.cuda.") and qualified.rsplit(".", 1)[-1] in _NEEDS_GPU:
                    yield (
                        f"`{one_line(self.module, node)}` at {place_in(self.path, self.positions[node].line)} needs a GPU "
                        "whatever the device: guard it with `if torch.cuda.is_available():`."
                    )


def one_line_at(view: _File | None, frame: Frame) -> str:
    """The failing expression for a decline, else the frame's code."""
    if view is not None:
        expression = failing_expression(view.positions, frame)
        if expression is not None:
            return f"`{one_line(view.module, expression)}`"
    return f"`{frame.code.strip()}`" if frame.code else "the call"


def _other_files(evidence: Evidence | None, fixed: Path, sources: Sources) -> list[str]:
    """``models.py:12``: hard-coded sites in the project's other imported files."""
    found: list[str] = []
    for name in evidence.imported_files if evidence else ():
        path = Path(name)
        if path.resolve() == fixed.resolve() or "site-packages" in path.parts:
            continue
        view = _File.read(sources, path)
        if view is not None and view.sites:
            found.extend(f"{place_in(path, site.span.line)}" for site in view.sites[:3])
    return found


# --------------------------------------------------------------------------------------------
# Source helpers


def _contains(outer: Span, inner: Span) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def _reads(expression: cst.CSTNode) -> set[str]:
    """What an expression reads: names, attribute names, subscript and ``.get()`` keys."""
    found: set[str] = set()
    for node in walk(expression):
        if isinstance(node, cst.Name):
            found.add(f"name:{node.value}")
        elif isinstance(node, cst.Attribute):
            found.add(f"attr:{node.attr.value}")
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1:
            index = node.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                key = index.value.evaluated_value
                if isinstance(key, str):
                    found.add(f"key:{key}")
        elif m.matches(node, m.Call(func=m.Attribute(attr=m.Name("get")), args=[m.Arg(value=m.SimpleString()), m.ZeroOrMore()])):
            key = cst.ensure_type(cst.ensure_type(node, cst.Call).args[0].value, cst.SimpleString).evaluated_value
            if isinstance(key, str):
                found.add(f"key:{key}")
    return found


def _target_name(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return None


def _traced_value(evidence: Evidence | None, frame: Frame, site: _Hardcoded) -> str | None:
    """The device string the failing frame saw in the variable ``site`` defines, when it is the
    very literal written there (the run took that definition)."""
    if evidence is None or not isinstance(site.node, cst.SimpleString):
        return None
    for bound in site.binds:
        kind, _, name = bound.partition(":")
        described = evidence.scope(frame).get(name) if kind == "name" else None
        if described is not None and described.is_device and described.value == site.node.evaluated_value:
            return str(described.value)
    return None


def _not_written_there(evidence: Evidence | None, frame: Frame, site: _Hardcoded) -> str | None:
    """The traced device string of the variable ``site`` defines, when the literal written there
    cannot give it (``f"cuda:{rank}"`` never gives ``"cuda"``)."""
    if evidence is None or not isinstance(site.node, cst.SimpleString | cst.FormattedString):
        return None
    text = _literal_text(site.node)
    for bound in site.binds:
        kind, _, name = bound.partition(":")
        described = evidence.scope(frame).get(name) if kind == "name" else None
        if described is None or not described.is_device or not isinstance(described.value, str) or text is None:
            continue
        pattern = re.escape(text).replace(re.escape("{}"), r"\d+")
        if not re.fullmatch(pattern, described.value):
            return described.value
    return None


def _cuda_comparison(test: cst.BaseExpression) -> bool:
    """``device == "cuda"``, ``args.device == "cuda"``, ``"cuda" in device``: a device compared
    with a CUDA literal."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    left, right = test.left, target.comparator
    if isinstance(target.operator, cst.Equal):
        literal, other = (right, left) if isinstance(right, cst.SimpleString) else (left, right)
    elif isinstance(target.operator, cst.In):
        literal, other = left, right
    else:
        return False
    return (isinstance(literal, cst.SimpleString) and _cuda_literal(literal)[0]
            and isinstance(other, cst.Name | cst.Attribute))


def _gated(view: _File, target: cst.BaseExpression) -> str:
    """The switch's code gated on CUDA's availability: ``True`` -> ``torch.cuda.is_available()``,
    ``not args.no_cuda`` -> ``not args.no_cuda and torch.cuda.is_available()``."""
    code = view.module.code_for_node(target)
    available = f"{view.torch}.cuda.is_available()"
    if isinstance(target, cst.Name) and target.value == "True":
        return available
    if isinstance(target, cst.BooleanOperation | cst.IfExp | cst.Lambda | cst.NamedExpr):
        return f"({code}) and {available}"
    return f"{code} and {available}"


def _cuda_choice(value: cst.BaseExpression) -> cst.IfExp | None:
    """``"cuda" if switch else "cpu"``, bare or inside ``torch.device(...)``."""
    if isinstance(value, cst.Call) and len(value.args) == 1 and value.args[0].keyword is None:
        value = value.args[0].value
    if not isinstance(value, cst.IfExp):
        return None
    body, orelse = value.body, value.orelse
    if (isinstance(body, cst.SimpleString) and str(body.evaluated_value).startswith("cuda")
            and isinstance(orelse, cst.SimpleString) and orelse.evaluated_value == "cpu"):
        return value
    return None


def _module_level_alias(module: cst.Module, full: str) -> str | None:
    """The name a module-level ``import torch`` (``import torch as th``) binds."""
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if one_line(module, alias.name) == full:
                        return cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname else full
    return None


def _bound_in(scope: Scope, name: str) -> bool:
    """Whether ``name`` is bound in the site's own scope: a new module-level variable of that
    name would be shadowed there (or, at module level, rebound)."""
    return any(getattr(assignment, "scope", None) is scope for assignment in scope[name])


def _is_docstring(statement: cst.CSTNode) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())]))


def _is_import(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )
