"""view-noncontiguous: ``.view()`` of a tensor whose memory layout cannot be viewed that way."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    ImportTable,
    Source,
    call_at,
    calls_on_line,
    enclosing,
    one_line,
    place,
    shape_text,
    spans,
    walk,
)
from repairbot.codemod import method_call
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import (
    Context,
    KeyPath,
    Made,
    ProjectFile,
    Result,
    ValueWalk,
    integer_value,
    own_nodes,
    parameter_names,
    project_sources,
)
from repairbot.sources import Sources
from repairbot.torch_semantics import is_inplace_method
from repairbot.types import Applicability, Decline, Failure, Frame, Span

# Tensor methods whose result may share memory with the tensor they are called on (a write
# through the result can reach it); any other method's result is taken as a fresh tensor.
_SHARING = frozenset({
    "t", "transpose", "permute", "view", "view_as", "narrow", "select", "expand", "expand_as", "unsqueeze",
    "squeeze", "swapaxes", "swapdims", "movedim", "diagonal", "unfold", "as_strided", "detach", "unflatten",
    "reshape", "reshape_as", "flatten", "contiguous", "to", "type_as", "float", "double", "half", "long", "int",
})
# ``.view(...)`` and its sibling ``.view_as(other)``, with the method that copies when it must.
_RESHAPE = {"view": "reshape", "view_as": "reshape_as"}


@dataclass(frozen=True)
class ViewToReshape(Rewrite):
    """Renames the method of the one ``.view``/``.view_as`` call at the site."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        call = nodes.node(cst.Call)
        if not isinstance(call.func, cst.Attribute) or call.func.attr.value not in _RESHAPE:
            raise EditError("not a .view/.view_as call")
        renamed = call.func.attr.with_changes(value=_RESHAPE[call.func.attr.value])
        return [Edit(call, call.with_changes(func=call.func.with_changes(attr=renamed)))]


@dataclass(frozen=True)
class MakeContiguous(Rewrite):
    """Appends ``.contiguous()`` to the expression at the site: where the layout is made."""

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        made = nodes.node(cst.BaseExpression)
        above = nodes.parent(made)
        if isinstance(above, cst.Attribute) and above.value is made and above.attr.value == "contiguous":
            raise EditError("made contiguous there already")
        return [Edit(made, method_call(made, "contiguous"))]


