"""hardcoded-cuda: ``.cuda()`` and ``"cuda"`` devices that fail on a machine without a GPU."""

from __future__ import annotations

import re

import libcst as cst

from repairbot.analysis import (
    argument,
    assigned_targets,
    code_mentions,
    dotted_name,
    is_method_call,
    keyword_arg,
    number,
    statements_before,
    string_value,
    torch_reference,
)
from repairbot.frameworks import ON_DEVICE_HOOKS, module_self
from repairbot.lint.rule import FileContext, Invalid, LintRule, Severity, Valid
from repairbot.types import Applicability

_GPU_LIBRARIES = frozenset({"triton", "cutlass", "cupy", "pycuda", "cuda"})
_GPU_IMPORT = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:triton|cutlass|cupy|pycuda|cuda)\b", re.MULTILINE)
# What shows that the code thinks about the device it runs on.
_GUARD_WORDS = ("cuda", "gpu", "is_available", "device_count", "accelerator")


class HardcodedCuda(LintRule):
    """Finds ``.cuda()`` calls and ``"cuda"`` devices in code that never asks whether CUDA is there.

    What it finds:
        ``x.cuda()``, and ``"cuda"`` or ``torch.device("cuda")`` (``cuda:N`` included) where a
        device is used: ``.to(...)``, a ``device=`` or ``map_location=`` argument of a torch
        function, a ``device = ...`` assignment. Unless the code around them shows that the
        device was thought about: an
        enclosing ``if``, ``while`` or conditional expression whose test mentions CUDA, a GPU,
        ``is_available``, ``device_count`` or an accelerator; such an ``if`` or ``assert``
        earlier in the same function (an early exit); a ``with`` of a CUDA context; or a
        function, class or decorator whose name mentions CUDA or a GPU (a GPU-only test). Not in
        files written for GPUs only (they import Triton, CUTLASS, CuPy, PyCUDA or ``cuda``, or
        belong to a ``cuda`` package), nor ``x.cuda(rank)`` and ``torch.device("cuda", rank)``,
        which pick one GPU per process on purpose.

    Why it matters:
        The script runs only where there is a GPU: on a laptop, a CPU-only CI runner or a
        machine whose driver is missing it fails at that line (``Torch not compiled with CUDA
        enabled``, ``Found no NVIDIA driver``), which is the ``cuda-unavailable`` failure.

    Fix safety:
        The fix chooses the device at run time, as the ``cuda-unavailable`` pattern does:
        ``"cuda"`` becomes ``"cuda" if torch.cuda.is_available() else "cpu"`` and ``x.cuda()``
        becomes ``x.to("cuda" if torch.cuda.is_available() else "cpu")`` (``x.cuda(1)``: the
        ``"cuda:1"`` device). Safe, as the ``cuda-unavailable`` pattern labels the same rewrite:
        on a GPU machine the script runs exactly as before, and elsewhere it runs on the CPU
        instead of stopping. No fix where the file has no ``torch`` name to write the check
        with. Inside a method of a LightningModule the finding advises the module's own device,
        ``self.device`` (the run-time check would ignore the Trainer's ``accelerator``/``devices``).
        ``x.cuda()`` (``non_blocking=`` kept) in a hook Lightning calls with the module on its
        device (``forward``, the ``*_step`` hooks, the batch, epoch and start hooks) becomes
        ``x.to(self.device)``, safe: wherever the script ran, the module was on the GPU that
        ``.cuda()`` picks, which is ``self.device``; without a GPU it follows the module. No fix
        in ``__init__``, ``setup``, ``configure_model`` or a method of the user's own (the module
        may still be on the CPU there, and a tensor kept there is not moved with it), for
        ``self.cuda()`` itself or ``.cuda(N)``; ``"cuda"`` strings get the advice only. A
        function nested in a method (where ``self`` may be another object) and a plain
        ``nn.Module`` get the ordinary finding and fix.

    Not handled:
        Devices built from strings at run time (``f"cuda:{rank}"``); CUDA-only APIs
        (``torch.cuda.synchronize()``, streams, ``pin_memory``), which do not fail this way;
        ``"cuda"`` handed to functions of other libraries.
    """

    ID = "hardcoded-cuda"
    SEVERITY = Severity.WARNING
    TITLE = "A hard-coded CUDA device that fails on a machine without a GPU"
    MESSAGE = "this hard-codes CUDA: it fails on a machine without a GPU"
    APPLICABILITY = Applicability.SAFE
    REQUIRES = (b"cuda",)  # `.cuda (`, `"cuda"`, `'cuda:0'`: any spelling holds the word

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        return super().applies(data, package) and _GPU_IMPORT.search(data) is None

    VALID = (
        Valid("""
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model.to(device)
        """),
        Valid("""
            import torch
            if torch.cuda.is_available():
                model = model.cuda()
            x = x.to("cuda") if use_cuda else x
        """),
        Valid("""
            import torch
            def run(x):
                if not torch.cuda.is_available():
                    return x
                return x.cuda()
        """),
        Valid("""
            import torch
            import unittest
            class TestKernels(unittest.TestCase):
                @unittest.skipIf(not torch.cuda.is_available(), "needs a GPU")
                def test_add(self):
                    torch.ones(2, device="cuda")
                def test_add_cuda(self):
                    torch.ones(2).cuda()
        """),
        Valid("""
            import torch
            if x.device.type == "cuda":
                torch.cuda.synchronize()
            with torch.autocast("cuda"):
                y = f(x)
            model = DDP(net.cuda(rank), device_ids=[rank])
            backend = group._get_backend(torch.device("cuda"))
            skip = functools.partial(skip_if, device="cuda")
        """),
        Valid("""
            import torch
            import triton
            buffer = torch.empty(1024, device="cuda")
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return self(x.cuda()).sum()
            """,
            line=6, column=21, message="self.device", fix=Applicability.SAFE,
            expected_fix="""
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return self(x.to(self.device)).sum()
            """,
        ),
        Invalid(
            """
            import torch
            import lightning as L
            class Base(L.LightningModule):
                pass
            class Lit(Base):
                def forward(model, x):
                    return model.net(x.cuda(non_blocking=True))
            """,
            line=7, column=26, message="self.device", fix=Applicability.SAFE,
            expected_fix="""
            import torch
            import lightning as L
            class Base(L.LightningModule):
                pass
            class Lit(Base):
                def forward(model, x):
                    return model.net(x.to(model.device, non_blocking=True))
            """,
        ),
        # the module may still be on the CPU in __init__/setup, and Lightning does not move a
        # plain tensor attribute: advice, no fix; nor for the module itself or a chosen GPU
        Invalid(
            """
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def __init__(self):
                    super().__init__()
                    self.mask = torch.ones(8).cuda()
            """,
            line=6, column=21, message="self.device",
        ),
        Invalid(
            """
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def on_train_start(self):
                    self.cuda()
            """,
            line=5, column=9, message="self.device",
        ),
        Invalid(
            """
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def training_step(self, batch, batch_idx):
                    return self(batch.cuda(0)).sum()
            """,
            line=5, column=21, message="self.device",
        ),
        # a function nested in a hook: its `self` is its own, so the ordinary fix
        Invalid(
            """
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def training_step(self, batch, batch_idx):
                    def moved(self):
                        return self.cuda()
                    return self(moved(batch)).sum()
            """,
            line=6, column=20, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            from lightning.pytorch import LightningModule
            class Lit(LightningModule):
                def training_step(self, batch, batch_idx):
                    def moved(self):
                        return self.to("cuda" if torch.cuda.is_available() else "cpu")
                    return self(moved(batch)).sum()
            """,
        ),
        # a plain nn.Module and a function outside any class: the ordinary fix
        Invalid(
            """
            import torch
            from torch import nn
            class Net(nn.Module):
                def forward(self, x):
                    return self.fc(x.cuda())
            """,
            line=5, column=24, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            from torch import nn
            class Net(nn.Module):
                def forward(self, x):
                    return self.fc(x.to("cuda" if torch.cuda.is_available() else "cpu"))
            """,
        ),
        Invalid(
            """
            import torch
            import lightning as L
            def training_step(self, batch, batch_idx):
                return self(batch.cuda()).sum()
            """,
            line=4, column=17, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            import lightning as L
            def training_step(self, batch, batch_idx):
                return self(batch.to("cuda" if torch.cuda.is_available() else "cpu")).sum()
            """,
        ),
        Invalid(
            """
            import torch
            model = Net().cuda()
            """,
            line=2, column=9, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            model = Net().to("cuda" if torch.cuda.is_available() else "cpu")
            """,
        ),
        Invalid(
            """
            import torch
            device = torch.device('cuda:0')
            """,
            line=2, column=23, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            device = torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')
            """,
        ),
        Invalid(
            """
            import torch as th
            for x, y in loader:
                x, y = x.to("cuda"), y
            """,
            line=3, column=17, fix=Applicability.SAFE,
            expected_fix="""
            import torch as th
            for x, y in loader:
                x, y = x.to("cuda" if th.cuda.is_available() else "cpu"), y
            """,
        ),
        Invalid(
            """
            import torch
            mask = torch.zeros(4, 4, device="cuda")
            """,
            line=2, column=33, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            mask = torch.zeros(4, 4, device="cuda" if torch.cuda.is_available() else "cpu")
            """,
        ),
        Invalid(
            """
            import torch
            DEVICE = "cuda"
            """,
            line=2, column=10, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
            """,
        ),
        Invalid(
            """
            import torch
            x = batch.cuda(1, non_blocking=True)
            """,
            line=2, column=5, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            x = batch.to("cuda:1" if torch.cuda.is_available() else "cpu", non_blocking=True)
            """,
        ),
        Invalid(
            """
            from torch import nn
            layer = nn.Linear(2, 2).cuda()
            """,
            line=2, column=9,
        ),
    )

    def __init__(self, context: FileContext) -> None:
        super().__init__(context)
        self.gpu_only = False

    def _guarded(self) -> bool:
        stack = self.context.stack
        context = self.context
        for node in reversed(stack[:-1]):
            if isinstance(node, cst.If | cst.While | cst.IfExp) and code_mentions(context, node.test, _GUARD_WORDS):
                return True
            if isinstance(node, cst.BooleanOperation | cst.Assert):
                return True
            if isinstance(node, cst.With) and any(code_mentions(context, i.item, ("cuda", "gpu")) for i in node.items):
                return True
            if isinstance(node, cst.FunctionDef | cst.ClassDef):
                if any(word in node.name.value.lower() for word in ("cuda", "gpu")):
                    return True
                if any(code_mentions(context, d.decorator, _GUARD_WORDS) for d in node.decorators):
                    return True
        for statement in statements_before(stack):
            if isinstance(statement, cst.If) and code_mentions(context, statement.test, _GUARD_WORDS):
                return True
            if isinstance(statement, cst.SimpleStatementLine) and any(
                isinstance(s, cst.Assert) and code_mentions(context, s.test, _GUARD_WORDS) for s in statement.body
            ):
                return True
        return False

    def _in_lightning(self, node: cst.CSTNode, replacement: cst.BaseExpression | None = None) -> bool:
        """Report a device hard-coded in a LightningModule's method with Lightning's own remedy
        (the module knows its device: ``self.device``), with ``replacement`` as its fix where
        the caller has one."""
        if self.context.lightning_hook() is None:
            return False
        self.report(
            node,
            f"`{self.context.code(node)}` hard-codes CUDA inside a LightningModule: it fails without a GPU "
            "and ignores the Trainer's `accelerator`/`devices`; use the module's device, `self.device` "
            "(Lightning already moves the batch there)",
            replacement=replacement,
        )
        return True

    def _to_module_device(self, node: cst.Call, func: cst.Attribute) -> cst.Call | None:
        """``x.cuda()`` in a LightningModule hook that runs with the module on its device, as
        ``x.to(self.device)``: only there is ``self.device`` where ``.cuda()`` put ``x`` whenever
        the script ran (its module on the GPU). Not ``self.cuda()`` itself, nor a ``.cuda(N)``."""
        if self.context.lightning_hook(*ON_DEVICE_HOOKS) is None or any(a.keyword is None for a in node.args):
            return None
        if any(a.keyword is not None and a.keyword.value == "device" for a in node.args):
            return None
        method = next(n for n in reversed(self.context.stack) if isinstance(n, cst.FunctionDef))
        me = module_self(method)
        if me is None or dotted_name(func.value) == me:
            return None
        device = cst.Arg(cst.Attribute(value=cst.Name(me), attr=cst.Name("device")),
                         comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if node.args else cst.MaybeSentinel.DEFAULT)
        return node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[device, *node.args])

    def _choose(self, device: cst.SimpleString) -> cst.IfExp | None:
        """``"cuda" if torch.cuda.is_available() else "cpu"``, with the torch alias bound where
        the visited node runs (None without one)."""
        check = torch_reference(self.context, "torch.cuda.is_available")
        if check is None:
            return None
        cpu = cst.SimpleString(f"{device.prefix}{device.quote}cpu{device.quote}")
        return cst.IfExp(test=cst.Call(func=check), body=device, orelse=cpu)

    def _flag_device(self, node: cst.BaseExpression) -> None:
        """A device value in a place that allocates or moves: ``"cuda"``, ``torch.device("cuda:1")``."""
        if self.gpu_only:
            return
        if isinstance(node, cst.Call) and self.context.qualify(node.func) == "torch.device" and len(node.args) == 1:
            node = node.args[0].value  # torch.device("cuda"); torch.device("cuda", rank) picks its GPU on purpose
        value = string_value(node)
        if value is None or not (value == "cuda" or value.startswith("cuda:")) or self._guarded():
            return
        assert isinstance(node, cst.SimpleString)
        if self._in_lightning(node):
            return
        self.report(
            node,
            f"the device {value!r} is hard-coded: this fails on a machine without a GPU; choose it at run time "
            "(`\"cuda\" if torch.cuda.is_available() else \"cpu\"`)",
            replacement=self._choose(node),
        )

    def visit_Module(self, node: cst.Module) -> None:
        # code written for GPUs only: it imports a CUDA-only library, or lives in a `cuda` package
        libraries = {full.split(".")[0] for full in self.context.imports.aliases.values()}
        package = self.context.package
        parts = self.context.path.parent.parts
        inside = parts[len(parts) - 1 - parts[::-1].index(package):] if package in parts else ()
        self.gpu_only = bool(libraries & _GPU_LIBRARIES) or bool(set(inside) & {"cuda", "cudnn"})

    def visit_Call(self, node: cst.Call) -> None:
        if is_method_call(node, "cuda") and isinstance(node.func, cst.Attribute):
            self._visit_cuda_call(node, node.func)
            return
        if is_method_call(node, "to"):
            to = argument(node, 0, "device")
            if to is not None:
                self._flag_device(to.value)
            return
        qualified = self.context.qualify(node.func) or ""
        if qualified.startswith("torch."):
            for name in ("device", "map_location"):
                keyword = keyword_arg(node, name)
                if keyword is not None:
                    self._flag_device(keyword.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        names = [dotted_name(t) or "" for t in assigned_targets(node)]
        if any("device" in n.lower() or n.lower().rsplit(".", 1)[-1] == "dev" for n in names):
            self._flag_device(node.value)

    def _visit_cuda_call(self, node: cst.Call, func: cst.Attribute) -> None:
        owner = self.context.qualify(func.value)
        if owner is not None and owner.startswith("torch") and owner.rsplit(".", 1)[-1][:1].isupper():
            return  # torch.Tensor.cuda(x): an unbound call, rare and deliberate
        index = argument(node, 0, "device")
        ordinal = number(index.value) if index is not None else None
        if (index is not None and ordinal is None) or self.gpu_only or self._guarded():
            return  # x.cuda(rank): one GPU per process, chosen on purpose
        if self._in_lightning(node, self._to_module_device(node, func)):
            return
        replacement = None
        device = "cuda" if ordinal is None else f"cuda:{int(ordinal)}"
        choice = self._choose(cst.SimpleString(self.context.string_literal(device)))
        if choice is not None:
            rest = [a for a in node.args if a is not index]
            first = cst.Arg(choice, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if rest else cst.MaybeSentinel.DEFAULT)
            replacement = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=[first, *rest])
        self.report(
            node,
            f"`{self.context.code(node)}` hard-codes CUDA: it fails on a machine without a GPU; move it to a "
            "device chosen at run time",
            replacement=replacement,
        )
