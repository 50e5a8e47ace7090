"""Where the in-place op is in the source: which calls write in place (torch's ``inplace``
arguments, the methods without an out-of-place twin), the op's node at a traced frame, its
statement, the no_grad blocks around it, and the reads and bindings a fix must keep the
meaning of.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    ancestors,
    is_torch_name,
    keyword_arg,
    place_in,
    positional_args,
    spans,
)
from repairbot.sources import report_path
from repairbot.torch_semantics import NO_GRAD, is_inplace_method
from repairbot.types import Frame, Span

# Where each function of torch.nn.functional and each torch.nn module takes ``inplace`` when it
# is passed by position (checked against torch 2.13's signatures).
FUNCTIONAL_INPLACE = {
    "relu": 1, "relu6": 1, "selu": 1, "silu": 1, "mish": 1, "hardswish": 1, "hardsigmoid": 1,
    "elu": 2, "celu": 2, "leaky_relu": 2, "hardtanh": 3, "threshold": 3, "rrelu": 4,
    "dropout": 3, "alpha_dropout": 3, "feature_alpha_dropout": 3, "dropout1d": 3, "dropout2d": 3,
    "dropout3d": 3,
}


MODULE_INPLACE = {
    "ReLU": 0, "ReLU6": 0, "SELU": 0, "SiLU": 0, "Mish": 0, "Hardswish": 0, "Hardsigmoid": 0,
    "ELU": 1, "CELU": 1, "LeakyReLU": 1, "Hardtanh": 2, "Threshold": 2, "RReLU": 2,
    "Dropout": 1, "Dropout1d": 1, "Dropout2d": 1, "Dropout3d": 1, "AlphaDropout": 1,
    "FeatureAlphaDropout": 1,
}


# In-place methods whose name without the underscore is missing or means something else
# (``requires_grad`` is an attribute; ``bernoulli()`` samples from self, ``bernoulli_(p)`` from
# p). Every other ``x.op_()`` of torch 2.13 has an out-of-place ``x.op()`` with the same
# arguments and result.
NO_TWIN = frozenset({
    "apply_", "as_strided_", "bernoulli_", "cauchy_", "copy_", "embedding_renorm_", "exponential_",
    "fill_", "fill_diagonal_", "geometric_", "log_normal_", "map2_", "map_", "normal_", "random_",
    "requires_grad_", "resize_", "resize_as_", "resize_as_sparse_", "set_", "share_memory_",
    "sparse_resize_", "sparse_resize_and_clear_", "uniform_", "zero_",
})


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
    position = FUNCTIONAL_INPLACE.get(qualified.rsplit(".", 1)[-1])
    return (
        position is not None and is_torch_name(qualified, f"torch.nn.functional.{qualified.rsplit('.', 1)[-1]}")
        and len(positional_args(node)) > position
    )


def is_true(node: cst.BaseExpression) -> bool:
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


def no_grad_call(imports: ImportTable) -> str | None:
    """``torch.no_grad()`` under the name the file gives torch (``th.no_grad()``, ``no_grad()``)."""
    for local, full in sorted(imports.aliases.items()):
        if full == "torch":
            return f"{local}.no_grad()"
    for local, full in sorted(imports.aliases.items()):
        if full in NO_GRAD:
            return f"{local}()"
    return None


def is_no_grad_block(node: cst.CSTNode, imports: ImportTable) -> bool:
    if not isinstance(node, cst.With) or len(node.items) != 1 or node.items[0].asname is not None:
        return False
    item = node.items[0].item
    return (
        isinstance(item, cst.Call) and not item.args and is_torch_name(imports.qualify(item.func), *NO_GRAD)
        and isinstance(node.body, cst.IndentedBlock)
    )


def is_inplace_statement(statement: cst.BaseSmallStatement, imports: ImportTable) -> bool:
    """Does this statement itself change a tensor in place (not some function it calls)?"""
    if isinstance(statement, cst.AugAssign) or _setitem_targets(statement):
        return True
    return any(_is_inplace_call(call, imports) for call in m.findall(statement, m.Call()))


def location(frame: Frame) -> str:
    return f"{place_in(Path(frame.file), frame.line)}"


def saving_assignment(wrapper: MetadataWrapper, saver: Frame, write: cst.Assign) -> cst.Assign | None:
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


def sole_name_since_bound(wrapper: MetadataWrapper, write: cst.Assign, name: str) -> bool:
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


def binding_keeps_meaning(parent: cst.CSTNode, receiver: cst.BaseExpression, module: cst.Module) -> bool:
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


def short(record: object) -> str | None:
    if not isinstance(record, Mapping) or "file" not in record:
        return None
    return f"{report_path(str(record['file']))}:{record.get('line')}"


def shape_words(shape: object) -> str:
    return f"[{', '.join(map(str, shape))}]" if isinstance(shape, list | tuple) else "[?]"