class ViewNoncontiguous(Pattern):
    """Replaces the failing ``.view(...)`` with ``.reshape(...)``, which copies when the layout needs it.

    What it fixes:
        ``.view(...)`` on a tensor whose elements are not laid out in memory the way the new
        shape needs: after ``.transpose()``, ``.permute()``, ``.t()``, a strided slice, or on
        the output of an RNN with ``batch_first``. The classic one is a flatten in ``forward``
        (``x.transpose(1, 2).view(b, -1)``) and the top-k accuracy helper of many training
        scripts (``correct[:k].view(-1)``, broken since torch 1.7).

    Why it fails:
        ``view`` never copies: it reinterprets the same memory with new sizes and strides, which
        is impossible when a new dimension would have to span two separate runs of memory.
        ``RuntimeError: view size is not compatible with input tensor's size and stride (at
        least one dimension spans across two contiguous subspaces). Use .reshape(...)
        instead.`` (0.4: ``invalid argument 2: ... Call .contiguous() before .view().``).

    Example:
        ``feats = x.transpose(1, 2).view(b, -1)`` becomes ``feats = x.transpose(1, 2).reshape(b,
        -1)``; ``correct[:k].view(-1).float().sum(0)`` becomes ``correct[:k].reshape(-1).float()
        .sum(0)``. Only the call the traceback points at (its traced columns) is changed, never
        another ``.view`` of the file; ``.view_as(y)`` becomes ``.reshape_as(y)``. A batch made
        non-contiguous in a helper of the project and returned (``get_batch()`` returning
        ``source[:, i:j].t()``, then ``targets.view(-1)`` at the training and the evaluation
        loss), followed back from the failing view through the helper's return, gets one
        ``.contiguous()`` where the helper makes it (``source[:, i:j].t().contiguous()``), so
        every view of it at every caller works; the reshape at the failing view stays the
        alternative. Not when the layout is made from an attribute or a global (its memory
        outlives the call), nor when the helper or a caller writes into the batch in place
        (``targets[targets == 0] = 1`` reaches the tensor it shares memory with, which a copy
        would stop): the fix is then at the view.

    Fix safety:
        Safe: ``reshape`` returns the same view whenever one exists and a copy otherwise, with
        the same values in the same order. The one difference is aliasing: writes into a copy
        do not reach the original tensor. A ``.view`` written through on the spot
        (``x.t().view(-1)[0] = 1``, ``.view(-1).zero_()``, ``out=x.view(-1)``) is declined, and
        so is a result assigned to a name and written in place later in the same function when
        that write could be seen through the viewed tensor (an attribute, a parameter, or a name
        read again after the write): reshape would silently change what the code computes.
        Written later into a view of a fresh tensor no one reads again, the fix is unsafe, with
        a note.

    Not handled:
        A view whose sizes regroup the dimensions of the tensor's traced shape instead of
        merging or splitting neighbours (``(b, h, w, c)`` viewed as ``(b, c, h * w)``): the
        sizes are the bug, and reshape would run with the values scrambled; declined with the
        diagnosis. A view taken inside a library (the failing user line calls into another package): the
        remedy is to pass a contiguous tensor. Several ``.view`` calls on one line without
        traced columns (a log from Python < 3.11): which one failed is unknown. Aliasing
        is followed through local assignments (``cells = grid.t() if flag else grid``), not
        through other functions.
    """

    ID = "view-noncontiguous"
    TITLE = "Tensor.view() on a non-contiguous tensor"
    TAGS = frozenset({"shape", "memory-layout"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        # 0.4's "invalid argument 2: ... Call .contiguous() before .view()" and the current
        # "... Use .reshape(...) instead." share this sentence.
        signature(
            ("RuntimeError",),
            phrase("view size is not compatible with input tensor's size and stride"),
        ),
    )
    EVIDENCE = frozenset({"locals"})
    # A dimension of size 1 has no stride constraint, so a view that fails at the forced
    # batch of 2 may work at a script's own batch of 1: confirm before editing.
    BATCH_INVARIANT = False
    REWRITES = (ViewToReshape, MakeContiguous)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline("the view is taken inside a library, not in the project's code")
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        where = place(frame)
        found = _failing_view(wrapper, frame)
        if isinstance(found, str):
            return self.decline(
                found,
                diagnosis=(
                    "pass that function a contiguous tensor (`.contiguous()`), or replace the `.view` it "
                    "calls with `.reshape`"
                ) if found.startswith("the failing call") else None,
                at=frame,
            )
        call, span = found
        func = call.func
        assert isinstance(func, cst.Attribute)
        method = func.attr.value
        parents = wrapper.resolve(ParentNodeProvider)
        written = _written_on_the_spot(call, parents)
        if written is not None:
            return self.decline(
                f"the result of `{one_line(module, call)}` at {where} is written in place ({written}): with "
                f".{_RESHAPE[method]}() the write would go into a copy and no longer reach the original tensor",
                diagnosis=(
                    "make the tensor contiguous where it is created (`.contiguous()` after the transpose or "
                    "permute) so that the view and the write both work"
                ),
                at=frame,
            )
        receiver = one_line(module, func.value)
        scope = evidence.scope(frame) if evidence else Scope()
        regrouped = _regrouped_shapes(call, scope) if method == "view" else None
        if regrouped is not None:
            logical, target = regrouped
            return self.decline(
                f"`{one_line(module, call)}` at {where} asks for {shape_text(target)} from a tensor whose shape is "
                f"{shape_text(logical)} (traced): that regroups its dimensions instead of merging or splitting "
                "neighbouring ones, so the sizes are what is wrong, not only the layout; .reshape would run and "
                "scramble the values",
                diagnosis=(
                    "put the dimensions in the order you want first (`.permute`/`.transpose`), then merge or split "
                    "neighbours: for example `x.permute(0, 3, 1, 2).reshape(b, c, h * w)`"
                ),
                at=frame,
            )
        traced = _traced_receiver(scope, func.value)
        later = _written_later(wrapper, parents, call)
        notes: tuple[str, ...] = ()
        applicability = self.APPLICABILITY
        if later is not None:
            name, line = later
            seen = _base_seen_after(wrapper, parents, call, line)
            if seen is not None:
                return self.decline(
                    f"`{name}` = `{one_line(module, call)}` at {where} is written in place at {path.name}:{line}, and "
                    f"{seen}: the code expects that write to reach the tensor the view was taken from, which "
                    f".{_RESHAPE[method]}() would silently stop (a copy)",
                    diagnosis=(
                        "a view of this layout cannot exist: write into the original tensor directly (for "
                        "example through the transposed view before flattening), or copy on purpose and use the "
                        "copy afterwards"
                    ),
                    at=frame,
                )
            applicability = Applicability.UNSAFE
            notes = (
                f"`{name}` is written in place at {path.name}:{line}: with .{_RESHAPE[method]}() it is a copy, so "
                "that write no longer changes the tensor it was taken from.",
            )
        shown = receiver if len(receiver) <= 40 else "the tensor"
        layout = f"; {traced}" if traced else ""
        at_view = Site(
            pattern=self.ID,
            file=str(path),
            span=span,
            rewrite=ViewToReshape(),
            summary=(
                f"Changed .{method}(...) to .{_RESHAPE[method]}(...) on {shown} at {where}: its memory layout "
                f"cannot be viewed with the new shape, {_RESHAPE[method]} copies it when it must"
            ),
            applicability=applicability,
            evidence={
                "call": one_line(module, call),
                "at": where,
                "receiver": receiver,
                "traced_receiver": traced,
                "message": "view size is not compatible with input tensor's size and stride",
                "written_later": {"name": later[0], "line": later[1]} if later else None,
            },
            evidence_text=(
                f"the traceback points at `{one_line(module, call)}` ({where}, traced columns) and torch "
                f"refused the view: at least one dimension spans two contiguous subspaces{layout}"
            ),
            notes=notes,
        )
        helper = (
            _made_in_helper(failure, evidence, sources, frame, call)
            if evidence is not None and later is None else None
        )
        if helper == "already":
            return self.decline(
                f"the tensor `{receiver}` viewed at {where} is made contiguous where it is made; the source changed "
                "since the traced run"
            )
        if not isinstance(helper, _Helper):
            return at_view
        made_at = helper.file.where(helper.made)
        made_code = helper.file.code(helper.made)
        return Site(
            pattern=self.ID,
            file=str(helper.file.path),
            span=helper.file.src.positions[helper.made],
            rewrite=MakeContiguous(),
            summary=(
                f"Added .contiguous() where {helper.function}() makes the tensor at {made_at} (`{made_code}`): "
                f"`{one_line(module, call)}` at {where} cannot view its layout, and every caller of "
                f"{helper.function}() gets it contiguous, so no view of it needs a copy of its own"
            ),
            applicability=self.APPLICABILITY,
            evidence={
                **at_view.evidence, "made_at": made_at, "made": made_code, "helper": helper.function,
                "callers": helper.callers, "fixed_at": "helper",
            },
            evidence_text=(
                f"{at_view.evidence_text}; `{receiver}` is followed back to `{made_code}` in {helper.function}() "
                f"({made_at}), returned to {helper.callers} call site(s) of which none writes into it in place: "
                ".contiguous() there changes the layout only, never the values"
            ),
            alternatives=(at_view,),
        )


# --------------------------------------------------------------------------------------------
# Where the layout is made: a helper that returns it

# The methods that give a tensor a layout a view may not take (a permutation of its strides).
_LAYOUT = frozenset({"t", "transpose", "permute", "swapaxes", "swapdims", "movedim"})


@dataclass(frozen=True)
class _Helper:
    made: cst.Call  # the ``.transpose(...)`` / ``.t()`` that makes the layout
    file: ProjectFile
    function: str  # the helper that returns it
    callers: int  # its call sites in the project


def _made_in_helper(
    failure: Failure, evidence: Evidence, sources: Sources, frame: Frame, view: cst.Call
) -> _Helper | str | None:
    """The layout change (``batch[:, 1:].t()``) that made the viewed tensor, when it is made in
    another function of the project that returns it (``x, y = get_batch(...)``), followed back
    with ``ValueWalk``: one ``.contiguous()`` there serves every view of it at every caller.
    None when the tensor comes from ``self`` or a global (its storage outlives the call), or
    the helper or any caller writes into it in place (the write must reach the storage it
    shares, which a copy would stop); ``"already"`` when it is made contiguous there."""
    assert isinstance(view.func, cst.Attribute)
    receiver = _rows_of(view.func.value)
    if receiver is None:
        return None

    def at_call(
        values: ValueWalk, call: cst.Call, qualified: str | None, ctx: Context, path: KeyPath, trail: tuple[str, ...]
    ) -> Result | None:
        if not path and qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _LAYOUT:
            return Made(call, ctx.file, trail, "layout")
        if not path and qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value == "contiguous":
            return Made(call, ctx.file, trail, "contiguous")
        if qualified is None and isinstance(call.func, cst.Attribute) and call.func.attr.value in _MOVES:
            return values.resolve(call.func.value, ctx, path, trail)  # a copy to a device keeps the layout
        return None

    values = ValueWalk(failure, evidence, sources, at_call)
    result = values.follow_name_at(frame, receiver.value)
    if not isinstance(result, Made):
        return None
    if result.kind == "contiguous":
        return "already"  # made contiguous where it is made: the source changed since the run
    file, made = result.file, result.call
    if not _whole_value(file, made):
        return None  # sliced or indexed after the layout change: a .contiguous() there would not reach the view
    helper = file.enclosing(made, cst.FunctionDef)
    if not isinstance(helper, cst.FunctionDef) or helper.name.value == frame.function:
        return None
    roots = _roots(made)
    if not roots or "self" in roots or not all(root in parameter_names(helper) or _local_of(helper, root) for root in roots):
        return None  # made from an attribute or a global: its storage outlives the call
    bound = _bound_names(helper)
    if any(_writes_name(node, name) for node in own_nodes(helper) for name in bound):
        return None
    callers = _callers_write_nothing(sources, file.src, helper.name.value)
    if callers is None:
        return None
    return _Helper(made, file, helper.name.value, callers)


# Copies to a device or dtype keep a tensor's layout (its strides), so they pass the walk on.
_MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "long", "int"})


