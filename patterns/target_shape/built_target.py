"""Where the target is built: the expression that makes the target tensor from the data (in the
loss's function, a TensorDataset, a Dataset's ``__getitem__``), and whether every read of it
is blind to the unit dimension (so that the fix may move there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ParentNodeProvider

from repairbot.analysis import (
    Source,
    argument,
    assigned_value,
    is_torch_name,
    last_binding,
    name_reads,
    source,
    walk,
)
from repairbot.evidence import Evidence
from repairbot.provenance import (
    Context,
    KeyPath,
    Made,
    ProjectFile,
    Result,
    ValueWalk,
    project_sources,
)
from repairbot.sources import Sources
from repairbot.types import Failure, Frame

from .shapes import Squeeze

_MOVES = frozenset({"to", "cuda", "cpu", "float", "double"})  # the same values, shape kept


# Where a target tensor is built from the data (Python numbers, numpy arrays).
_TENSOR_FROM_DATA = (
    "torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.as_tensor", "torch.from_numpy",
)


@dataclass(frozen=True)
class Built:
    node: cst.BaseExpression  # the expression that builds the target tensor
    losses: int  # the loss calls its values reach as their target


def built_target(src: Source, loss: cst.Call, target: cst.BaseExpression, plan: Squeeze) -> Built | str | None:
    """The one expression of the loss's function (or module) that builds the target tensor, when
    what it builds is read only on the way to loss calls of the same callee: followed back from
    the target through moves, row slices and names; None when the fix belongs at the loss call,
    ``"already"`` when what builds it has that fix already."""
    if not isinstance(target, cst.Name) or plan.dim < 1:
        return None
    name, line = target.value, src.line(loss)
    for _ in range(8):
        event = last_binding(src, name, line)
        value = assigned_value(event.statement, name) if event is not None else None
        if event is None or value is None:
            return None
        line = src.line(event.statement)
        inner = _passed_through(value)
        if inner is not None:
            name = inner
            continue
        if _reshaped(value, plan) is not None:
            return "already"  # built with the very dimension fix: the source changed since the run
        if not _builds_from_data(src, value):
            return None  # computed (arithmetic, a reduction): its shape is the computation's, fixed at the loss
        owner = _scope_of(src, event.statement)
        reached: set[int] = set()
        # `y = torch.from_numpy(y)` reads the array it replaces: no read of the tensor
        rebuilt = {id(n) for n in walk(value)}
        if not _feeds_only(src, owner, name, loss, reached, set(), rebuilt) or id(loss) not in reached:
            return None
        return Built(value, len(reached))
    return None


def _builds_from_data(src: Source, value: cst.BaseExpression) -> bool:
    """Whether ``value`` builds a tensor from the data, then moves or casts it:
    ``torch.tensor(y)``, ``torch.from_numpy(y).float()``, ``torch.Tensor(y).to(device)``."""
    while (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES
        and isinstance(value.func.value, cst.Call)
    ):
        value = value.func.value
    return isinstance(value, cst.Call) and is_torch_name(src.imports.qualify(value.func), *_TENSOR_FROM_DATA)


@dataclass(frozen=True)
class Batched:
    built: cst.BaseExpression  # the expression that builds the whole target tensor
    file: ProjectFile
    dataset: cst.Call  # the TensorDataset that batches it
    index: int  # its position among the dataset's tensors


def tensor_dataset_target(
    failure: Failure, evidence: Evidence, sources: Sources, frame: Frame, loss: cst.Call,
    target: cst.BaseExpression, plan: Squeeze,
) -> Batched | str | None:
    """A batched target that is one tensor of a ``TensorDataset`` (followed back with
    ``ValueWalk``: the loop, the DataLoader, the dataset) built from the data in one place
    (``y_train = torch.from_numpy(y_train).float()``): fixed there, as the dataset indexes its
    first dimension only, when the built tensor is read only by that dataset, the dataset only
    by DataLoaders, each loader only by loops that unpack its items, and every such loop of the
    project reads that item only as this loss's target; ``"already"`` when it is built with
    the fix."""
    if not isinstance(target, cst.Name) or plan.dim != 1:
        return None
    datasets: list[tuple[cst.Call, int]] = []

    def at_call(
        values: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        if is_torch_name(qualified, "torch.utils.data.TensorDataset") and len(path) > 1 and path[1].kind == "index":
            datasets.append((call, int(path[1].value)))
            return None  # the walk's own rule takes the tensor
        if not path and _builds_from_data(ctx.file.src, call):
            return Made(call, ctx.file, trail, "built")
        fixed = _reshaped(call, plan)
        if not path and fixed is not None and _builds_from_data(ctx.file.src, fixed):
            return Made(call, ctx.file, trail, "already")
        if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
            return values.resolve(call.func.value, ctx, path, trail)
        return None

    result = ValueWalk(failure, evidence, sources, at_call).follow_name_at(frame, target.value)
    if not isinstance(result, Made) or len(datasets) != 1:
        return None
    if result.kind == "already":
        return "already"  # built with the very dimension fix: the source changed since the run
    dataset, position = datasets[0]
    file, built = result.file, result.call
    tensors = [a for a in dataset.args if a.keyword is None and not a.star]
    if file.enclosing(dataset, cst.FunctionDef) is not file.enclosing(built, cst.FunctionDef) \
            or len(tensors) != len(dataset.args) or not 0 <= position < len(tensors):
        return None
    if tensors[position].value is not built:
        statement = file.parents.get(built)
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 \
                or not isinstance(statement.targets[0].target, cst.Name):
            return None
        name = statement.targets[0].target.value
        rebuilt = {id(n) for n in walk(built)}
        owner = _scope_of(file.src, statement)
        reads = [r for r in _reads_of(owner, name) if id(r) not in rebuilt and not _in_target(file.parents, r)]
        if not reads or any(r is not tensors[position].value and not _in_len(file.parents, r) for r in reads):
            return None
    if not _read_only_by_loops(file, dataset, len(tensors)):
        return None
    loss_src = source(sources, frame.file)
    if loss_src is None or not _loops_read_only_as_target(sources, loss_src, loss, len(tensors), position):
        return None
    return Batched(built, file, dataset, position)


def _in_len(parents: Mapping[cst.CSTNode, cst.CSTNode], read: cst.Name) -> bool:
    arg = parents.get(read)
    call = parents.get(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"


def _read_only_by_loops(file: ProjectFile, dataset: cst.Call, arity: int) -> bool:
    """Whether a dataset is read only by DataLoaders (directly or by name), and each loader
    only by ``for`` loops that unpack ``arity`` values from its items (or by ``len()``)."""
    parents = file.parents
    loaders: list[cst.Call] = []
    for made in _bound_uses(file, dataset):
        arg = parents.get(made)
        loader = parents.get(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(loader, cst.Call) or not is_torch_name(file.src.imports.qualify(loader.func), "torch.utils.data.DataLoader") \
                or argument(loader, 0, "dataset") is not arg:
            return False
        loaders.append(loader)
    for loader in loaders:
        for used in _bound_uses(file, loader):
            loop: cst.CSTNode | None = parents.get(used)
            if isinstance(loop, cst.Arg):  # enumerate(loader), tqdm(loader)
                loop = parents.get(parents.get(loop) or loop)
            names = _unpacked(loop) if isinstance(loop, cst.For) else None
            if names is None or len(names) != arity:
                return False
    return bool(loaders)


def _bound_uses(file: ProjectFile, value: cst.Call) -> list[cst.BaseExpression]:
    """Where a call's value is used: the call itself as an argument, or the reads of the one
    name it is assigned to (``len()`` left out); a binding of another form gives no uses."""
    statement = file.parents.get(value)
    if not isinstance(statement, cst.Assign):
        return [value]
    if len(statement.targets) != 1 or not isinstance(statement.targets[0].target, cst.Name):
        return []
    name = statement.targets[0].target.value
    owner = _scope_of(file.src, statement)
    return [
        r for r in _reads_of(owner, name)
        if not _in_target(file.parents, r) and not _in_len(file.parents, r)
    ]


def _reshaped(value: cst.BaseExpression, plan: Squeeze) -> cst.BaseExpression | None:
    """The receiver of ``value`` when it ends in the method this fix adds (``.unsqueeze(1)``)."""
    method = "unsqueeze" if plan.role == "input" else "squeeze"
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == method \
            and len(value.args) == 1 and _is_integer(value.args[0].value, plan.dim):
        return value.func.value
    return None


def dataset_item(
    failure: Failure, evidence: Evidence, sources: Sources, frame: Frame, loss: cst.Call,
    target: cst.BaseExpression, plan: Squeeze,
) -> tuple[cst.Call, ProjectFile, bool] | str | None:
    """A batched target made per sample in a Dataset's ``__getitem__`` by ``torch.tensor(value)``
    (followed back with ``ValueWalk``: the loop, the DataLoader, the Dataset), when a one-element
    list there (``[value]``, or its removal) gives the batch the unit dimension at axis 1 the
    other side has, and every loop of the project that unpacks such items reads that one only as
    this loss's target. The call, its file, and whether to wrap (else unwrap); ``"already"``
    when the item is made that way already."""
    if not isinstance(target, cst.Name) or plan.dim != 1:
        return None
    values = ValueWalk(failure, evidence, sources, _at_item_call)
    result = values.follow_name_at(frame, target.value)
    if not isinstance(result, Made) or values.getitem is None:
        return None
    file, returned = values.getitem
    elements = returned.value.elements if isinstance(returned.value, cst.Tuple) else ()
    position = next((i for i, e in enumerate(elements) if e.value is result.call), None)
    data = argument(result.call, 0, "data")
    if position is None or data is None or any(a.star for a in result.call.args):
        return None
    one = isinstance(data.value, cst.List) and len(data.value.elements) == 1
    wrap = plan.role == "input"  # the batch lacks the unit dimension the prediction has
    if wrap and one:
        return "already"  # made a one-element list already: the source changed since the run
    if wrap == one:
        return None
    loss_src = source(sources, frame.file)
    if loss_src is None or not _loops_read_only_as_target(sources, loss_src, loss, len(elements), position):
        return None
    return result.call, file, wrap


def _at_item_call(
    walk: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
) -> Result | None:
    """The walk ends at a tensor made from a sample's data; a move passes through."""
    func = call.func
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value in _MOVES:
        return walk.resolve(func.value, ctx, path, trail)
    if not path and is_torch_name(qualified, "torch.tensor", "torch.as_tensor"):
        return Made(call, ctx.file, trail, "item")
    return None


