"""inplace-autograd: an in-place operation on a tensor that autograd still needs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    ancestors,
    argument,
    call_at,
    dotted_name,
    grad_off_in,
    is_torch_name,
    keyword_arg,
    one_line,
    place_in,
    positional_args,
    shape_numel,
    spans,
)
from repairbot.codemod import remove_arg
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, frame_from_json
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources, report_path
from repairbot.torch_semantics import NO_GRAD, is_inplace_method
from repairbot.types import Applicability, Decline, Failure, Frame, Span

from . import probe


def _records(evidence: Evidence) -> tuple[Mapping[str, Any], ...]:
    records = evidence.probe_records.get(probe.EVIDENCE_KEY)
    return tuple(r for r in records if isinstance(r, Mapping)) if isinstance(records, list | tuple) else ()


def _inplace_ops(evidence: Evidence) -> tuple[Mapping[str, Any], ...]:
    """The probe's records (probe.py): op, shape, dtype, producer, leaf, version, storage,
    site, module, module_site of each in-place op since the last successful backward()."""
    return tuple(r for r in _records(evidence) if "op" in r)


def _changed_saved(evidence: Evidence) -> tuple[Mapping[str, Any], ...]:
    """The tensors the failing backward() found changed, as the probe read them from the
    graph: node (the autograd node that saved it), shape, version, storage, forward (the user
    frames of the forward call that saved it, innermost last)."""
    found = [r.get("saved") for r in _records(evidence) if "saved" in r]
    last = found[-1] if found else None
    return tuple(s for s in last if isinstance(s, Mapping)) if isinstance(last, list) else ()

_MODIFIED = (
    r"one of the variables needed for gradient computation has been modified by an inplace operation"
)
# 1.1 and later name the tensor; a tensor without autograd history (an input, a buffer, a
# parameter changed under no_grad) has no "which is output N of ..." part.
_MODIFIED_DETAILS = (
    _MODIFIED + r": \[(?P<tensor_type>[\w.]+) \[(?P<shape>[\d, ]*)\]\]"
    r"(?:, which is output (?P<output>\d+) of (?P<producer>[\w:]+),)?"
    r" is at version (?P<version>\d+); expected version (?P<expected>\d+) instead"
)
_LEAF = (
    r"(?:a (?P<view>view) of )?a (?P<leaf>leaf Variable) that requires grad is being used in an "
    r"in-place operation"
)

# Where each function of torch.nn.functional and each torch.nn module takes ``inplace`` when it
# is passed by position (checked against torch 2.13's signatures).
_FUNCTIONAL_INPLACE = {
    "relu": 1, "relu6": 1, "selu": 1, "silu": 1, "mish": 1, "hardswish": 1, "hardsigmoid": 1,
    "elu": 2, "celu": 2, "leaky_relu": 2, "hardtanh": 3, "threshold": 3, "rrelu": 4,
    "dropout": 3, "alpha_dropout": 3, "feature_alpha_dropout": 3, "dropout1d": 3, "dropout2d": 3,
    "dropout3d": 3,
}
_MODULE_INPLACE = {
    "ReLU": 0, "ReLU6": 0, "SELU": 0, "SiLU": 0, "Mish": 0, "Hardswish": 0, "Hardsigmoid": 0,
    "ELU": 1, "CELU": 1, "LeakyReLU": 1, "Hardtanh": 2, "Threshold": 2, "RReLU": 2,
    "Dropout": 1, "Dropout1d": 1, "Dropout2d": 1, "Dropout3d": 1, "AlphaDropout": 1,
    "FeatureAlphaDropout": 1,
}
# In-place methods whose name without the underscore is missing or means something else
# (``requires_grad`` is an attribute; ``bernoulli()`` samples from self, ``bernoulli_(p)`` from
# p). Every other ``x.op_()`` of torch 2.13 has an out-of-place ``x.op()`` with the same
# arguments and result.
_NO_TWIN = frozenset({
    "apply_", "as_strided_", "bernoulli_", "cauchy_", "copy_", "embedding_renorm_", "exponential_",
    "fill_", "fill_diagonal_", "geometric_", "log_normal_", "map2_", "map_", "normal_", "random_",
    "requires_grad_", "resize_", "resize_as_", "resize_as_sparse_", "set_", "share_memory_",
    "sparse_resize_", "sparse_resize_and_clear_", "uniform_", "zero_",
})

_AUGMENTED: dict[type[cst.BaseAugOp], type[cst.BaseBinaryOp]] = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo, cst.PowerAssign: cst.Power,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply, cst.BitAndAssign: cst.BitAnd,
    cst.BitOrAssign: cst.BitOr, cst.BitXorAssign: cst.BitXor,
    cst.LeftShiftAssign: cst.LeftShift, cst.RightShiftAssign: cst.RightShift,
}
# Python's binding strength of the binary operators, weakest first.
_PRECEDENCE: dict[type[cst.BaseBinaryOp], int] = {
    cst.BitOr: 1, cst.BitXor: 2, cst.BitAnd: 3, cst.LeftShift: 4, cst.RightShift: 4,
    cst.Add: 5, cst.Subtract: 5, cst.Multiply: 6, cst.Divide: 6, cst.FloorDivide: 6,
    cst.Modulo: 6, cst.MatrixMultiply: 6, cst.Power: 8,
}
_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ComplexFloatTensor": "complex64",
    "ComplexDoubleTensor": "complex128",
}
_NODE_NAME = re.compile(r"(?:\w+::)*(?P<base>\w+?)(?:Backward)?(?P<overload>\d*)")


# --------------------------------------------------------------------------------------------
# The transformer


@dataclass(frozen=True)
class OutOfPlace(Rewrite):
    """Rewrites the one in-place operation at the site, as ``kind`` says.

    ``augmented``: ``x += y`` -> ``x = x + y``. ``method``/``function``: ``x.add_(y)`` ->
    ``x.add(y)``, ``torch.relu_(x)`` -> ``torch.relu(x)``. ``drop-inplace``: the call without its
    ``inplace=True`` (passed by keyword, or at ``position``). With ``rebind`` the site is an
    expression statement whose result was dropped, which becomes ``x = <the new call>``.
    """

    kind: str
    position: int | None = None
    rebind: bool = False

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        if self.kind == "augmented":
            statement = nodes.node(cst.AugAssign)
            return [Edit(statement, augmented_to_assign(statement))]
        if not self.rebind:
            call = nodes.node(cst.Call)
            return [Edit(call, out_of_place_call(call, self))]
        expression = nodes.node(cst.Expr)
        call = cst.ensure_type(expression.value, cst.Call)
        target = _receiver(call, self.kind)
        if not isinstance(target, cst.Name | cst.Attribute):
            raise EditError("no name to bind the new tensor to")
        rebound = cst.Assign(
            targets=[cst.AssignTarget(target=target.deep_clone())],
            value=out_of_place_call(call, self),
            semicolon=expression.semicolon,
        )
        return [Edit(expression, rebound)]


@dataclass(frozen=True)
class NoGrad(Rewrite):
    """The statement at the site wrapped in ``with torch.no_grad():`` (``no_grad``, as the file
    spells it); comments and blank lines above it stay above the new block."""

    no_grad: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.SimpleStatementLine)
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.parse_expression(self.no_grad))],
            body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
            leading_lines=statement.leading_lines,
        )
        return [Edit(statement, wrapped)]


@dataclass(frozen=True)
class NoGradMerge(Rewrite):
    """The statement at the site moved into the ``with torch.no_grad():`` block just above it
    (the extra span): the block grows, the statement leaves its old place."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        statement = nodes.node(cst.BaseStatement)
        (block,) = nodes.extra(cst.With)
        if not isinstance(statement, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            raise EditError("not a statement of a block")
        around = nodes.parent(statement)
        body = around.body if isinstance(around, cst.Module | cst.IndentedBlock) else ()
        index = next((i for i, s in enumerate(body) if s is statement), 0)
        if index == 0 or body[index - 1] is not block or not isinstance(block.body, cst.IndentedBlock):
            raise EditError("the statement does not follow the with block")
        moved = statement.with_changes(leading_lines=self._kept_in_place(nodes, statement))
        grown = block.with_changes(body=block.body.with_changes(body=[*block.body.body, moved]))
        return [Edit(block, grown), Edit(statement, cst.RemovalSentinel.REMOVE)]

    @staticmethod
    def _kept_in_place(nodes: SiteNodes, statement: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> list[cst.EmptyLine]:
        """The blank and comment lines above a statement moved one block deeper, written as they
        were: LibCST would indent them with the block (a whitespace-only line, a comment), and
        only the statement itself is the edit."""
        default = nodes.module.default_indent
        blocks = [node for node in reversed(nodes.ancestors(statement)) if isinstance(node, cst.IndentedBlock)]
        outer = "".join(default if block.indent is None else block.indent for block in blocks)
        return [
            line.with_changes(indent=False, whitespace=cst.SimpleWhitespace(outer + line.whitespace.value))
            if line.indent else line
            for line in statement.leading_lines
        ]


@dataclass(frozen=True)
class CloneReads(Rewrite):
    """``buf[t] = buf[t - 1] * w`` -> ``buf[t] = buf[t - 1].clone() * w``: each read of the
    buffer ``base`` on the right-hand side of the assignment at the site is cloned (the
    gradient flows through ``clone()``; only the storage is new)."""

    base: str

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        assign = nodes.node(cst.Assign)
        reads = buffer_reads(assign.value, self.base, nodes.module)
        if not reads:
            raise EditError(f"the assignment reads nothing of {self.base}")
        return [Edit(read, _clone(read)) for read in reads]

    def cloned(self, assign: cst.Assign, module: cst.Module) -> cst.Assign:
        """The assignment as the edits leave it (for the report)."""
        reads = {id(read) for read in buffer_reads(assign.value, self.base, module)}

        class Clone(cst.CSTTransformer):
            def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
                return _clone(updated) if id(original) in reads else updated

        return cst.ensure_type(assign.visit(Clone()), cst.Assign)


@dataclass(frozen=True)
class MaskedFill(Rewrite):
    """``x[mask] = 0`` -> ``x = x.masked_fill(mask, 0)``: the masked write into the tensor at
    the site made out of place (the same values, in a new tensor bound to the same name)."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        assign = nodes.node(cst.Assign)
        return [Edit(assign, masked_fill_assign(assign))]


def masked_fill_assign(assign: cst.Assign) -> cst.Assign:
    """``x[mask] = v`` as ``x = x.masked_fill(mask, v)``, with the assignment's own spacing."""
    (target,) = assign.targets
    subscript = cst.ensure_type(target.target, cst.Subscript)
    index = cst.ensure_type(subscript.slice[0].slice, cst.Index)
    base = subscript.value
    call = cst.Call(
        func=cst.Attribute(value=base.deep_clone(), attr=cst.Name("masked_fill")),
        args=[
            cst.Arg(value=index.value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
            cst.Arg(value=assign.value),
        ],
    )
    return assign.with_changes(targets=[target.with_changes(target=base)], value=call)


def _clone(read: cst.BaseExpression) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=read, attr=cst.Name("clone")))


def buffer_reads(value: cst.BaseExpression, base: str, module: cst.Module) -> list[cst.Subscript]:
    """The outermost subscripts of ``base`` in ``value`` (``buf[t - 1]`` of ``buf[t - 1] * w``)
    that are not already cloned."""
    found: list[cst.Subscript] = []

    class Reads(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> bool:
            if module.code_for_node(node.value) == base:
                found.append(node)
                return False
            return True

        def visit_Call(self, node: cst.Call) -> bool:
            # buf[t - 1].clone() (or .detach()) is already a copy of its own
            func = node.func
            return not (isinstance(func, cst.Attribute) and func.attr.value in ("clone", "detach")
                        and isinstance(func.value, cst.Subscript) and module.code_for_node(func.value.value) == base)

    value.visit(Reads())
    return found


def out_of_place_call(call: cst.Call, rewrite: OutOfPlace) -> cst.Call:
    """The call's out-of-place form: ``inplace=True`` dropped, or the method's trailing ``_``."""
    if rewrite.kind == "drop-inplace":
        position = rewrite.position
        target = argument(call, position, "inplace") if position is not None else keyword_arg(call, "inplace")
        return remove_arg(call, target) if target is not None else call
    func = cst.ensure_type(call.func, cst.Attribute)
    return call.with_changes(func=func.with_changes(attr=func.attr.with_changes(value=func.attr.value[:-1])))
def _receiver(call: cst.Call, kind: str) -> cst.BaseExpression | None:
    """The tensor an in-place call modifies: ``x`` of ``x.add_(1)``, ``torch.relu_(x)``, ``F.relu(x, inplace=True)``."""
    if kind == "method" and isinstance(call.func, cst.Attribute):
        return call.func.value
    positional = positional_args(call)
    return positional[0].value if positional else None


def augmented_to_assign(node: cst.AugAssign) -> cst.Assign:
    """``x += y`` as ``x = x + y``: the target's own spacing around ``=``, parentheses only where needed."""
    operator_type = _AUGMENTED[type(node.operator)]
    value = node.value
    if _needs_parentheses(value, operator_type):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    # every augmented operator token has the spacing fields; BaseAugOp does not declare them
    operator: Any = node.operator
    return cst.Assign(
        targets=[
            cst.AssignTarget(
                target=node.target,
                whitespace_before_equal=operator.whitespace_before,
                whitespace_after_equal=operator.whitespace_after,
            )
        ],
        value=cst.BinaryOperation(left=node.target.deep_clone(), operator=operator_type(), right=value),
        semicolon=node.semicolon,
    )


def _needs_parentheses(value: cst.BaseExpression, operator_type: type[cst.BaseBinaryOp]) -> bool:
    """Whether ``x OP value`` would bind differently from ``x OP= value`` without parentheses."""
    if value.lpar:
        return False
    if isinstance(value, cst.BinaryOperation):
        # equal strength too: x - (a - b) is not x - a - b
        return _PRECEDENCE[type(value.operator)] <= _PRECEDENCE[operator_type]
    if isinstance(value, cst.UnaryOperation):
        return isinstance(value.operator, cst.Not)
    return isinstance(
        value, cst.BooleanOperation | cst.Comparison | cst.IfExp | cst.Lambda | cst.NamedExpr | cst.Yield
    )


# --------------------------------------------------------------------------------------------
# What the message says


@dataclass(frozen=True)
class Modified:
    """The tensor backward() found changed: ``[torch.FloatTensor [2, 3]], which is output 0 of Sigmoid``."""

    tensor_type: str
    shape: tuple[int, ...]
    producer: str | None
    version: int
    expected: int

    @classmethod
    def from_match(cls, match: re.Match[str]) -> Modified | None:
        groups = match.groupdict()
        if groups.get("shape") is None or groups.get("version") is None:
            return None
        shape = tuple(int(part) for part in groups["shape"].replace(" ", "").split(",") if part)
        return cls(
            tensor_type=groups["tensor_type"], shape=shape, producer=groups.get("producer"),
            version=int(groups["version"]), expected=int(groups["expected"]),
        )

    @property
    def dtype(self) -> str | None:
        return _DTYPES.get(self.tensor_type.rsplit(".", 1)[-1])

    @property
    def shape_text(self) -> str:
        return f"[{', '.join(map(str, self.shape))}]"

    @property
    def what(self) -> str:
        """``the output of Sigmoid ([2, 3])``; ``a [2, 3] tensor without autograd history``"""
        if self.producer is None:
            return f"a {self.shape_text} tensor without autograd history"
        return f"the output of {node_name(self.producer)} ({self.shape_text})"

    def to_json(self) -> dict[str, Any]:
        return {
            "tensor_type": self.tensor_type, "shape": list(self.shape), "producer": self.producer,
            "version": self.version, "expected_version": self.expected,
        }


def node_name(name: str) -> str:
    """An autograd node's name as torch 2.13 prints it: ``SigmoidBackward0``, ``SigmoidBackward`` -> ``Sigmoid``.

    ``LeakyReluBackward1`` (the in-place overload's node) stays apart: ``LeakyRelu1``.
    """
    found = _NODE_NAME.fullmatch(name)
    if found is None:
        return name
    overload = found["overload"]
    return found["base"] + ("" if overload in ("", "0") else overload)


def _op_matches(op: Mapping[str, Any], modified: Modified) -> bool:
    """Whether a recorded in-place op was on a tensor like the one backward() found changed."""
    shape = op.get("shape")
    if shape is None or tuple(shape) != modified.shape:
        return False
    producer = op.get("producer")
    if modified.producer is None or producer is None or node_name(producer) != node_name(modified.producer):
        return False
    dtype = modified.dtype
    return dtype is None or not op.get("dtype") or op["dtype"] == dtype


# Autograd nodes of view operations: their output shares storage and version counter with the
# input's base (an in-place op on a view of a view regenerates it as AsStrided).
_VIEW_NODES = frozenset({
    "AsStrided", "View", "UnsafeView", "Reshape", "Transpose", "T", "Permute", "Select", "Slice",
    "Expand", "Squeeze", "Unsqueeze", "Split", "SplitWithSizes", "Unbind", "Narrow", "Diagonal",
    "Alias", "Unfold", "Unflatten", "ViewAsReal", "ViewAsComplex",
})


def _is_view_node(name: object) -> bool:
    found = _NODE_NAME.fullmatch(name) if isinstance(name, str) else None
    return found is not None and found["base"] in _VIEW_NODES


def _view_culprits(ops: Sequence[Mapping[str, Any]], modified: Modified) -> list[Mapping[str, Any]]:
    """In-place ops that can have changed the saved tensor through another view of its base:
    the saved tensor is a view, the op's target a view with as many elements and the same
    dtype, and the shared version counter stood at the saved version when the op ran (the
    record is taken before the op). The base itself is not traced: an op on the base, or on a
    view of another size, is not linked."""
    if not _is_view_node(modified.producer):
        return []
    dtype = modified.dtype
    found = []
    for op in ops:
        shape = op.get("shape")
        if not isinstance(shape, Sequence) or not all(isinstance(n, int) for n in shape):
            continue
        if (
            _is_view_node(op.get("producer")) and op.get("version") == modified.expected
            and shape_numel(shape) == shape_numel(modified.shape) and (dtype is None or not op.get("dtype") or op["dtype"] == dtype)
        ):
            found.append(op)
    return found


def _saved_tensors_like(saved: Sequence[Mapping[str, Any]], modified: Modified) -> list[Mapping[str, Any]]:
    """The changed saved tensors that are the one the message names (its shape and version)."""
    return [
        s for s in saved
        if isinstance(s.get("shape"), list) and tuple(s["shape"]) == modified.shape and s.get("version") == modified.version
    ]


def _storage_culprits(
    ops: Sequence[Mapping[str, Any]], saved: Sequence[Mapping[str, Any]], modified: Modified
) -> list[Mapping[str, Any]]:
    """In-place ops on the saved tensor itself or on any tensor that shares its storage (a
    view of it, its base, another view of the base: they share one version counter), made
    at or after the version it was saved at."""
    storages = {s.get("storage") for s in saved if isinstance(s.get("storage"), int)}
    return [
        op for op in ops
        if isinstance(op.get("storage"), int) and op["storage"] in storages
        and isinstance(op.get("version"), int) and op["version"] >= modified.expected
    ]


def _saved_where(saved: Sequence[Mapping[str, Any]]) -> tuple[str, Frame | None]:
    """``Addmm (at train.py:18, `h += self.ffn(h)`)``: the autograd node that saved the tensor
    and the innermost user frame of its forward call (kept by anomaly mode), and that frame."""
    for record in saved:
        forward = record.get("forward")
        frames = [frame_from_json(f) for f in forward if isinstance(f, Mapping)] if isinstance(forward, list) else []
        if frames:
            frame = frames[-1]
            return f"{node_name(str(record.get('node')))} (at {_location(frame)}, `{frame.code or '?'}`)", frame
    return (node_name(str(saved[0].get("node"))), None) if saved else ("", None)


# --------------------------------------------------------------------------------------------
# Where the op is in the source


def _exact_nodes(wrapper: MetadataWrapper, frame: Frame) -> list[cst.CSTNode]:
    """Nodes spanning exactly the traced expression (Python >= 3.11 records its columns)."""
    if frame.col is None:
        return []
    wanted = Span(frame.line, frame.col, frame.end_line or frame.line, frame.end_col or 0)
    return [node for node, span in spans(wrapper).items() if span == wanted]


def _is_inplace_call(node: cst.CSTNode, imports: ImportTable) -> bool:
    """``x.add_(y)``, ``torch.relu_(x)``, ``f(x, inplace=...)`` or ``F.relu(x, True)``."""
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and is_inplace_method(node.func.attr.value):
        return True
    if keyword_arg(node, "inplace") is not None:
        return True
    qualified = imports.qualify(node.func) or ""
    position = _FUNCTIONAL_INPLACE.get(qualified.rsplit(".", 1)[-1])
    return (
        position is not None and is_torch_name(qualified, f"torch.nn.functional.{qualified.rsplit('.', 1)[-1]}")
        and len(positional_args(node)) > position
    )


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _setitem_targets(statement: cst.CSTNode) -> list[cst.CSTNode]:
    return [
        target.target for target in m.findall(statement, m.AssignTarget(target=m.Subscript()))
        if isinstance(target, cst.AssignTarget)
    ]


def inplace_node(wrapper: MetadataWrapper, frame: Frame, imports: ImportTable) -> cst.CSTNode | None:
    """The augmented assignment, in-place call or assigned subscript a traced op ran at.

    With columns the node is exact; without them, the only in-place-looking node on the line.
    None when the op ran inside something else the line calls (a module, a helper).
    """
    exact = [
        node for node in _exact_nodes(wrapper, frame)
        if isinstance(node, cst.AugAssign | cst.Subscript) or _is_inplace_call(node, imports)
    ]
    if exact or frame.col is not None:
        return exact[0] if exact else None
    on_line: list[cst.CSTNode] = []
    for node, span in spans(wrapper).items():
        if span.line != frame.line:
            continue
        if isinstance(node, cst.AugAssign) or _is_inplace_call(node, imports):
            on_line.append(node)
        elif isinstance(node, cst.SimpleStatementLine):
            on_line.extend(_setitem_targets(node))
    return on_line[0] if len(on_line) == 1 else None


def statement_at(wrapper: MetadataWrapper, line: int) -> tuple[cst.SimpleStatementLine, Span] | None:
    """The simple statement line (one or more ``;``-separated statements) that holds ``line``."""
    for node, span in spans(wrapper).items():
        if isinstance(node, cst.SimpleStatementLine) and span.contains_line(line):
            return node, span
    return None


def _no_grad_call(imports: ImportTable) -> str | None:
    """``torch.no_grad()`` under the name the file gives torch (``th.no_grad()``, ``no_grad()``)."""
    for local, full in sorted(imports.aliases.items()):
        if full == "torch":
            return f"{local}.no_grad()"
    for local, full in sorted(imports.aliases.items()):
        if full in NO_GRAD:
            return f"{local}()"
    return None


def _is_no_grad_block(node: cst.CSTNode, imports: ImportTable) -> bool:
    if not isinstance(node, cst.With) or len(node.items) != 1 or node.items[0].asname is not None:
        return False
    item = node.items[0].item
    return (
        isinstance(item, cst.Call) and not item.args and is_torch_name(imports.qualify(item.func), *NO_GRAD)
        and isinstance(node.body, cst.IndentedBlock)
    )


def _is_inplace_statement(statement: cst.BaseSmallStatement, imports: ImportTable) -> bool:
    """Does this statement itself change a tensor in place (not some function it calls)?"""
    if isinstance(statement, cst.AugAssign) or _setitem_targets(statement):
        return True
    return any(_is_inplace_call(call, imports) for call in m.findall(statement, m.Call()))


def _location(frame: Frame) -> str:
    return f"{place_in(Path(frame.file), frame.line)}"


# --------------------------------------------------------------------------------------------
# The pattern


@dataclass(frozen=True)
class _Plan:
    """What one recorded op asks for: a fix (site) or a refusal, keyed by its statement."""

    key: tuple[str, int, int, int, int]
    where: Frame
    site: Site | None = None
    decline: Decline | None = None


class InplaceAutograd(Pattern):
    """Makes the in-place operation that broke backward() out-of-place, where it happened.

    What it fixes:
        An in-place operation (``x += y``, ``x.add_(y)``, ``torch.relu_(x)``, ``F.relu(x,
        inplace=True)``, an ``nn.ReLU(inplace=True)`` layer) on a tensor that an earlier
        operation saved for its backward pass; a masked write into such a tensor (``x =
        F.relu(x)`` then ``x[mask] = 0``); a recurrence written into one buffer (``buf[t] =
        buf[t - 1] * w``, or ``h = torch.tanh(... outputs[:, t - 1] @ W)`` then ``outputs[:, t]
        = h``) whose saved read a later step overwrites; and a leaf
        tensor that requires grad (a hand-made weight) updated in place outside
        ``torch.no_grad()``.

    Why it fails:
        Autograd saves some tensors to compute gradients later (sigmoid and ReLU save their
        output) and checks their version counter in ``backward()``: ``RuntimeError: one of the
        variables needed for gradient computation has been modified by an inplace operation:
        [torch.FloatTensor [8, 32]], which is output 0 of SigmoidBackward0, is at version 1;
        expected version 0 instead.`` The traceback points at ``loss.backward()``, far from the
        culprit. A tracing rerun records every in-place op on a tensor autograd tracks, with
        its shape, the op that produced the tensor and where it ran (for a module with an
        ``inplace`` switch, where the module was built); the op on a tensor of the message's
        shape and producer is the one to change. The saved tensor itself is read from the
        graph when backward() fails (without its version check): an op on its storage (the
        tensor, a view of it, its base: they share one version counter) links it exactly, so a
        view printed as ``output 0 of AsStrided`` (``h += self.ffn(h)`` on a 3-D ``h``, whose
        Linear saved the reshaped view) is found, and the rerun runs in anomaly mode (without
        its NaN check) so that the forward line that saved the tensor is named when no traced
        op is linked. Without those records, the op on a view of as many elements, made when
        the shared version counter stood at the saved version, is the one. For ``a leaf Variable that requires grad is
        being used in an in-place operation`` the failing line is the update itself: autograd
        cannot record an in-place change of a leaf it must differentiate with respect to.

    Example:
        ``h = torch.sigmoid(z)`` then ``h += 1``: ``h = h + 1``. ``h.add_(b)`` alone on its line:
        ``h = h.add(b)``. ``torch.sigmoid_(h)``: ``h = torch.sigmoid(h)``. ``F.relu(h,
        inplace=True)``: ``F.relu(h)``. ``nn.Sequential(..., nn.Sigmoid(), nn.ReLU(inplace=True))``:
        ``nn.ReLU()`` at the construction, in whatever file builds it. ``h[:, t] =
        torch.tanh(h[:, t - 1] @ W)``: ``h[:, t - 1].clone() @ W`` (never a detach, which would
        drop the gradient through time), and the same read in the statement before the write
        (``h = torch.tanh(outputs[:, t - 1] @ W)`` then ``outputs[:, t] = h``): cloned there.
        ``x = F.relu(x)`` then ``x[mask] = 0`` with a boolean mask of x's shape: ``x =
        x.masked_fill(mask, 0)``. A manual SGD update ``w
        -= lr * w.grad`` of a leaf: wrapped in ``with torch.no_grad():`` (moved into the
        ``no_grad`` block just above it when there is one).

    Fix safety:
        Safe for the out-of-place rewrites and the removal of ``inplace=True``: the same values,
        in a new tensor instead of the saved one (a little more memory). Code that relied on
        another name seeing the change through the shared tensor would no longer see it; the
        rerun verifies that the script runs. The ``clone()`` of a recurrence's read is safe: the
        same values and the same gradient (clone is differentiable), in a copy that later writes
        into the buffer leave alone. The ``masked_fill`` is safe: the trace shows a boolean mask
        of the tensor's own shape and one value (the same elements, the same values), the tensor
        is the saved one itself (not a view of another), and its name was bound to it by a call
        or an operator earlier in the same block, read in between only as an operand of
        comparisons and arithmetic (no other name can see the change). The ``no_grad`` wrap is safe when the update is
        alone in its block; unsafe when the block holds more statements (another update in it
        may need the same treatment, and the next attempt will say so).

    Not handled:
        Another in-place assignment to a subscript: a slice or several indices that is not such
        a recurrence, a mask of another shape (``x[rows] = 0`` with a mask of the rows), several
        values (``x[mask] = noise[mask]``), a tensor another name may hold (``first = x[:, :3]``
        before the write, an argument of the function): the report suggests a ``clone()``
        first; a recurrence that reads the buffer through another name (``prev = buf[t - 1]``:
        diagnosed at the statement that saved it); in-place ops whose result is
        used inside a larger expression or bound to another name; methods without an
        out-of-place twin (``copy_``, ``zero_``, ``fill_``, ``normal_``...); a tensor without
        autograd history changed in place by an op the trace does not see (an input or a
        buffer changed with no operand that requires grad: the report names the forward line
        that saved it); several statements that each change the saved tensor's storage;
        modules built inside a
        library (``torchvision`` models: the report says to switch their ``inplace`` off); a
        leaf update on the same line as its loop header, or in a file that imports no torch
        name; messages of PyTorch before 1.1, which do not name the tensor.
    """

    ID = "inplace-autograd"
    TITLE = "An in-place operation modified a tensor that autograd needs"
    TAGS = frozenset({"autograd"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature("RuntimeError", _MODIFIED_DETAILS),
        signature("RuntimeError", _MODIFIED),
        signature("RuntimeError", _LEAF),
    )
    RERUN_PROBES = frozenset({probe.NAME})
    # Wrapping a statement in `with torch.no_grad():` turns one line into two; removing an
    # `inplace=True` on its own line joins two.
    MAX_CHANGED_LINES = 2
    # Whether an op changes a saved tensor depends on the graph's structure, never on how many
    # rows the batch has: the forced batch of 2 fails exactly as the script's own batch does.
    BATCH_INVARIANT = True
    REWRITES = (OutOfPlace, NoGrad, NoGradMerge, CloneReads, MaskedFill)

    def rerun_probes(self, match: re.Match[str]) -> frozenset[str]:
        # the leaf error fails at the in-place statement itself: there is nothing to trace
        return frozenset() if match.groupdict().get("leaf") else self.RERUN_PROBES

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        if match.groupdict().get("leaf"):
            return self._locate_leaf(failure, match, evidence, sources)
        modified = Modified.from_match(match)
        if modified is None:
            return self.decline(
                "the message does not say which tensor was modified (PyTorch before 1.1)",
                diagnosis="rerun with a recent PyTorch, or with torch.autograd.set_detect_anomaly(True) "
                "to see the operation whose saved tensor was changed",
            )
        traced = evidence is not None and probe.NAME in evidence.probes
        ops = _inplace_ops(evidence) if evidence is not None else ()
        saved = _saved_tensors_like(_changed_saved(evidence), modified) if evidence is not None else []
        saver, saver_frame = _saved_where(saved)
        # The tensor autograd saved, read from the graph, and the ops on its storage: exact.
        matching = _storage_culprits(ops, saved, modified)
        link = "storage" if matching else ""
        if not matching and modified.producer is None:
            saved_by = f"; {saver} saved it" if saver_frame is not None else ""
            return self.decline(
                f"the modified {modified.shape_text} tensor has no autograd history (an input, a buffer or "
                "a weight changed in place, under no_grad or without requires_grad), and no traced "
                f"in-place operation shares its storage{saved_by}",
                diagnosis=f"find where a {modified.shape_text} input, buffer or weight is changed in place "
                + (f"after {_location(saver_frame)} and before " if saver_frame is not None else "between the forward pass and ")
                + "backward(), and change a copy instead (x = x * 2, or x.clone())",
                at=saver_frame,
            )
        if not traced or evidence is None:
            return self.decline("no in-place operations were traced for this failure (the tracing rerun did not run)")
        if not matching:
            matching = [op for op in ops if _op_matches(op, modified)]
            link = "message" if matching else ""
        if not matching:
            matching = _view_culprits(ops, modified)
            link = "view" if matching else ""
        if not matching:
            if saver_frame is not None:
                return self.decline(
                    f"none of the {len(ops)} traced in-place operations since the last backward() changed "
                    f"{modified.what}; the tensor was saved by {saver}",
                    diagnosis=f"the tensor saved at {_location(saver_frame)} is changed in place after that "
                    "line and before backward() by code the trace does not see: change a copy, or make that "
                    "change out-of-place",
                    at=saver_frame,
                )
            return self.decline(
                f"none of the {len(ops)} traced in-place operations since the last "
                f"backward() changed {modified.what}",
                diagnosis="look for an in-place change of that tensor between the forward pass and backward() "
                "(the tracing rerun could not read the forward call that saved it)",
            )
        # The op that raised the version from the saved one broke the check; later ops on the
        # same tensor (or ops seen only through a view) are the fallback.
        first = [op for op in matching if op.get("version") == modified.expected]
        chosen = first or matching
        plans = [self._plan(op, modified, evidence, len(chosen), sources) for op in chosen]
        keys = {plan.key for plan in plans}
        if len(keys) > 1:
            places = sorted({f"{_location(p.where)} ({p.where.code or '?'})" for p in plans})
            return self.decline(
                f"{len(keys)} different statements changed in place a tensor like {modified.what}: "
                + "; ".join(places),
                diagnosis="make each of these in-place operations out-of-place (x = x + 1 for x += 1, "
                "x.relu() for x.relu_(), no inplace=True)",
            )
        declined = next((plan.decline for plan in plans if plan.decline is not None), None)
        if declined is not None:
            return declined
        sites = {(p.site.file, p.site.span, p.site.rewrite) for p in plans if p.site}
        if len(sites) != 1 or plans[0].site is None:
            return self.decline(f"several in-place operations in the statement at {_location(plans[0].where)} changed {modified.what}")
        if link == "storage" and not isinstance(plans[0].site.rewrite, CloneReads):
            op = chosen[0]
            shared = (
                "the saved tensor itself" if tuple(op.get("shape") or ()) == modified.shape and op.get("producer")
                and node_name(str(op.get("producer"))) == node_name(modified.producer or "") else
                f"a {_shape_text(op.get('shape'))} tensor that shares its storage and version counter with it"
            )
            return replace(plans[0].site, evidence_text=(
                f"{plans[0].site.evidence_text}; the tensor backward() checked was saved by {saver}, and the "
                f"{op.get('op')} changed {shared}"
            ), evidence={**plans[0].site.evidence, "link": "storage", "saved_by": saver})
        if link == "view":
            op = chosen[0]
            return replace(plans[0].site, evidence_text=(
                f"{plans[0].site.evidence_text}; the {op.get('op')} changed a {_shape_text(op.get('shape'))} view "
                f"({node_name(str(op.get('producer')))}), which shares its version counter with the saved "
                f"{modified.shape_text} view: it was the only in-place operation on a view of as many elements "
                f"at version {modified.expected}"
            ))
        return plans[0].site

    # the modified-tensor error -------------------------------------------------------------
    def _plan(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, sources: Sources
    ) -> _Plan:
        built = self._plan_module(op, modified, evidence, count, sources)
        if built is not None:
            return built
        raw_site = op.get("site")
        if not isinstance(raw_site, Mapping):
            frame = Frame(file="?", line=0)
            return _Plan(("?", 0, 0, 0, 0), frame, decline=self.decline(
                f"the in-place operation ({op.get('op')}) on {modified.what} ran outside the project's code"
            ))
        frame = frame_from_json(raw_site)
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        statement = statement_at(wrapper, frame.line)
        stmt_span = statement[1] if statement else Span(frame.line, 0, frame.line, 0)
        key = (str(path), stmt_span.line, stmt_span.col, stmt_span.end_line, stmt_span.end_col)
        found = self._site_at(op, frame, modified, evidence, count, wrapper)
        if isinstance(found, Decline):
            return _Plan(key, frame, decline=found)
        return _Plan(key, frame, site=found)

    def _plan_module(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, sources: Sources
    ) -> _Plan | None:
        """The construction call of the torch.nn module whose forward made the op, if it is one."""
        module_type, raw = op.get("module"), op.get("module_site")
        if not module_type or not isinstance(raw, Mapping) or module_type not in _MODULE_INPLACE:
            return None
        frame = frame_from_json(raw)
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        located = call_at(wrapper, frame.line, frame.col, frame.end_line, frame.end_col)
        if located is None or not isinstance(located.node, cst.Call):
            return None
        call = located.node
        module = wrapper.module
        if not is_torch_name(ImportTable(module).qualify(call.func), f"torch.nn.{module_type}"):
            return None  # a module of the user's own with an `inplace` switch: the op is in its forward
        span = located.span
        key = (str(path), span.line, span.col, span.end_line, span.end_col)
        built = one_line(module, call)
        target = argument(call, _MODULE_INPLACE[module_type], "inplace")
        if target is None or (target.keyword is None and target is not positional_args(call)[-1]):
            return _Plan(key, frame, decline=self.decline(
                f"the {module_type} built at {_location(frame)} ({built}) is switched to in-place elsewhere",
                diagnosis=f"set inplace=False on the {module_type} built at {_location(frame)}", at=frame,
            ))
        if not _is_true(target.value):
            return _Plan(key, frame, decline=self.decline(
                f"the {module_type} built at {_location(frame)} takes inplace={module.code_for_node(target.value)}, "
                "which may be shared with other layers",
                diagnosis=f"build this {module_type} with inplace=False", at=frame,
            ))
        after = one_line(module, remove_arg(call, target))
        shown = "inplace=True" if target.keyword is not None else "the inplace argument (a positional True)"
        return _Plan(key, frame, site=Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=OutOfPlace("drop-inplace", None if target.keyword else _MODULE_INPLACE[module_type]),
            summary=(
                f"Removed {shown} from {built} at {_location(frame)}: the {module_type} modified in place "
                f"{modified.what} that backward() needed"
            ),
            applicability=Applicability.SAFE,
            evidence=self._evidence(op, modified, evidence, count, after=after),
            evidence_text=self._evidence_text(op, modified, evidence, count, where=f"the {module_type} built at {_location(frame)}"),
        ))

    def _site_at(
        self,
        op: Mapping[str, Any],
        frame: Frame,
        modified: Modified,
        evidence: Evidence,
        count: int,
        wrapper: MetadataWrapper,
    ) -> Site | Decline:
        """The fix of the in-place statement or call the op's user frame was running."""
        module = wrapper.module
        imports = ImportTable(module)
        node = inplace_node(wrapper, frame, imports)
        if isinstance(node, cst.Subscript) or (isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Subscript)):
            subscript = cst.ensure_type(node.target if isinstance(node, cst.AugAssign) else node, cst.Subscript)
            base = module.code_for_node(subscript.value)
            if isinstance(node, cst.Subscript):
                recurrence = self._clone_saved_read(op, frame, modified, evidence, count, wrapper, subscript, base)
                if recurrence is not None:
                    return recurrence
                masked = self._masked_write(op, frame, modified, evidence, count, wrapper, subscript)
                if masked is not None:
                    return masked
            return self.decline(
                f"`{frame.code or '?'}` at {_location(frame)} assigns into {modified.what} in place; an "
                "indexed assignment has no one-token out-of-place form",
                diagnosis=f"assign into a copy ({base} = {base}.clone() first), or build a new tensor "
                f"({base} = {base}.masked_fill(mask, value) or torch.where(mask, value, {base}))",
                at=frame,
            )
        if node is None:
            built = f" (the {op['module']} built at {_short(op.get('module_site'))})" if op.get("module") else ""
            return self.decline(
                f"the in-place {op.get('op')}{built} that changed {modified.what} runs inside "
                f"`{frame.code or '?'}` at {_location(frame)}, not in a statement of the project's own",
                diagnosis=(
                    "switch the in-place modules off: for m in model.modules(): if hasattr(m, 'inplace'): "
                    "m.inplace = False" if op.get("module") else "make that in-place operation out-of-place"
                ),
                at=frame,
            )
        span = spans(wrapper)[node]
        if isinstance(node, cst.AugAssign):
            new = module.code_for_node(augmented_to_assign(node))
            return self._site(op, modified, evidence, count, frame, span, OutOfPlace("augmented"), module.code_for_node(node), new)
        call = cst.ensure_type(node, cst.Call)
        params = self._call_params(op, call, imports, module, frame)
        if isinstance(params, Decline):
            return params
        receiver = _receiver(call, params.kind)
        old, new_call = one_line(module, call), out_of_place_call(call, params)
        new = one_line(module, new_call)
        if receiver is None:
            return self.decline(f"cannot tell which tensor `{old}` at {_location(frame)} changes")
        parent = wrapper.resolve(ParentNodeProvider)[call]
        receiver_code = module.code_for_node(receiver)
        if isinstance(parent, cst.Expr):
            # The result was dropped: the statement relies on the change, so the name is rebound.
            if dotted_name(receiver) is None:
                return self.decline(
                    f"`{old}` at {_location(frame)} changes {receiver_code} in place, and there is no "
                    "name to bind the new tensor to",
                    diagnosis=f"bind the out-of-place result: ... = {new}", at=frame,
                )
            rebound = f"{receiver_code} = {new}"
            return self._site(op, modified, evidence, count, frame, spans(wrapper)[parent], replace(params, rebind=True), old, rebound)
        if not _binding_keeps_meaning(parent, receiver, module):
            return self.decline(
                f"the result of `{old}` at {_location(frame)} is used while {receiver_code} itself is "
                f"changed; the out-of-place call would leave {receiver_code} as it was",
                diagnosis=f"write {receiver_code} = {new} and use {receiver_code}", at=frame,
            )
        return self._site(op, modified, evidence, count, frame, span, params, old, new)

    def _clone_saved_read(
        self,
        op: Mapping[str, Any],
        frame: Frame,
        modified: Modified,
        evidence: Evidence,
        count: int,
        wrapper: MetadataWrapper,
        subscript: cst.Subscript,
        base: str,
    ) -> Site | Decline | None:
        """A recurrence written into one buffer, ``buf[t] = buf[t - 1] * w``: the product saved
        its operand, a view of ``buf``, and the next step's assignment into ``buf`` overwrote
        it. Fixed by cloning the reads of ``buf`` on the right-hand side, when the trace shows
        the saved tensor is ``buf``'s own storage and the forward call that saved it ran in this
        very statement; a read of the buffer through another name is diagnosed. None where
        this is not such a recurrence (an indexed write that reads nothing of its buffer)."""
        parents = wrapper.resolve(ParentNodeProvider)
        target = parents.get(subscript)
        assign = parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or dotted_name(subscript.value) is None:
            return None
        saved = [
            s for s in _saved_tensors_like(_changed_saved(evidence), modified)
            if s.get("storage") is not None and s.get("storage") == op.get("storage")
        ]
        saver, saver_frame = _saved_where(saved)
        if saver_frame is None or Path(saver_frame.file).resolve() != Path(frame.file).resolve():
            return None
        statement = statement_at(wrapper, frame.line)
        if statement is None:
            return None
        module = wrapper.module
        reader, read_at = assign, frame
        if not statement[1].contains_line(saver_frame.line):
            # saved by an earlier statement of the step: `h = torch.tanh(... buf[t - 1] @ w)`,
            # then `buf[t] = h`; the saved tensor is a view of the buffer (a slice it read), not
            # the tensor written (`x = F.relu(x)` then `x[mask] = 0`)
            earlier = _saving_assignment(wrapper, saver_frame, assign) if _is_view_node(modified.producer) else None
            if earlier is None:
                return None
            reader, read_at = earlier, saver_frame
        reads = [read for read in buffer_reads(reader.value, base, module) if read is not reader.value]
        if not reads:
            here = "this statement" if reader is assign else f"`{one_line(module, reader)}` at {_location(read_at)}"
            return self.decline(
                f"`{one_line(module, assign)}` at {_location(frame)} writes into {base}, and the tensor {saver} "
                f"saved from {here} is {base}'s storage, read through another name",
                diagnosis=f"clone the slice of {base} where it is read (... = {base}[...].clone()) so that later "
                f"writes into {base} leave the saved value alone; never detach it (that drops its gradient)",
                at=read_at,
            )
        span = spans(wrapper)[reader]
        old = one_line(module, reader)
        new = one_line(module, CloneReads(base).cloned(reader, module))
        cloned = ", ".join(sorted({module.code_for_node(r) for r in reads}))
        return Site(
            pattern=self.ID,
            file=frame.file,
            span=span,
            rewrite=CloneReads(base),
            summary=(
                f"Cloned {cloned} in {old} at {_location(read_at)}: {saver.split(' (')[0]} saved it for backward(), "
                f"and a later assignment into {base} overwrote it"
            ),
            applicability=Applicability.SAFE,
            evidence={
                **self._evidence(op, modified, evidence, count, after=new),
                "link": "storage", "saved_by": saver, "cloned": cloned,
            },
            evidence_text=(
                self._evidence_text(op, modified, evidence, count, where=f"`{one_line(module, assign)}` at {_location(frame)}")
                + f"; the tensor backward() checked was saved by {saver}, from {base}'s own storage: the "
                f"assignment of a later step overwrote the {cloned} "
                + ("this one read" if reader is assign else f"read at {_location(read_at)}")
            ),
        )

    def _masked_write(
        self,
        op: Mapping[str, Any],
        frame: Frame,
        modified: Modified,
        evidence: Evidence,
        count: int,
        wrapper: MetadataWrapper,
        subscript: cst.Subscript,
    ) -> Site | Decline | None:
        """``x = F.relu(...)`` then ``x[mask] = 0``: relu saved its output, the masked write
        changed it. Fixed as ``x = x.masked_fill(mask, 0)`` when the trace shows a boolean
        mask of the tensor's shape and one value, the tensor written is the saved one itself
        (not a view of another), and ``x`` was bound to it in the same block with nothing
        between that could keep another name on it. None where the statement is not such a
        write (a slice, several indices, an attribute's or a subscript's subscript)."""
        parents = wrapper.resolve(ParentNodeProvider)
        target = parents.get(subscript)
        assign = parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if (
            not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(subscript.value, cst.Name)
            or len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index)
            or subscript.slice[0].slice.star is not None
        ):
            return None
        module = wrapper.module
        name = subscript.value.value
        old = one_line(module, assign)
        new = one_line(module, masked_fill_assign(assign))
        index, value = op.get("index"), op.get("value")
        shape = op.get("shape")
        copy = f"assign into a copy ({name} = {name}.clone() first)"
        if not isinstance(index, Mapping) or index.get("dtype") != "bool" or index.get("shape") != shape:
            what = (
                f"a {index.get('dtype')} {_shape_text(index.get('shape'))} index" if isinstance(index, Mapping) and "dtype" in index
                else f"a {index.get('type')} index" if isinstance(index, Mapping) else "an index the trace did not record"
            )
            return self.decline(
                f"`{old}` at {_location(frame)} writes into {modified.what} in place through {what}, not a boolean "
                f"mask of its shape {_shape_text(shape)}: masked_fill would not select the same elements",
                diagnosis=f"{copy}, or build the new tensor out of place", at=frame,
            )
        if not isinstance(value, Mapping) or not (
            value.get("type") in ("int", "float", "bool") or ("dtype" in value and value.get("shape") == [])
        ):
            return self.decline(
                f"`{old}` at {_location(frame)} writes a tensor of several values into the masked elements of "
                f"{modified.what}: masked_fill takes one value",
                diagnosis=f"{copy}, or torch.where({module.code_for_node(cst.ensure_type(subscript.slice[0].slice, cst.Index).value)}, "
                f"<values of {_shape_text(shape)}>, {name})",
                at=frame,
            )
        producer = op.get("producer")
        if (
            tuple(shape or ()) != modified.shape or not producer or _is_view_node(producer)
            or node_name(str(producer)) != node_name(modified.producer or "")
        ):
            return self.decline(
                f"`{old}` at {_location(frame)} writes into a {_shape_text(shape)} {node_name(str(producer))} output that "
                f"shares its storage with {modified.what}: rebinding {name} would leave the saved tensor's base as it was",
                diagnosis=f"{copy}", at=frame,
            )
        if not _sole_name_since_bound(wrapper, assign, name):
            return self.decline(
                f"`{old}` at {_location(frame)} changes the tensor {name} names in place, and another name may "
                f"hold it ({name} is not bound in this block just before, or is used in between)",
                diagnosis=f"write {new} if nothing else must see the change; otherwise {copy}", at=frame,
            )
        return Site(
            pattern=self.ID,
            file=frame.file,
            span=spans(wrapper)[assign],
            rewrite=MaskedFill(),
            summary=f"Replaced {old} with {new} at {_location(frame)}: it modified in place {modified.what} that backward() needed",
            applicability=Applicability.SAFE,
            evidence={**self._evidence(op, modified, evidence, count, after=new), "index": dict(index), "value": dict(value)},
            evidence_text=(
                self._evidence_text(op, modified, evidence, count, where=f"`{old}` at {_location(frame)}")
                + f"; its index is a boolean mask of the tensor's shape {_shape_text(shape)} and its value one "
                + ("number" if "type" in value else "0-dimensional tensor")
                + f", and {name} was bound to that tensor in this block with no other use in between"
            ),
        )

    def _call_params(
        self, op: Mapping[str, Any], call: cst.Call, imports: ImportTable, module: cst.Module, frame: Frame
    ) -> OutOfPlace | Decline:
        """How to make an in-place call out-of-place: drop ``inplace=True``, or the method's ``_``."""
        qualified = imports.qualify(call.func) or ""
        name = qualified.rsplit(".", 1)[-1]
        if keyword_arg(call, "inplace") is not None or (
            name in _FUNCTIONAL_INPLACE and is_torch_name(qualified, f"torch.nn.functional.{name}")
        ):
            position = _FUNCTIONAL_INPLACE.get(name)
            target = argument(call, position, "inplace") if position is not None else keyword_arg(call, "inplace")
            if target is not None and not _is_true(target.value):
                switch = module.code_for_node(target.value)
                built = f" (the {op['module']} built at {_short(op.get('module_site'))})" if op.get("module_site") else ""
                return self.decline(
                    f"`{one_line(module, call)}` at {_location(frame)} takes its in-place switch from `{switch}`, "
                    f"which was true here{built}",
                    diagnosis=f"make `{switch}` false where it is set{built}", at=frame,
                )
            if (
                target is None or not is_torch_name(qualified, f"torch.nn.functional.{name}")
                or (target.keyword is None and target is not positional_args(call)[-1])
            ):
                return self.decline(
                    f"`{one_line(module, call)}` at {_location(frame)} is not a torch.nn.functional call "
                    "with inplace=True",
                    diagnosis="call it with inplace=False", at=frame,
                )
            return OutOfPlace("drop-inplace", None if target.keyword else position)
        func = cst.ensure_type(call.func, cst.Attribute)  # inplace_node only gives `x.op_(...)` otherwise
        kind = "function" if qualified.startswith("torch.") else "method"
        if func.attr.value in _NO_TWIN or qualified.startswith("torch.nn.init."):
            receiver = _receiver(call, kind)
            copy = f"{one_line(module, receiver)}.clone()" if receiver is not None else "a clone()"
            return self.decline(
                f"`{one_line(module, call)}` at {_location(frame)} has no out-of-place twin",
                diagnosis=f"apply it to a copy ({copy}) or build the new tensor out-of-place", at=frame,
            )
        return OutOfPlace(kind)

    def _site(
        self,
        op: Mapping[str, Any],
        modified: Modified,
        evidence: Evidence,
        count: int,
        frame: Frame,
        span: Span,
        params: OutOfPlace,
        old: str,
        new: str,
    ) -> Site:
        if params.kind == "drop-inplace" and not params.rebind:
            summary = f"Removed inplace=True from {old} at {_location(frame)}"
        else:
            summary = f"Replaced {old} with {new} at {_location(frame)}"
        return Site(
            pattern=self.ID,
            file=frame.file,
            span=span,
            rewrite=params,
            summary=f"{summary}: it modified in place {modified.what} that backward() needed",
            applicability=Applicability.SAFE,
            evidence=self._evidence(op, modified, evidence, count, after=new),
            evidence_text=self._evidence_text(op, modified, evidence, count, where=f"`{old}` at {_location(frame)}"),
        )

    def _evidence(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, after: str
    ) -> dict[str, Any]:
        return {
            "modified": modified.to_json(),
            "op": {
                "op": op.get("op"), "shape": op.get("shape"), "dtype": op.get("dtype"),
                "producer": op.get("producer"), "version": op.get("version"),
                "site": _short(op.get("site")), "module": op.get("module"),
                "module_site": _short(op.get("module_site")),
            },
            "matching_ops": count,
            "traced_ops": len(_inplace_ops(evidence)),
            "rewritten_to": after,
        }

    def _evidence_text(
        self, op: Mapping[str, Any], modified: Modified, evidence: Evidence, count: int, where: str
    ) -> str:
        times = "" if count == 1 else f" ({count} times)"
        traced = len(_inplace_ops(evidence))
        return (
            f"backward() found {modified.what} at version {modified.version} instead of {modified.expected}; "
            f"of the {traced} in-place operation{'' if traced == 1 else 's'} traced since the last backward(), "
            f"the {op.get('op')} on that tensor ({op.get('producer') or 'no history'}, version {op.get('version')}) "
            f"was {where}{times}"
        )

    # the leaf error ------------------------------------------------------------------------
    def _locate_leaf(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the in-place update of the leaf tensor happens inside a library")
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        found = statement_at(wrapper, frame.line)
        update = "torch.no_grad()"
        if found is None:
            return self.decline(
                f"the in-place update at {_location(frame)} is not a statement on its own line",
                diagnosis=f"put the update on its own line, inside `with {update}:`", at=frame,
            )
        statement, span = found
        code = one_line(module, statement)
        imports = ImportTable(module)
        if not all(_is_inplace_statement(small, imports) for small in statement.body):
            return self.decline(
                f"`{code}` at {_location(frame)} does not itself change a tensor in place: a function it "
                "calls does",
                diagnosis=f"run that update inside `with {update}:`, or give the function a tensor that "
                "does not require grad",
                at=frame,
            )
        no_grad = _no_grad_call(imports)
        if no_grad is None:
            return self.decline(
                f"{report_path(path)} imports no torch name to write torch.no_grad() with",
                diagnosis=f"wrap `{code}` in `with torch.no_grad():` (and import torch in {report_path(path)})",
                at=frame,
            )
        parents = wrapper.resolve(ParentNodeProvider)
        if grad_off_in(ancestors(parents, statement), imports.qualify) is not None:
            return self.decline(
                f"`{code}` at {_location(frame)} already runs under no_grad, yet autograd saw the in-place update",
                diagnosis="look for a torch.enable_grad() or set_grad_enabled(True) around this update",
                at=frame,
            )
        parent = parents[statement]
        body: Sequence[cst.BaseStatement] = parent.body if isinstance(parent, cst.IndentedBlock | cst.Module) else ()
        index = next((i for i, node in enumerate(body) if node is statement), None)
        if index is None:
            return self.decline(f"cannot find the block that holds `{code}` at {_location(frame)}")
        previous = body[index - 1] if index > 0 else None
        merge = previous is not None and _is_no_grad_block(previous, imports) and not statement.leading_lines
        others = len(body) - 1 - (1 if merge else 0)
        applicability = Applicability.SAFE if others == 0 else Applicability.UNSAFE
        recorded = next(
            (
                op for op in (_inplace_ops(evidence) if evidence else ())
                if op.get("leaf") and isinstance(op.get("site"), Mapping)
                and Path(op["site"]["file"]) == path and op["site"].get("line") == frame.line
            ),
            None,
        )
        tensor = (
            f"a leaf tensor {_shape_text(recorded.get('shape'))} that requires grad ({recorded.get('op')})"
            if recorded else "a leaf tensor that requires grad"
        )
        view = "a view of " if match.groupdict().get("view") else ""
        rest = "" if others == 0 else f"; the {others} other statement(s) of its block stay outside the block"
        if merge and previous is not None:
            block_code = one_line(module, cst.ensure_type(previous, cst.With).items[0].item)
            summary = (
                f"Moved {code} at {_location(frame)} into the `with {block_code}:` block above it: it "
                f"changes {view}{tensor} in place, which autograd allows only under no_grad"
            )
            extra: tuple[Span, ...] = (spans(wrapper)[previous],)
            rewrite: Rewrite = NoGradMerge()
        else:
            summary = (
                f"Wrapped {code} at {_location(frame)} in `with {no_grad}:`: it changes {view}{tensor} in "
                "place, which autograd allows only under no_grad"
            )
            extra = ()
            rewrite = NoGrad(no_grad)
        return Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=rewrite,
            summary=summary,
            applicability=applicability,
            evidence={
                "statement": code,
                "view_of_leaf": bool(view),
                "op": {k: recorded.get(k) for k in ("op", "shape", "dtype", "leaf", "version")} if recorded else None,
                "block_statements": len(body),
                "merged_into_no_grad_block": merge,
            },
            evidence_text=(
                f"the failing statement `{code}` at {_location(frame)} changes {view}{tensor} in place"
                + (" (traced)" if recorded else "") + rest
            ),
            notes=() if others == 0 else (
                "Only the failing update was put under no_grad; other updates in the same block may need it too.",
            ),
            extra_spans=extra,
        )