def _rows_of(receiver: cst.BaseExpression) -> cst.Name | None:
    """The name a view's receiver is, or whose rows it slices (``source[i + 1:i + 1 + n]``): a
    slice of the first dimension of a contiguous tensor is contiguous, so making the named
    tensor contiguous makes the receiver so."""
    if isinstance(receiver, cst.Name):
        return receiver
    if isinstance(receiver, cst.Subscript) and isinstance(receiver.value, cst.Name) and len(receiver.slice) == 1:
        first = receiver.slice[0].slice
        if isinstance(first, cst.Slice) and first.step is None:
            return receiver.value
    return None


def _whole_value(file: ProjectFile, made: cst.Call) -> bool:
    """Whether the layout change is what its statement binds or returns, not a part of it that
    is sliced or indexed further (``batch.trg.transpose(0, 1)[:, 1:]``)."""
    parent = file.parents.get(made)
    if isinstance(parent, cst.Element):
        parent = file.parents.get(parent)
        if not isinstance(parent, cst.Tuple):
            return False
        parent = file.parents.get(parent)
    return isinstance(parent, cst.Assign | cst.Return)


def _local_of(function: cst.FunctionDef, name: str) -> bool:
    return name in _bound_names(function)


def _bound_names(function: cst.FunctionDef) -> set[str]:
    """The plain names a function's own assignments bind (tuple targets included)."""
    return {name for node in own_nodes(function) if isinstance(node, cst.AssignTarget) for name in _target_names(node.target)}