def _loops_read_only_as_target(sources: Sources, src: Source, loss: cst.Call, arity: int, position: int) -> bool:
    """Whether every loop of the project's files that unpacks items of ``arity`` values (directly,
    or under ``enumerate``) reads value ``position`` only as the target of the failing loss's
    callee, and no item is taken otherwise (``next(...)``); the failing loss among them."""
    reached: set[int] = set()
    for each in project_sources(sources, src):
        nodes = list(walk(each.module))
        if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "next" for n in nodes):
            return False
        loops = [n for n in nodes if isinstance(n, cst.For)]
        for loop in loops:
            names = _unpacked(loop)
            if names is None or len(names) != arity:
                continue
            name = names[position]
            if name is None or not _feeds_only(each, _scope_of(each, loop), name, loss, reached, set()):
                return False
    return id(loss) in reached


def _unpacked(loop: cst.For) -> list[str | None] | None:
    """The names a loop's tuple target unpacks (``x, y``, or ``i, (x, y)`` under enumerate)."""
    target = loop.target
    if isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Tuple) \
            and isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Name) and loop.iter.func.value == "enumerate":
        target = target.elements[1].value
    if not isinstance(target, cst.Tuple | cst.List) or any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    return [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]


def _passed_through(value: cst.BaseExpression) -> str | None:
    """The name whose tensor ``value`` passes on with its dimensions: ``y``, ``y.to(device)``,
    ``y.float()``, a row slice ``y[:n]``."""
    if isinstance(value, cst.Name):
        return value.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _MOVES:
        return _passed_through(value.func.value) if isinstance(value.func.value, cst.Name) else None
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and len(value.slice) == 1 \
            and isinstance(value.slice[0].slice, cst.Slice):
        return value.value.value
    return None