def _saving_assignment(wrapper: MetadataWrapper, saver: Frame, write: cst.Assign) -> cst.Assign | None:
    """The assignment of one target on its own line at ``saver`` (where autograd saved the
    tensor), earlier than the ``write`` into the buffer and in the same function."""
    found = statement_at(wrapper, saver.line)
    if found is None or len(found[0].body) != 1 or not isinstance(found[0].body[0], cst.Assign):
        return None
    assign = found[0].body[0]
    positions = spans(wrapper)
    if len(assign.targets) != 1 or positions[assign].line >= positions[write].line:
        return None
    parents = wrapper.resolve(ParentNodeProvider)

    def function(node: cst.CSTNode) -> cst.CSTNode | None:
        return next((a for a in ancestors(parents, node) if isinstance(a, cst.FunctionDef)), None)

    return assign if function(assign) is function(write) else None


def _sole_name_since_bound(wrapper: MetadataWrapper, write: cst.Assign, name: str) -> bool:
    """Whether ``name`` is the only name of its tensor at the masked ``write``: bound by an
    assignment of a call or an operator (a new tensor, not another name's) earlier in the same
    block, and between there and the write only an operand of comparisons and arithmetic (which
    make new tensors), never passed on, stored or viewed."""
    parents = wrapper.resolve(ParentNodeProvider)
    line = parents.get(write)
    block = parents.get(line) if isinstance(line, cst.SimpleStatementLine) else None
    body: Sequence[cst.BaseStatement] = block.body if isinstance(block, cst.IndentedBlock | cst.Module) else ()
    index = next((i for i, node in enumerate(body) if node is line), None)
    if index is None:
        return False

    def operand_only(node: cst.CSTNode, skip: cst.CSTNode | None = None) -> bool:
        for read in m.findall(node, m.Name(name)):
            parent = parents.get(read)
            if read is skip or (isinstance(parent, cst.Subscript) and parent is skip):
                continue
            if not isinstance(parent, cst.Comparison | cst.ComparisonTarget | cst.BinaryOperation | cst.UnaryOperation):
                return False
        return True

    subscript = write.targets[0].target
    if not operand_only(write, skip=subscript):
        return False
    for statement in reversed(body[:index]):
        small = statement.body if isinstance(statement, cst.SimpleStatementLine) else ()
        binding = next((
            s for s in small if isinstance(s, cst.Assign)
            and any(isinstance(t.target, cst.Name) and t.target.value == name for t in s.targets)
        ), None)
        if binding is not None:
            # an in-place call returns its receiver, which another name holds
            fresh = isinstance(binding.value, cst.BinaryOperation) or (
                isinstance(binding.value, cst.Call) and not _is_inplace_call(binding.value, ImportTable(wrapper.module))
            )
            return len(small) == 1 and len(binding.targets) == 1 and fresh
        if not operand_only(statement):
            return False
    return False


def _binding_keeps_meaning(parent: cst.CSTNode, receiver: cst.BaseExpression, module: cst.Module) -> bool:
    """Whether using the out-of-place result where the in-place one was used changes nothing.

    True when the result is bound back to the tensor's own name (``h = torch.relu_(h)``), when
    the modified tensor is a temporary nobody else holds (``F.relu(self.bn(x), inplace=True)``),
    or when a local is returned (``return x.relu_()``).
    """
    if not isinstance(receiver, cst.Name | cst.Attribute | cst.Subscript):
        return True
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return module.code_for_node(parent.targets[0].target) == module.code_for_node(receiver)
    return isinstance(parent, cst.Return) and isinstance(receiver, cst.Name)


def _short(record: object) -> str | None:
    if not isinstance(record, Mapping) or "file" not in record:
        return None
    return f"{report_path(str(record['file']))}:{record.get('line')}"


def _shape_text(shape: object) -> str:
    return f"[{', '.join(map(str, shape))}]" if isinstance(shape, list | tuple) else "[?]"