def _target_names(target: cst.BaseExpression) -> list[str]:
    """``y`` of ``y = ...``, ``x`` and ``y`` of ``x, y = ...``."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, cst.Tuple | cst.List):
        return [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
    return []


def _callers_write_nothing(sources: Sources, src: Source, helper: str) -> int | None:
    """How many calls of ``helper`` the project's files make, when none of the names bound to
    its result is written in place in the caller's scope; None when one is (or no call is
    found: the walk came through one)."""
    count = 0
    for each in project_sources(sources, src):
        parents = each.wrapper.resolve(ParentNodeProvider)
        for node in walk(each.module):
            if not isinstance(node, cst.Call):
                continue
            func = node.func
            name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
            if name != helper:
                continue
            count += 1
            assign = parents.get(node)
            if not isinstance(assign, cst.Assign):
                continue
            owner = enclosing(parents, assign, cst.FunctionDef) or each.module
            names = [name for target in assign.targets for name in _target_names(target.target)]
            if any(_writes_name(found, bound) for found in _walk(owner) for bound in names):
                return None
    return count or None


# --------------------------------------------------------------------------------------------
# The failing call


def _is_view_call(node: cst.CSTNode) -> bool:
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _RESHAPE
    )


def _failing_view(wrapper: MetadataWrapper, frame: Frame) -> tuple[cst.Call, Span] | str:
    """The ``.view`` call the frame was executing, or why there is none to change."""
    where = place(frame)
    if frame.col is not None:
        located = call_at(wrapper, frame.line, frame.col, frame.end_line, frame.end_col)
        if located is None:
            return f"no call at the traced position {where}:{frame.col}: the source changed since the run"
        node, span = located.node, located.span
        if _is_view_call(node):
            return cst.ensure_type(node, cst.Call), span
        shown = one_line(wrapper.module, node)
        if isinstance(node, cst.Call) and _is_torch_class_view(wrapper, node):
            return f"the view at {where} is called as an unbound method (`{shown}`), not on a tensor"
        return (
            f"the failing call `{shown}` at {where} is not a .view() method call: the view is taken inside "
            "the function it calls"
        )
    views = [c for c in calls_on_line(wrapper, frame.line) if _is_view_call(c.node)]
    if len(views) == 1:
        return cst.ensure_type(views[0].node, cst.Call), views[0].span
    if not views:
        return (
            f"the failing call at {where} is not a .view() method call: the view is taken inside the "
            "function it calls"
        )
    return (
        f"{len(views)} .view() calls on {where} and no traced columns to tell which one failed "
        "(a traceback from Python < 3.11)"
    )


def _is_torch_class_view(wrapper: MetadataWrapper, call: cst.Call) -> bool:
    """``torch.Tensor.view(x, -1)``: the method taken from the class."""
    if not isinstance(call.func, cst.Attribute):
        return False
    qualified = ImportTable(wrapper.module).qualify(call.func.value)
    return qualified == "torch.Tensor"


# --------------------------------------------------------------------------------------------
# Aliasing: writes through the view


def _written_on_the_spot(call: cst.Call, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> str | None:
    """How the view's result is written in place in the same expression, if it is."""
    parent = parents.get(call)
    if isinstance(parent, cst.Attribute) and parent.value is call and is_inplace_method(parent.attr.value):
        return f".{parent.attr.value}()"
    if isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "out":
        return "out="
    node: cst.CSTNode = call
    while isinstance(parent, cst.Subscript) and parent.value is node:
        holder = parents.get(parent)
        if isinstance(holder, cst.AssignTarget | cst.AugAssign) and holder.target is parent:
            return "an item assignment"
        if isinstance(holder, cst.Attribute) and holder.value is parent and is_inplace_method(holder.attr.value):
            return f"[...].{holder.attr.value}()"
        node, parent = parent, holder
    return None


