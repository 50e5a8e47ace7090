"""cuda-unavailable: a script with a hard-coded CUDA device, run where there is no GPU.

This module holds the pattern and its choice among the sites; ``sites.py`` finds the
hard-coded CUDA sites of a file and how the failing frame reaches them, ``source.py`` has the
source helpers they use, and ``rewrites.py`` holds the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    bound_once,
    failing_expression,
    one_line,
    place,
    place_in,
    walk,
)
from repairbot.edits import Site
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, phrase, signature
from repairbot.sources import Sources, report_path
from repairbot.types import Applicability, Decline, Failure, Frame

from .rewrites import DeviceEdit, MakeDeviceAgnostic
from .sites import (
    File,
    Hardcoded,
    Link,
    gated,
    not_written_there,
    one_line_at,
    other_files,
    traced_value,
)
from .source import cuda_choice


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
        files: dict[Path, File | None] = {}
        for frame in frames:
            path = Path(frame.file)
            if path not in files:
                files[path] = File.read(sources, path)
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

    def _gate_switch(self, view: File, frame: Frame) -> Site | None:
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
            choice = cuda_choice(value) if value is not None else None
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
        self, view: File, target: cst.BaseExpression, switch: str, kind: str, effect: str,
        evidence: dict[str, object], evidence_text: str,
    ) -> Site:
        """The one edit that gates a switch on CUDA's availability where ``target`` writes it."""
        new = gated(view, target)
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

    def _guarded_switch(self, view: File, frame: Frame, linked: Link) -> Site | Decline | None:
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

    def _compared_site(self, view: File, frame: Frame, linked: Link, key: str, device: Hardcoded) -> Site:
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
        self, view: File, frame: Frame, linked: Link, failure: Failure, evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        unwritten = not_written_there(evidence, frame, linked.site)
        if unwritten is not None:
            return self.decline(
                f"`{linked.site.code}` at {place_in(view.path, linked.site.span.line)} cannot have written the device "
                f"the run used there ({unwritten!r}): that definition is on a branch the run did not take"
            )
        plan = view.plan(linked, traced_value(evidence, frame, linked.site))
        if isinstance(plan, str):
            return self.decline(plan)
        primary = plan.edits[0]
        where = place(frame)
        deepest = failure.user_frame
        failing_at = place(deepest) if deepest is not None else where
        notes = list(view.gpu_calls())
        others = other_files(evidence, view.path, sources)
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