def _scope_of(src: Source, node: cst.CSTNode) -> cst.CSTNode:
    parents = src.wrapper.resolve(ParentNodeProvider)
    current = parents.get(node)
    while current is not None and not isinstance(current, cst.FunctionDef):
        current = parents.get(current)
    return current if current is not None else src.module


def _feeds_only(
    src: Source, owner: cst.CSTNode, name: str, loss: cst.Call, reached: set[int], seen: set[str],
    skipped: frozenset[int] | set[int] = frozenset(),
) -> bool:
    """Whether every read of ``name`` in ``owner`` (but those of nodes in ``skipped``) is the
    target of a loss call of the failing call's callee (added to ``reached``), ``len()``, or
    passes its tensor on (a move, a row slice) to a plain name whose reads are such in turn."""
    if name in seen:
        return True
    seen.add(name)
    parents = src.wrapper.resolve(ParentNodeProvider)
    callee = src.module.code_for_node(loss.func)
    for read in _reads_of(owner, name):
        parent = parents.get(read)
        if id(read) in skipped or _in_target(parents, read):
            continue  # a binding, not a read
        if isinstance(parent, cst.Arg):
            call = parents.get(parent)
            if not isinstance(call, cst.Call):
                return False
            if argument(call, 1, "target") is parent and src.module.code_for_node(call.func) == callee:
                reached.add(id(call))
                continue
            if isinstance(call.func, cst.Name) and call.func.value == "len":
                continue
            if _blind_in_function(src, call, parent, seen):
                continue
            return False
        passed: cst.CSTNode = read
        while not isinstance(parents.get(passed), cst.Assign | cst.Element):
            above = parents.get(passed)
            if not isinstance(above, cst.Attribute | cst.Call | cst.Subscript | cst.SubscriptElement | cst.Index
                              | cst.Slice | cst.Arg):
                return False
            passed = above
        if not isinstance(passed, cst.BaseExpression) or _passed_through(passed) != name:
            return False
        statement = parents.get(passed)
        if isinstance(statement, cst.Element):
            statement = parents.get(parents.get(statement) or statement)
        bound = _names_bound_to(statement, passed) if isinstance(statement, cst.Assign) else None
        if bound is None or not _feeds_only(src, owner, bound, loss, reached, seen):
            return False
    return True