def _written_later(
    wrapper: MetadataWrapper, parents: Mapping[cst.CSTNode, cst.CSTNode], call: cst.Call
) -> tuple[str, int] | None:
    """``y = x.t().view(-1)`` then ``y[0] = 1`` / ``y += 1`` / ``y.add_(1)`` later in the same block."""
    statement = enclosing(parents, call, cst.SimpleStatementLine)
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    # only the view itself: a chain after it (``.float()``) may or may not copy
    assigned = [
        target.target.value
        for small in statement.body if isinstance(small, cst.Assign) and small.value is call
        for target in small.targets if isinstance(target.target, cst.Name)
    ]
    if not assigned:
        return None
    name = assigned[0]
    owner = enclosing(parents, statement, cst.FunctionDef) or wrapper.module
    positions = spans(wrapper)
    start = positions[statement].end_line
    for node in _walk(owner):
        line = positions[node].line if node in positions else 0
        if line <= start:
            continue
        if _writes_name(node, name):
            return name, line
    return None


def _base_seen_after(
    wrapper: MetadataWrapper, parents: Mapping[cst.CSTNode, cst.CSTNode], call: cst.Call, line: int
) -> str | None:
    """Why a write into the view at ``line`` would be seen through the tensor it views: that
    tensor is an attribute (``self.buf``), a parameter of the function (the caller holds it), or
    a name read again after the write, directly or through a local alias (``cells = grid.t() if
    flag else grid``); None when it is a fresh tensor no one looks at again."""
    assert isinstance(call.func, cst.Attribute)
    found_function = enclosing(parents, call, cst.FunctionDef)
    function = found_function if isinstance(found_function, cst.FunctionDef) else None
    owner: cst.CSTNode = function or wrapper.module
    params = parameter_names(function) if function is not None else []
    positions = spans(wrapper)
    pending, seen = _roots(call.func.value), set()
    while pending:
        root = pending.pop()
        if root in seen:
            continue
        seen.add(root)
        if root == "self":
            return "the view is taken from an attribute of `self`, which outlives the call"
        if root in params and function is not None:
            return f"`{root}` is a parameter of {function.name.value}(), so the caller holds the original tensor"
        for found in _walk(owner):
            if isinstance(found, cst.Name) and found.value == root and found in positions and positions[found].line > line:
                return f"`{root}` is read again at line {positions[found].line}"
            if isinstance(found, cst.Assign) and any(_is_name(t.target, root) for t in found.targets):
                pending.extend(_roots(found.value))  # an alias: what it was bound to
    return None


