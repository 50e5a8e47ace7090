"""deprecated-torch-api: torch functions that are deprecated or removed, with their replacements."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from repairbot.codemod import append_keyword, keyword_arg, positional_args
from repairbot.lint.analysis import reference_head, torch_reference, whole_reference
from repairbot.lint.rule import Invalid, LintRule, Valid
from repairbot.types import Applicability


@dataclass(frozen=True)
class Deprecation:
    """What replaces a deprecated name, from the PyTorch documentation of that name."""

    use: str  # what to write instead, for the message
    removed: bool = False  # calling it raises in PyTorch 2
    rename: str | None = None  # a drop-in replacement (qualified): a safe fix
    max_positional: int | None = None  # the rename is drop-in only with at most this many positional arguments
    unless: tuple[str, ...] = ()  # ... and without these keywords
    device: str | None = None  # torch.<device>.amp.X -> torch.amp.X(<device>, ...)


_INIT = ("uniform", "normal", "constant", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
         "orthogonal", "sparse", "eye", "dirac")

TABLE: dict[str, Deprecation] = {
    # removed (they raise "This function was deprecated since version 1.9 and is now removed")
    "torch.solve": Deprecation("`torch.linalg.solve(A, B)` (arguments reversed; it returns only the solution)", removed=True),
    "torch.symeig": Deprecation("`torch.linalg.eigh` (it reads the lower triangle by default: `UPLO=\"U\"` for the old default)", removed=True),
    "torch.lstsq": Deprecation("`torch.linalg.lstsq(A, B)` (arguments reversed)", removed=True),
    "torch.eig": Deprecation("`torch.linalg.eig` (it returns complex tensors)", removed=True),
    "torch.matrix_rank": Deprecation("`torch.linalg.matrix_rank` (`symmetric=` is now `hermitian=`)", removed=True),
    "torch.set_deterministic": Deprecation("`torch.use_deterministic_algorithms`", removed=True, rename="torch.use_deterministic_algorithms"),
    "torch.is_deterministic": Deprecation("`torch.are_deterministic_algorithms_enabled`", removed=True, rename="torch.are_deterministic_algorithms_enabled"),
    # deprecated, with a drop-in replacement
    "torch.ger": Deprecation("`torch.outer`", rename="torch.outer"),
    "torch.cholesky": Deprecation("`torch.linalg.cholesky`", rename="torch.linalg.cholesky", max_positional=1),
    "torch.qr": Deprecation("`torch.linalg.qr` (`some=False` is `mode=\"complete\"`)", rename="torch.linalg.qr", max_positional=1, unless=("some",)),
    "torch.nn.utils.clip_grad_norm": Deprecation("`torch.nn.utils.clip_grad_norm_`", rename="torch.nn.utils.clip_grad_norm_"),
    "torch.nn.functional.upsample": Deprecation("`torch.nn.functional.interpolate`", rename="torch.nn.functional.interpolate"),
    "torch.nn.utils.stateless.functional_call": Deprecation("`torch.func.functional_call`", rename="torch.func.functional_call"),
    "torch.distributed.reduce_op": Deprecation("`torch.distributed.ReduceOp`", rename="torch.distributed.ReduceOp"),
    **{f"torch.nn.init.{name}": Deprecation(f"`torch.nn.init.{name}_`", rename=f"torch.nn.init.{name}_") for name in _INIT},
    "torch.cuda.amp.autocast": Deprecation("`torch.amp.autocast(\"cuda\", ...)`", rename="torch.amp.autocast", device="cuda"),
    "torch.cpu.amp.autocast": Deprecation("`torch.amp.autocast(\"cpu\", ...)`", rename="torch.amp.autocast", device="cpu"),
    "torch.cuda.amp.GradScaler": Deprecation("`torch.amp.GradScaler(\"cuda\", ...)`", rename="torch.amp.GradScaler", device="cuda"),
    "torch.cpu.amp.GradScaler": Deprecation("`torch.amp.GradScaler(\"cpu\", ...)`", rename="torch.amp.GradScaler", device="cpu"),
    "torch.cuda.amp.custom_fwd": Deprecation("`torch.amp.custom_fwd(..., device_type=\"cuda\")`", rename="torch.amp.custom_fwd", device="cuda"),
    "torch.cuda.amp.custom_bwd": Deprecation("`torch.amp.custom_bwd(..., device_type=\"cuda\")`", rename="torch.amp.custom_bwd", device="cuda"),
    # deprecated, where the replacement changes the call
    "torch.chain_matmul": Deprecation("`torch.linalg.multi_dot([...])` (one list of two or more tensors)"),
    "torch.lu": Deprecation("`torch.linalg.lu_factor`"),
    "torch.lu_solve": Deprecation("`torch.linalg.lu_solve(LU, pivots, B)` (arguments reordered)"),
    "torch.triangular_solve": Deprecation("`torch.linalg.solve_triangular` (arguments reversed; it returns only the solution)"),
    "torch.svd": Deprecation("`torch.linalg.svd(A, full_matrices=False)` (it returns `Vh`, not `V`)"),
    "torch.range": Deprecation("`torch.arange` (`torch.range` includes its end: `torch.arange(start, end + step, step)`)"),
    "torch.norm": Deprecation("`torch.linalg.vector_norm` or `torch.linalg.matrix_norm`"),
    "torch.set_default_tensor_type": Deprecation("`torch.set_default_dtype` and `torch.set_default_device`"),
    "torch.autograd.Variable": Deprecation("the tensor itself (`Variable(x)` returns `x`; `x.requires_grad_()` for `requires_grad=True`)"),
    "torch.testing.assert_allclose": Deprecation("`torch.testing.assert_close` (its default tolerances differ)"),
    "torch.nn.utils.weight_norm": Deprecation("`torch.nn.utils.parametrizations.weight_norm` (its parameters are named `parametrizations.weight.original0/1`)"),
    "torch.backends.cuda.sdp_kernel": Deprecation("`torch.nn.attention.sdpa_kernel(backends)`"),
    "torch.nn.functional.upsample_nearest": Deprecation("`torch.nn.functional.interpolate(..., mode=\"nearest\")`"),
    "torch.nn.functional.upsample_bilinear": Deprecation("`torch.nn.functional.interpolate(..., mode=\"bilinear\", align_corners=True)`"),
}
_NAMES = "|".join(sorted({re.escape(name.rsplit(".", 1)[-1]) for name in TABLE}))
# a file that may use one: `.name` after a module, or the name in an import statement
_MAY_USE = re.compile(rf"\.(?:{_NAMES})\b|import[^\n]*\b(?:{_NAMES})\b".encode())


class DeprecatedTorchApi(LintRule):
    """Finds uses of torch functions that are deprecated or removed, and names their replacements.

    What it finds:
        References (calls, decorators, values) to the functions that the PyTorch documentation
        marks deprecated or that PyTorch 2 removed: ``torch.solve``, ``torch.symeig``,
        ``torch.lstsq``, ``torch.eig``, ``torch.matrix_rank`` (removed: they raise),
        ``torch.cholesky``, ``torch.qr``, ``torch.svd``, ``torch.lu``, ``torch.norm``,
        ``torch.range``, ``torch.ger``, ``torch.chain_matmul``, ``torch.cuda.amp.autocast`` and
        ``GradScaler``, ``torch.nn.init.normal`` (without ``_``) and its siblings,
        ``F.upsample``, ``torch.autograd.Variable``, ``torch.nn.utils.weight_norm``... under any
        import alias. Not in the ``torch`` package itself, which keeps its deprecated API.

    Why it matters:
        Deprecated functions disappear in a later release (the removed ones already raise), and
        several differ from their replacements in ways that matter: ``torch.range`` includes
        its end, ``torch.svd`` returns ``V`` where ``torch.linalg.svd`` returns ``Vh``,
        ``torch.symeig`` read the upper triangle.

    Fix safety:
        A safe fix where the replacement is drop-in: a rename (``torch.ger`` -> ``torch.outer``,
        ``nn.init.normal`` -> ``nn.init.normal_``, ``clip_grad_norm`` -> ``clip_grad_norm_``,
        ``F.upsample`` -> ``F.interpolate``, ``torch.cholesky(A)`` -> ``torch.linalg.cholesky(A)``),
        or the device argument that ``torch.amp`` takes (``torch.cuda.amp.autocast(enabled=x)``
        -> ``torch.amp.autocast("cuda", enabled=x)``). Reported without a fix where the call
        changes shape (argument order, return values) or the file imports the old name directly.

    Not handled:
        Deprecated tensor methods (``x.symeig()``); deprecated arguments of current functions.
    """

    ID = "deprecated-torch-api"
    TITLE = "A deprecated or removed torch function, with its replacement"
    MESSAGE = "this torch function is deprecated"
    APPLICABILITY = Applicability.SAFE

    VALID = (
        Valid("""
            import torch
            q, r = torch.linalg.qr(a)
            with torch.amp.autocast("cuda"):
                y = torch.outer(a, b)
            torch.nn.init.normal_(w)
        """),
        Valid("""
            import torch
            def norm(x):
                return x
            y = norm(torch.ones(2))
        """),
    )
    INVALID = (
        Invalid(
            """
            import torch
            x = torch.solve(b, A)
            """,
            line=2, column=5, message="removed",
        ),
        Invalid(
            """
            import torch as th
            m = th.ger(u, v)
            """,
            line=2, column=5, fix="safe",
            expected_fix="""
            import torch as th
            m = th.outer(u, v)
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            nn.init.xavier_uniform(layer.weight, gain=2.0)
            """,
            line=2, column=1, fix="safe",
            expected_fix="""
            import torch.nn as nn
            nn.init.xavier_uniform_(layer.weight, gain=2.0)
            """,
        ),
        Invalid(
            """
            import torch
            with torch.cuda.amp.autocast(enabled=use_amp):
                loss = model(x)
            """,
            line=2, column=6, fix="safe",
            expected_fix="""
            import torch
            with torch.amp.autocast("cuda", enabled=use_amp):
                loss = model(x)
            """,
        ),
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler(2.0 ** 14)
            """,
            line=2, column=10, fix="safe",
            expected_fix="""
            import torch
            scaler = torch.amp.GradScaler("cuda", 2.0 ** 14)
            """,
        ),
        Invalid(
            """
            import torch
            class F(torch.autograd.Function):
                @staticmethod
                @torch.cuda.amp.custom_fwd
                def forward(ctx, x):
                    return x
            """,
            line=4, column=6, fix="safe",
            expected_fix="""
            import torch
            class F(torch.autograd.Function):
                @staticmethod
                @torch.amp.custom_fwd(device_type="cuda")
                def forward(ctx, x):
                    return x
            """,
        ),
        Invalid(
            """
            import torch
            L = torch.cholesky(A, True)
            """,
            line=2, column=5,
        ),
        Invalid(
            """
            from torch.autograd import Variable
            x = Variable(torch_tensor, requires_grad=True)
            """,
            line=2, column=5, message="requires_grad_",
        ),
        Invalid(
            """
            import torch
            steps = torch.range(0, 10)
            """,
            line=2, column=9, message="includes its end",
        ),
    )

    @classmethod
    def applies(cls, data: bytes, package: str | None) -> bool:
        return package != "torch" and _MAY_USE.search(data) is not None

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._check(node)

    def _check(self, node: cst.Name | cst.Attribute) -> None:
        if reference_head(node) not in self.context.imports.aliases:
            return  # not reached through an import: cheap to rule out, and most names are not
        qualified = self.context.qualify(node)
        if qualified not in TABLE or not whole_reference(self.context):
            return
        entry = TABLE[qualified]
        code = self.context.code(node)
        if entry.removed:
            message = f"`{code}` was removed from PyTorch (calling it raises): use {entry.use}"
        else:
            message = f"`{code}` is deprecated: use {entry.use}"
        parent = self.context.parent()
        call = parent if isinstance(parent, cst.Call) and parent.func is node else None
        fix = self._fix(node, entry, call)
        if fix is None:
            self.report(node, message)
        else:
            self.report(node, message, replacement=fix[1], target=fix[0])

    def _fix(
        self, node: cst.Name | cst.Attribute, entry: Deprecation, call: cst.Call | None
    ) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """(the node to replace, its replacement), when the replacement is drop-in."""
        if entry.rename is None:
            return None
        new = torch_reference(self.context, entry.rename)
        if new is None:
            return None
        if entry.device is None:
            if call is not None and entry.max_positional is not None and len(positional_args(call)) > entry.max_positional:
                return None
            if call is not None and any(keyword_arg(call, k) for k in entry.unless):
                return None
            return node, new
        device = cst.SimpleString(self.context.string_literal(entry.device))
        if entry.rename.endswith(("custom_fwd", "custom_bwd")):
            if call is None:
                parent = self.context.parent()
                if not isinstance(parent, cst.Decorator):
                    return None
                return node, append_keyword(cst.Call(func=new), "device_type", device)
            return call, append_keyword(call.with_changes(func=new), "device_type", device)
        if call is None or (entry.rename.endswith("autocast") and positional_args(call)):
            return None  # torch.amp.autocast takes its arguments in another order
        first = cst.Arg(device, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if call.args else cst.MaybeSentinel.DEFAULT)
        return call, call.with_changes(func=new, args=[first, *call.args])