# Reads of a tensor whose result does not depend on a unit dimension after the batch axis.
_FLATTENS = frozenset({"view", "reshape"})  # with the one argument -1


def _blind_in_function(src: Source, call: cst.Call, arg: cst.Arg, seen: set[str]) -> bool:
    """Whether a module-level function of the file that gets the target as an argument reads
    that parameter only shape-blind: flattened (``.view(-1)``, ``.reshape(-1)``, ``.flatten()``),
    its batch size (``.size(0)``, ``.shape[0]``, ``len()``)."""
    if not isinstance(call.func, cst.Name) or arg.star:
        return False
    functions = [f for f in src.module.body if isinstance(f, cst.FunctionDef) and f.name.value == call.func.value]
    if len(functions) != 1:
        return False
    params = [p.name.value for p in functions[0].params.params]
    if arg.keyword is not None:
        param = arg.keyword.value
    else:
        position = [a for a in call.args if a.keyword is None].index(arg)
        param = params[position] if position < len(params) else ""
    if param not in params or functions[0].name.value in seen:
        return False
    parents = src.wrapper.resolve(ParentNodeProvider)
    return all(_shape_blind(parents, read) for read in _reads_of(functions[0], param))


def _shape_blind(parents: Mapping[cst.CSTNode, cst.CSTNode], read: cst.Name) -> bool:
    above = parents.get(read)
    if isinstance(above, cst.Arg):
        call = parents.get(above)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"
    if not isinstance(above, cst.Attribute) or above.value is not read:
        return False
    call = parents.get(above)
    method = above.attr.value
    if isinstance(call, cst.Call) and call.func is above:
        given = [a.value for a in call.args]
        if method in _FLATTENS:
            return len(given) == 1 and isinstance(given[0], cst.UnaryOperation) and _is_integer(given[0].expression, 1)
        if method == "flatten":
            return not given
        return method == "size" and len(given) == 1 and _is_integer(given[0], 0)
    if method == "shape" and isinstance(call, cst.SubscriptElement | cst.Subscript):
        subscript = call if isinstance(call, cst.Subscript) else parents.get(call)
        if isinstance(subscript, cst.Subscript) and len(subscript.slice) == 1:
            index = subscript.slice[0].slice
            return isinstance(index, cst.Index) and _is_integer(index.value, 0)
    return False


def _is_integer(node: cst.BaseExpression, value: int) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value == value


def _names_bound_to(assign: cst.Assign, value: cst.BaseExpression) -> str | None:
    """The plain name an assignment binds ``value`` (or its tuple element) to."""
    if len(assign.targets) != 1:
        return None
    bound = assign.targets[0].target
    if assign.value is value:
        return bound.value if isinstance(bound, cst.Name) else None
    if isinstance(bound, cst.Tuple | cst.List) and isinstance(assign.value, cst.Tuple | cst.List) \
            and len(bound.elements) == len(assign.value.elements):
        for left, right in zip(bound.elements, assign.value.elements, strict=True):
            if right.value is value:
                return left.value.value if isinstance(left.value, cst.Name) else None
    return None


def _in_target(parents: Mapping[cst.CSTNode, cst.CSTNode], node: cst.CSTNode) -> bool:
    """Whether a name is bound where it stands: in an assignment's target or a loop's."""
    child, current = node, parents.get(node)
    while current is not None:
        if isinstance(current, cst.AssignTarget):
            return True
        if isinstance(current, cst.For):
            return current.target is child
        if isinstance(current, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            return False
        child, current = current, parents.get(current)
    return False


def _reads_of(owner: cst.CSTNode, name: str) -> list[cst.Name]:
    """The reads of ``name`` in a function's body (its parameters left out) or a module."""
    return name_reads(owner.body if isinstance(owner, cst.FunctionDef) else owner, name)
