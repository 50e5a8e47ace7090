"""load-without-map-location: ``torch.load`` with no ``map_location`` in a script whose device
is chosen at run time."""

from __future__ import annotations

import libcst as cst

from repairbot.analysis import (
    DEVICE_NAMES,
    SCOPES,
    argument,
    assigned_targets,
    dotted_name,
    string_value,
)
from repairbot.codemod import append_keyword
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid
from repairbot.torch_semantics import CHECKPOINT_LOADERS, MAP_LOCATION_POSITION
from repairbot.types import Applicability

_DEVICE_CHECKS = (
    "torch.cuda.is_available", "torch.backends.mps.is_available", "torch.xpu.is_available",
    "torch.accelerator.is_available", "torch.accelerator.current_accelerator",
)


def _in_memory(context: FileContext, node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and context.qualify(node.func) in ("io.BytesIO", "io.BufferedReader")


class LoadWithoutMapLocation(LintRule):
    """Finds ``torch.load(path)`` without ``map_location`` in a script that picks its device at run time.

    What it finds:
        A call of ``torch.load`` (or ``torch.hub.load_state_dict_from_url``,
        ``torch.utils.model_zoo.load_url``) that passes no ``map_location``, in a file that
        chooses its device when it runs (``torch.cuda.is_available()``, the MPS, XPU or
        accelerator checks, or ``torch.device(...)`` of something other than a literal).

    Why it matters:
        A checkpoint remembers the device of every tensor and ``torch.load`` puts them back
        there. The script was written to run with or without a GPU, but a checkpoint saved on
        a GPU crashes it on a machine without one (the ``map-location`` failure), and lands on
        ``cuda:0`` on a multi-GPU machine whatever device the script chose.

    Fix safety:
        The fix adds ``map_location=device`` when a device variable (``device``, ``dev``,
        ``DEVICE``, ``torch_device``) is bound where the call runs: safe, the tensors load
        where the script works. Without one it adds ``map_location="cpu"``: unsafe, since
        tensors used straight from the checkpoint now start on the CPU (``load_state_dict``
        copies them to the model's device either way).

    Not handled:
        Calls that forward ``**kwargs``; loads from in-memory buffers (``io.BytesIO``: bytes
        saved by the same process); a device kept in an attribute (``self.device``);
        ``weights_only`` is never touched (see ``weights-only-false``).
    """

    ID = "load-without-map-location"
    SEVERITY = Severity.WARNING
    TITLE = "torch.load without map_location in a script that picks its device at run time"
    MESSAGE = "torch.load restores tensors on the device they were saved from"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"load", (b"is_available", b"device", b"current_accelerator"))  # `load (`, `device (` too

    VALID = (
        Valid("""
            import torch
            state = torch.load("model.pt")
        """),
        Valid("""
            import io
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            state = torch.load("model.pt", map_location=device)
            other = torch.load("x.pt", "cpu")
            more = torch.load(path, **options)
            buffer = io.BytesIO(blob)
            copy = torch.load(buffer)
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model.load_state_dict(torch.load("best.pt"))
            """,
            line=3, column=23, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model.load_state_dict(torch.load("best.pt", map_location=device))
            """,
        ),
        Invalid(
            """
            import torch

            def restore(path, dev):
                return torch.load(path, weights_only=True)

            if torch.cuda.is_available():
                model.cuda()
            """,
            line=4, column=12, fix=Applicability.SAFE,
            expected_fix="""
            import torch

            def restore(path, dev):
                return torch.load(path, weights_only=True, map_location=dev)

            if torch.cuda.is_available():
                model.cuda()
            """,
        ),
        Invalid(
            """
            import torch
            from torch import load
            checkpoint = load('ckpt.pt')
            device = torch.device(args.device)
            """,
            line=3, column=14, fix=Applicability.UNSAFE,
            expected_fix="""
            import torch
            from torch import load
            checkpoint = load('ckpt.pt', map_location='cpu')
            device = torch.device(args.device)
            """,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.picks_device = False
        self.order = 0
        self.loads: list[tuple[cst.Call, str, cst.CSTNode | None, int]] = []  # (call, loader, function, order)
        self.module_devices: dict[str, int] = {}  # device variable -> order of its first module-level binding
        self.function_devices: dict[cst.CSTNode, dict[str, int]] = {}
        self.buffers: set[str] = set()  # names bound to in-memory buffers (io.BytesIO)

    def _function(self) -> cst.CSTNode | None:
        return next((n for n in reversed(self.context.stack[:-1]) if isinstance(n, SCOPES)), None)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        names = {p.name.value: 0 for p in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)}
        self.function_devices[node] = {n: o for n, o in names.items() if n in DEVICE_NAMES}

    def leave_Assign(self, node: cst.Assign) -> None:
        self.order += 1
        if _in_memory(self.context, node.value):
            self.buffers.update(t.value for t in assigned_targets(node) if isinstance(t, cst.Name))
        scope = self._function()
        for target in assigned_targets(node):
            if isinstance(target, cst.Name) and target.value in DEVICE_NAMES:
                if scope is None:
                    self.module_devices.setdefault(target.value, self.order)
                elif scope in self.function_devices:
                    self.function_devices[scope].setdefault(target.value, self.order)

    def visit_Call(self, node: cst.Call) -> None:
        self.order += 1
        qualified = self.context.qualify(node.func)
        if qualified in _DEVICE_CHECKS or (qualified == "torch.device" and node.args and string_value(node.args[0].value) is None):
            self.picks_device = True
        loader = next((name for name in CHECKPOINT_LOADERS if qualified == name), None)
        if loader is None or any(arg.star == "**" for arg in node.args):
            return
        if argument(node, MAP_LOCATION_POSITION[loader], "map_location") is not None:
            return
        self.loads.append((node, loader, self._function(), self.order))

    def _device_in_scope(self, function: cst.CSTNode | None, order: int) -> str | None:
        """A device variable bound where the call runs: in its function before it, as one of the
        function's parameters, or at module level (before it, for a call at module level)."""
        local = self.function_devices.get(function, {}) if function is not None else {}
        for name in DEVICE_NAMES:
            if name in local and local[name] < order:
                return name
        for name in DEVICE_NAMES:
            if name in self.module_devices and (function is not None or self.module_devices[name] < order):
                return name
        return None

    def leave_Module(self, node: cst.Module) -> None:
        if not self.picks_device:
            return
        for call, _loader, function, order in self.loads:
            source = call.args[0].value if call.args else None
            if source is not None and (_in_memory(self.context, source) or dotted_name(source) in self.buffers):
                continue  # bytes saved and loaded in the same process: their devices are the point
            device = self._device_in_scope(function, order)
            value = device or self.context.string_literal("cpu")
            self.report(
                call,
                f"`{self.context.code(call.func)}(...)` puts every tensor back on the device it was saved "
                "from, but this script picks its device at run time: a checkpoint saved on a GPU fails on a "
                f"machine without one; pass map_location={value}",
                replacement=append_keyword(call, "map_location", cst.parse_expression(value)),
                applicability=Applicability.SAFE if device else Applicability.UNSAFE,
            )