def _roots(node: cst.BaseExpression) -> list[str]:
    """The names whose memory ``node`` may share: ``x`` of ``x.t()[:, 0]``, both of ``a if c
    else b``; none for another call's result (a fresh tensor)."""
    while not isinstance(node, cst.Name):
        if isinstance(node, cst.IfExp):
            return _roots(node.body) + _roots(node.orelse)
        if isinstance(node, cst.Attribute | cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _SHARING:
            node = node.func.value
        else:
            return []
    return [node.value]


def _writes_name(node: cst.CSTNode, name: str) -> bool:
    if isinstance(node, cst.AugAssign) and _is_name(node.target, name):
        return True  # `y += 1` on a tensor is in place
    if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Subscript):
        return _is_name(node.target.value, name)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return _is_name(node.func.value, name) and is_inplace_method(node.func.attr.value)
    return False


def _is_name(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """A node's descendants, not entering nested functions or classes."""
    for child in node.children:
        if isinstance(child, cst.FunctionDef | cst.ClassDef):
            continue
        yield child
        yield from _walk(child)


# --------------------------------------------------------------------------------------------
# Evidence


def _traced_receiver(scope: Scope, receiver: cst.BaseExpression) -> str | None:
    """``x`` traced as [2, 20, 8] float32: the tensor the view starts from, when its root is a local."""
    root = _root_name(receiver)
    if root is None:
        return None
    value = scope.locals.get(root)
    if value is None or not value.is_tensor:
        return None
    return f"`{root}` traced as {shape_text(value.shape)} {value.dtype or ''}".rstrip()


# Methods that keep a tensor's logical shape (the layout may change, the sizes do not).
_SAME_SHAPE = frozenset({"contiguous", "float", "double", "half", "long", "int", "detach", "clone", "to", "type_as"})


def _regrouped_shapes(call: cst.Call, scope: Scope) -> tuple[list[int], list[int]] | None:
    """The receiver's traced logical shape and the ``.view`` sizes, when the view does not
    merely merge or split neighbouring dimensions of it (``(b, h, w, c)`` viewed as ``(b, c,
    h * w)``): None when it does, or when either shape is not known from the trace."""
    assert isinstance(call.func, cst.Attribute)
    logical = _logical_shape(call.func.value, scope)
    if logical is None:
        return None
    args = [arg.value for arg in call.args]
    if any(arg.star or arg.keyword for arg in call.args):
        return None
    if len(args) == 1 and isinstance(args[0], cst.Tuple | cst.List):
        args = [element.value for element in args[0].elements]
    sizes = [_int_value(arg, scope) for arg in args]
    if not sizes or any(size is None for size in sizes):
        return None
    target = [size for size in sizes if size is not None]
    total = 1
    for size in logical:
        total *= size
    known = 1
    for size in target:
        if size != -1:
            known *= size
    if target.count(-1) > 1 or known == 0 or (-1 in target and total % known) or (-1 not in target and known != total):
        return None  # not a valid view at all: torch would have said so
    target = [total // known if size == -1 else size for size in target]
    return (logical, target) if _regroups(logical, target) else None


def _regroups(logical: list[int], target: list[int]) -> bool:
    """Whether ``target`` takes a run of ``logical``'s dimensions apart into different sizes
    (``(5, 8)`` as ``(8, 5)``) rather than only merging them or only splitting one."""
    a = [size for size in logical if size != 1]
    b = [size for size in target if size != 1]
    i = j = 0
    while i < len(a) and j < len(b):
        start_i, start_j = i, j
        pa, pb = a[i], b[j]
        while pa != pb:
            if pa < pb:
                i += 1
                if i == len(a):
                    return False
                pa *= a[i]
            else:
                j += 1
                if j == len(b):
                    return False
                pb *= b[j]
        if i > start_i and j > start_j:
            return True
        i, j = i + 1, j + 1
    return False


def _logical_shape(node: cst.BaseExpression, scope: Scope) -> list[int] | None:
    """The shape of ``x.permute(0, 2, 3, 1)``, ``x.transpose(1, 2)``, ``x.t()`` from the traced
    shape of the local ``x``; None for anything else."""
    if isinstance(node, cst.Name):
        value = scope.locals.get(node.value)
        return list(value.shape) if value is not None and value.is_tensor and value.shape is not None else None
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    inner = _logical_shape(node.func.value, scope)
    if inner is None or any(arg.star or arg.keyword for arg in node.args):
        return None
    method = node.func.attr.value
    values = [arg.value for arg in node.args]
    if len(values) == 1 and isinstance(values[0], cst.Tuple | cst.List):
        values = [element.value for element in values[0].elements]
    dims = [_int_value(value, scope) for value in values]
    if any(d is None for d in dims):
        return None
    order = [d % len(inner) for d in dims if d is not None] if inner else []
    if method in _SAME_SHAPE and not node.args:
        return inner
    if method == "t" and not node.args and len(inner) == 2:
        return [inner[1], inner[0]]
    if method in ("transpose", "swapaxes", "swapdims") and len(order) == 2:
        swapped = list(inner)
        swapped[order[0]], swapped[order[1]] = swapped[order[1]], swapped[order[0]]
        return swapped
    if method == "permute" and sorted(order) == list(range(len(inner))):
        return [inner[d] for d in order]
    return None


def _int_value(node: cst.BaseExpression, scope: Scope) -> int | None:
    """An integer size as the trace knows it: literals, traced int names, ``x.shape[i]`` and
    ``x.size(i)`` of a traced tensor local, and arithmetic of those."""
    return integer_value(node, lambda leaf: _traced_int(leaf, scope))


def _traced_int(node: cst.BaseExpression, scope: Scope) -> int | None:
    if isinstance(node, cst.Name):
        value = scope.locals.get(node.value) or scope.globals.get(node.value)
        return value.value if value is not None and value.kind == "number" and isinstance(value.value, int) else None
    shape: list[int] | None = None
    index: int | None = None
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape":
        shape = _logical_shape(node.value.value, scope)
        element = node.slice[0].slice if len(node.slice) == 1 else None
        index = _int_value(element.value, scope) if isinstance(element, cst.Index) else None
    elif (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "size"
        and len(node.args) == 1
    ):
        shape = _logical_shape(node.func.value, scope)
        index = _int_value(node.args[0].value, scope)
    if shape is None or index is None or not -len(shape) <= index < len(shape):
        return None
    return shape[index]


def _root_name(node: cst.BaseExpression) -> str | None:
    """``x`` of ``x.transpose(1, 2)``, ``hit[:k]``, ``self.out``... (None for ``self``)."""
    while True:
        if isinstance(node, cst.Name):
            return node.value if node.value != "self" else None
        if isinstance(node, cst.Attribute | cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        else:
            return None
