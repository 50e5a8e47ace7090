"""deprecated-torch-api: torch functions that are deprecated or removed, with their replacements."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from repairbot.analysis import (
    dotted_name,
    keyword_arg,
    positional_args,
    reference_head,
    torch_reference,
    whole_reference,
)
from repairbot.codemod import append_keyword
from repairbot.cst_walk import children
from repairbot.lint.rule import Invalid, LintRule, Severity, Valid
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
    call_only: bool = False  # the rename is drop-in only as a call (a subclass: isinstance differs)
    keywords: tuple[tuple[str, str], ...] = ()  # (name, value) the new call needs (mode="bilinear")
    reshape: str | None = None  # a fix that rewrites the call: "qr", "cholesky", "chain_matmul"

    @property
    def plain_rename(self) -> bool:
        """Whether every reference may be renamed, whatever the call around it."""
        return self.rename is not None and not (
            self.max_positional is not None or self.unless or self.device or self.call_only or self.keywords
            or self.reshape
        )


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
    "torch.cholesky": Deprecation("`torch.linalg.cholesky` (`upper=True` is `torch.linalg.cholesky(A).mH`)", rename="torch.linalg.cholesky", reshape="cholesky"),
    "torch.qr": Deprecation("`torch.linalg.qr` (`some=False` is `mode=\"complete\"`)", rename="torch.linalg.qr", reshape="qr"),
    "torch.chain_matmul": Deprecation("`torch.linalg.multi_dot([...])` (one list of two or more tensors)", rename="torch.linalg.multi_dot", reshape="chain_matmul"),
    "torch.utils._pytree._register_pytree_node": Deprecation(
        "`torch.utils._pytree.register_pytree_node` (`to_str_fn`/`maybe_from_str_fn` are gone)",
        rename="torch.utils._pytree.register_pytree_node", max_positional=3, unless=("to_str_fn", "maybe_from_str_fn"),
    ),
    # nn.Upsample with the mode these subclasses fix (same arguments, same module otherwise)
    "torch.nn.UpsamplingNearest2d": Deprecation("`torch.nn.Upsample(...)` (its default mode is \"nearest\")", rename="torch.nn.Upsample", call_only=True, max_positional=2),
    "torch.nn.UpsamplingBilinear2d": Deprecation(
        "`torch.nn.Upsample(..., mode=\"bilinear\", align_corners=True)`", rename="torch.nn.Upsample", call_only=True,
        max_positional=2, unless=("mode", "align_corners"), keywords=(("mode", "bilinear"), ("align_corners", "True")),
    ),
    # functorch's transforms moved into torch.func (functorch itself is deprecated)
    **{f"functorch.{name}": Deprecation(f"`torch.func.{name}`", rename=f"torch.func.{name}")
       for name in ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize")},
    "functorch.make_functional": Deprecation("`torch.func.functional_call(model, dict(model.named_parameters()), x)`"),
    "functorch.make_functional_with_buffers": Deprecation("`torch.func.functional_call` with the parameters and buffers"),
    "functorch.combine_state_for_ensemble": Deprecation("`torch.func.stack_module_state` with `torch.func.functional_call`"),
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
# a file that may use one: `.name` after a module, or the name in an import statement (on the
# import's line, or anywhere up to the `)` of a parenthesised import over several lines)
_MAY_USE = re.compile(rf"\.(?:{_NAMES})\b|\bimport\b[^)]*?\b(?:{_NAMES})\b".encode())


class DeprecatedTorchApi(LintRule):
    """Finds uses of torch functions that are deprecated or removed, and names their replacements.

    What it finds:
        References (calls, decorators, values) to the functions that the PyTorch documentation
        marks deprecated or that PyTorch 2 removed: ``torch.solve``, ``torch.symeig``,
        ``torch.lstsq``, ``torch.eig``, ``torch.matrix_rank`` (removed: they raise),
        ``torch.cholesky``, ``torch.qr``, ``torch.svd``, ``torch.lu``, ``torch.norm``,
        ``torch.range``, ``torch.ger``, ``torch.chain_matmul``, ``torch.cuda.amp.autocast`` and
        ``GradScaler``, ``torch.nn.init.normal`` (without ``_``) and its siblings,
        ``F.upsample``, ``torch.autograd.Variable``, ``torch.nn.utils.weight_norm``,
        ``nn.UpsamplingNearest2d`` / ``nn.UpsamplingBilinear2d``, functorch's transforms
        (``functorch.vmap``, ``grad``, ``jacrev``... now ``torch.func``),
        ``torch.utils._pytree._register_pytree_node``... under any import alias, and the
        imports of these names (``from torch import symeig``). Not in the ``torch`` package
        itself, which keeps its deprecated API.

    Why it matters:
        Deprecated functions disappear in a later release (the removed ones already raise), and
        several differ from their replacements in ways that matter: ``torch.range`` includes
        its end, ``torch.svd`` returns ``V`` where ``torch.linalg.svd`` returns ``Vh``,
        ``torch.symeig`` read the upper triangle.

    Fix safety:
        A fix never writes a name that is not bound where it runs: it goes through the alias the
        code already uses (``foo.qr`` -> ``foo.linalg.qr``), else an import executed before it
        in its own or an enclosing body; with none, the finding has no fix. An import of a
        deprecated name (``from torch import ger``) is reported and renamed together with every
        use of the name (one fix, applied whole or not at all), unless the name is bound
        another way too or some use is not drop-in. A safe fix where the replacement is drop-in: a rename (``torch.ger`` -> ``torch.outer``,
        ``nn.init.normal`` -> ``nn.init.normal_``, ``clip_grad_norm`` -> ``clip_grad_norm_``,
        ``F.upsample`` -> ``F.interpolate``, ``torch.cholesky(A)`` -> ``torch.linalg.cholesky(A)``),
        or the device argument that ``torch.amp`` takes (``torch.cuda.amp.autocast(enabled=x)``
        -> ``torch.amp.autocast("cuda", enabled=x)``), the call rewrites whose meaning is fixed
        by literal arguments (``torch.qr(A, some=False)`` -> ``torch.linalg.qr(A, mode="complete")``,
        ``torch.cholesky(A, upper=True)`` -> ``torch.linalg.cholesky(A).mH``,
        ``torch.chain_matmul(A, B, C)`` -> ``torch.linalg.multi_dot([A, B, C])``,
        ``nn.UpsamplingBilinear2d(...)`` -> ``nn.Upsample(..., mode="bilinear", align_corners=True)``).
        Reported without a fix where the call changes shape (argument order, return values, a
        flag given as a variable).

    Not handled:
        Deprecated tensor methods (``x.symeig()``); deprecated arguments of current functions.

    Differs from TorchFix:
        ``torch.range`` is reported, not rewritten to ``torch.arange(start, end + step, step)``,
        because ``torch.arange`` infers an integer dtype from integer arguments where
        ``torch.range`` always returns the default float dtype: TorchFix's rewrite changes the
        tensor's dtype (and with it later divisions and matmuls). ``nn.UpsamplingNearest2d``
        passed as a value (``func = nn.UpsamplingNearest2d``) is reported too (TorchFix's own
        fixture marks it as a known miss). Fixes write names only through an import visible
        where the code runs (one before it in the same or an enclosing body): TorchFix picks any
        alias in the file, which wrote undefined names.
    """

    ID = "deprecated-torch-api"
    SEVERITY = Severity.WARNING
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
        Valid("""
            from functorch import FunctionalModule
            from torch.func import vmap, grad
            for index in range(3):
                pass
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
            line=2, column=5, fix=Applicability.SAFE,
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
            line=2, column=1, fix=Applicability.SAFE,
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
            line=2, column=6, fix=Applicability.SAFE,
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
            line=2, column=10, fix=Applicability.SAFE,
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
            line=4, column=6, fix=Applicability.SAFE,
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
            line=2, column=5, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            L = torch.linalg.cholesky(A).mH
            """,
        ),
        Invalid(
            """
            import torch
            L = torch.cholesky(A, upper=flag)
            """,
            line=2, column=5,
        ),
        # the alias bound where the call runs: not one imported later, nor in another function
        Invalid(
            """
            import torch
            def h():
                import torch as th
            m = torch.ger(u, v)
            """,
            line=4, column=5, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            def h():
                import torch as th
            m = torch.outer(u, v)
            """,
        ),
        Invalid(
            """
            import torch
            q, r = torch.qr(a)
            from torch import linalg
            """,
            line=2, column=8, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            q, r = torch.linalg.qr(a)
            from torch import linalg
            """,
        ),
        Invalid(
            """
            def f():
                import torch as th
            def g():
                return th.ger(u, v)
            """,
            line=4, column=12,
        ),
        Invalid(
            """
            import torch
            import torch as foo
            A3 = foo.chain_matmul(A, A, A)
            """,
            line=3, column=6, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            import torch as foo
            A3 = foo.linalg.multi_dot([A, A, A])
            """,
        ),
        Invalid(
            """
            import torch
            q, r = torch.qr(a, some=False)
            """,
            line=2, column=8, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            q, r = torch.linalg.qr(a, mode="complete")
            """,
        ),
        # imports are reported too, and renamed with every use of the name
        Invalid(
            """
            from torch.cuda.amp import (
                GradScaler,
            )
            """,
            line=2, column=5,
        ),
        Invalid(
            """
            from torch import ger
            y = 1
            """,
            line=1, column=19, fix=Applicability.SAFE, message="imported here",
            expected_fix="""
            from torch import outer
            y = 1
            """,
        ),
        Invalid(
            """
            from torch import symeig as eig
            """,
            line=1, column=19, message="removed",
        ),
        Invalid(
            """
            from torch.utils._pytree import _register_pytree_node as register
            """,
            line=1, column=33, fix=Applicability.SAFE,
            expected_fix="""
            from torch.utils._pytree import register_pytree_node as register
            """,
        ),
        Invalid(
            """
            import torch
            torch.utils._pytree._register_pytree_node(Point, flatten, unflatten)
            """,
            line=2, column=1, fix=Applicability.SAFE,
            expected_fix="""
            import torch
            torch.utils._pytree.register_pytree_node(Point, flatten, unflatten)
            """,
        ),
        Invalid(
            """
            import functorch
            import torch
            f = functorch.vmap(model)
            """,
            line=3, column=5, fix=Applicability.SAFE,
            expected_fix="""
            import functorch
            import torch
            f = torch.func.vmap(model)
            """,
        ),
        Invalid(
            """
            import functorch
            f = functorch.vmap(model)
            """,
            line=2, column=5, message="torch.func.vmap",
        ),
        Invalid(
            """
            from functorch import (
                vmap,
            )
            """,
            line=2, column=5, fix=Applicability.SAFE,
            expected_fix="""
            from torch.func import (
                vmap,
            )
            """,
        ),
        Invalid(
            """
            from torch import nn
            up = nn.UpsamplingNearest2d(scale_factor=2)
            """,
            line=2, column=6, fix=Applicability.SAFE,
            expected_fix="""
            from torch import nn
            up = nn.Upsample(scale_factor=2)
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            up = nn.UpsamplingBilinear2d(scale_factor=2)
            """,
            line=2, column=6, fix=Applicability.SAFE,
            expected_fix="""
            import torch.nn as nn
            up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            is_up = isinstance(m, nn.UpsamplingNearest2d)
            """,
            line=2, column=23,
        ),
        Invalid(
            """
            import torch
            x = torch.autograd.Variable(torch_tensor, requires_grad=True)
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

    def _message(self, code: str, entry: Deprecation, imported: bool = False) -> str:
        what = f"`{code}` (imported here)" if imported else f"`{code}`"
        if entry.removed:
            return f"{what} was removed from PyTorch (calling it raises): use {entry.use}"
        return f"{what} is deprecated: use {entry.use}"

    def _check(self, node: cst.Name | cst.Attribute) -> None:
        if reference_head(node) not in self.context.imports.aliases:
            return  # not reached through an import: cheap to rule out, and most names are not
        qualified = self.context.qualify(node)
        if qualified not in TABLE or not whole_reference(self.context):
            return
        entry = TABLE[qualified]
        message = self._message(self.context.code(node), entry)
        if isinstance(node, cst.Name):
            # a name the file imports from the old home: the import's own finding renames it
            # together with every use (renaming one use alone would leave the import stale)
            self.report(node, message)
            return
        parent = self.context.parent()
        call = parent if isinstance(parent, cst.Call) and parent.func is node else None
        fix = self._fix(node, entry, call)
        if fix is None:
            self.report(node, message)
        else:
            self.report(node, message, replacement=fix[1], target=fix[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module) or ""
        for alias in node.names:
            qualified = f"{module}.{dotted_name(alias.name)}"
            entry = TABLE.get(qualified)
            if entry is None:
                continue
            message = self._message(qualified, entry, imported=True)
            fix = self._import_fix(node, alias, entry, module)
            if fix is None:
                self.report(alias.name, message)
            else:
                target, replacement, also = fix
                self.report(alias.name, message, replacement=replacement, target=target, also=also)

    def _import_fix(
        self, node: cst.ImportFrom, alias: cst.ImportAlias, entry: Deprecation, module: str,
    ) -> tuple[cst.CSTNode, cst.CSTNode, tuple[tuple[cst.CSTNode, cst.CSTNode], ...]] | None:
        """``from torch import ger`` -> ``from torch import outer`` with every use of ``ger``
        renamed (one fix); None unless every use of the name is one the rename keeps working."""
        if entry.rename is None or not isinstance(alias.name, cst.Name) or isinstance(node.names, cst.ImportStar):
            return None
        if entry.device or entry.reshape or entry.keywords:
            return None  # each call changes: the import alone cannot carry the fix
        new_module, _, new_name = entry.rename.rpartition(".")
        local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else alias.name.value
        uses = _uses(self.context.module, local, node)
        renames_uses = alias.asname is None and new_name != local
        if uses is None and (renames_uses or not entry.plain_rename):
            return None  # the name is bound another way too: its uses cannot all be checked
        if uses is not None and not all(self._drop_in(use, entry, parent) for use, parent in uses):
            return None
        renamed = alias.with_changes(name=cst.Name(new_name))
        target: cst.CSTNode
        replacement: cst.CSTNode
        if new_module == module:
            target, replacement = alias, renamed
        elif all(
            (other := TABLE.get(f"{module}.{dotted_name(a.name)}", _NO_ENTRY)).plain_rename
            and other.rename == f"{new_module}.{dotted_name(a.name)}" for a in node.names
        ):
            # every name of the statement moved to one module under its own name (functorch -> torch.func)
            target, replacement = node, node.with_changes(module=cst.parse_expression(new_module))
            return target, replacement, ()
        elif len(node.names) == 1:
            target, replacement = node, node.with_changes(module=cst.parse_expression(new_module), names=[renamed])
        else:
            return None
        if not renames_uses or uses is None:
            return target, replacement, ()
        return target, replacement, tuple((use, cst.Name(new_name)) for use, _ in uses)

    def _drop_in(self, use: cst.Name, entry: Deprecation, parent: cst.CSTNode | None) -> bool:
        call = parent if isinstance(parent, cst.Call) and parent.func is use else None
        if entry.plain_rename:
            return True
        if call is None or entry.reshape or entry.device or entry.keywords:
            return False
        return _within_limits(call, entry)

    def _fix(
        self, node: cst.Name | cst.Attribute, entry: Deprecation, call: cst.Call | None
    ) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """(the node to replace, its replacement), when the replacement is drop-in."""
        if entry.rename is None:
            return None
        new = torch_reference(self.context, entry.rename, node)
        if new is None:
            return None
        if entry.reshape is not None:
            return self._reshape(entry.reshape, new, call) if call is not None else None
        if entry.device is None:
            if entry.plain_rename:
                return node, new
            if call is None or not _within_limits(call, entry):
                return None
            if entry.keywords:
                changed = call.with_changes(func=new)
                for name, value in entry.keywords:
                    text = self.context.string_literal(value) if value not in ("True", "False", "None") else value
                    changed = append_keyword(changed, name, cst.parse_expression(text))
                return call, changed
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

    def _reshape(self, kind: str, new: cst.BaseExpression, call: cst.Call) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """The rewritten call for the replacements whose arguments change."""
        if any(arg.star for arg in call.args):
            return None
        positional = positional_args(call)
        keywords = [arg for arg in call.args if arg.keyword is not None]
        if kind == "chain_matmul":
            # torch.chain_matmul(A, B, C, out=o) -> torch.linalg.multi_dot([A, B, C], out=o)
            if len(positional) < 2 or any(arg.keyword.value != "out" for arg in keywords if arg.keyword):
                return None
            elements = [cst.Element(value=arg.value, comma=arg.comma if i < len(positional) - 1 else cst.MaybeSentinel.DEFAULT)
                        for i, arg in enumerate(positional)]
            first = cst.Arg(value=cst.List(elements=elements), comma=positional[-1].comma if keywords else cst.MaybeSentinel.DEFAULT)
            return call, call.with_changes(func=new, args=[first, *keywords])
        # qr(A, some=True|False), cholesky(A, upper=True|False): one flag, given as a literal
        flag_name = "some" if kind == "qr" else "upper"
        if not 1 <= len(positional) <= 2 or any(arg.keyword and arg.keyword.value != flag_name for arg in keywords):
            return None
        flag = positional[1] if len(positional) == 2 else (keywords[0] if keywords else None)
        if flag is not None and len(positional) == 2 and keywords:
            return None
        value = flag.value.value if flag is not None and isinstance(flag.value, cst.Name) else None
        if flag is not None and value not in ("True", "False"):
            return None
        base = call.with_changes(func=new, args=[positional[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
        if kind == "qr":
            if value == "False":  # some=False: the complete decomposition
                mode = cst.parse_expression(self.context.string_literal("complete"))
                return call, append_keyword(base, "mode", mode)
            return call, base
        if value == "True":  # upper=True: the conjugate transpose of the lower factor
            return call, cst.Attribute(value=base, attr=cst.Name("mH"))
        return call, base


_NO_ENTRY = Deprecation("")


def _within_limits(call: cst.Call, entry: Deprecation) -> bool:
    if any(arg.star for arg in call.args):
        return False
    if entry.max_positional is not None and len(positional_args(call)) > entry.max_positional:
        return False
    return not any(keyword_arg(call, name) for name in entry.unless)


def _uses(module: cst.Module, local: str, statement: cst.ImportFrom) -> list[tuple[cst.Name, cst.CSTNode | None]] | None:
    """Every reference to ``local`` in the file with its parent; None when the name is also
    bound another way (assigned, a parameter, a def, another import): renaming it is then unsafe."""
    found: list[tuple[cst.Name, cst.CSTNode | None]] = []
    todo: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(module, None)]
    while todo:
        node, parent = todo.pop()
        if node is statement:
            continue
        if type(node) is cst.Name and node.value == local:
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            if isinstance(parent, cst.ImportAlias | cst.AsName | cst.Param | cst.FunctionDef | cst.ClassDef
                          | cst.AssignTarget | cst.For | cst.Global | cst.Nonlocal | cst.NamedExpr | cst.WithItem):
                return None  # bound again (or a target): leave the name alone
            if isinstance(parent, cst.AnnAssign | cst.AugAssign) and parent.target is node:
                return None
            found.append((node, parent))
            continue
        todo.extend((child, node) for child in children(node))
    return found
