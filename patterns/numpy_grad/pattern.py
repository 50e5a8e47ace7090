"""numpy-grad: ``.numpy()`` (or an implicit conversion) of a tensor that requires grad or lives on a GPU."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from repairbot.analysis import (
    Source,
    call_at,
    calls_on_line,
    one_line,
    place,
    place_in,
    source,
    spans,
    tensor_text,
)
from repairbot.codemod import method_call
from repairbot.edits import Edit, EditError, Rewrite, Site, SiteNodes
from repairbot.evidence import DescribedValue, Evidence, Scope
from repairbot.pattern import Pattern, phrase, signature
from repairbot.provenance import project_sources
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame, Span

# Methods between a tensor and ``.numpy()`` that already do part of the job.
_DETACHING = ("detach",)
_TO_HOST = ("cpu",)
# Tensor methods whose result requires grad and sits on a device exactly when the tensor does.
_KEEPS_KIND = (
    "squeeze", "unsqueeze", "view", "reshape", "flatten", "t", "transpose", "permute", "contiguous",
    "clone", "float", "double", "half", "expand", "expand_as", "view_as", "reshape_as", "narrow",
    "mean", "sum", "exp", "log", "sigmoid", "softmax", "log_softmax", "tanh", "abs", "neg",
)


@dataclass(frozen=True)
class Conversion:
    """What one node of the site gets: ``item`` (``.item()``), ``explicit`` (the missing links
    before its ``.numpy()``) or ``implicit`` (``.detach().cpu()``, and ``.numpy()`` if asked)."""

    mode: str
    detach: bool
    cpu: bool
    numpy: bool


@dataclass(frozen=True)
class AddDetachCpu(Rewrite):
    """Adds the missing ``.detach()`` / ``.cpu()`` (and ``.numpy()`` for an implicit conversion)
    at each node of the site: a ``.numpy()`` call, or a tensor argument of the failing call."""

    conversions: tuple[Conversion, ...]  # one per span of the site, in order

    def edits(self, nodes: SiteNodes) -> list[Edit]:
        spans = (nodes.site.span, *nodes.site.extra_spans)
        if len(spans) != len(self.conversions):
            raise EditError("one conversion per span")
        return [self._edit(nodes.at(span, cst.BaseExpression), plan) for span, plan in zip(spans, self.conversions, strict=True)]

    @staticmethod
    def _edit(node: cst.BaseExpression, plan: Conversion) -> Edit:
        if plan.mode == "item":
            return Edit(node, method_call(node, "item"))
        if plan.mode == "explicit":
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and _is_method_call(node, "numpy")):
                raise EditError("not a .numpy() call")
            receiver = _with_links(node.func.value, detach=plan.detach, cpu=plan.cpu)
            return Edit(node, node.with_changes(func=node.func.with_changes(value=receiver)))
        converted = _with_links(node, detach=True, cpu=True)
        return Edit(node, method_call(converted, "numpy") if plan.numpy else converted)


class NumpyGrad(Pattern):
    """Adds the missing ``.detach()`` and ``.cpu()`` where a tensor is turned into a NumPy array.

    What it fixes:
        Logging, plotting or metric code that hands a tensor to NumPy while autograd still
        tracks it (model outputs outside ``torch.no_grad()``, a loss, a parameter) or while it
        is still on the GPU: ``preds.numpy()``, ``loss.cpu().numpy()``, and implicit
        conversions such as ``np.array(outputs)`` or ``plt.plot(losses_tensor)``.

    Why it fails:
        A NumPy array shares the tensor's memory and knows nothing of autograd or of GPUs, so
        torch refuses: ``RuntimeError: Can't call numpy() on Tensor that requires grad. Use
        tensor.detach().numpy() instead.`` and ``TypeError: can't convert cuda:0 device type
        tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.`` (older:
        ``can't convert CUDA tensor to numpy``). An implicit conversion goes through
        ``Tensor.__array__``, which calls ``numpy()``.

    Example:
        ``val_preds.append(outputs.numpy())`` becomes ``val_preds.append(outputs.detach().numpy())``;
        ``loss.cpu().numpy()`` becomes ``loss.detach().cpu().numpy()`` (detach first, so the copy
        to the host is not recorded by autograd); a CUDA tensor's ``probs.detach().numpy()``
        becomes ``probs.detach().cpu().numpy()``, with ``.detach()`` too when the traced tensor
        also requires grad. Only the missing parts are added, in the order
        ``.detach().cpu().numpy()``. An implicit conversion (``np.array(features)``) gets
        ``.detach().cpu().numpy()`` on the argument that the traced locals show to be the
        failing tensor (``.detach().cpu()`` when a library calls ``.numpy()`` on it itself).
        Other ``.numpy()`` calls of the same statement whose traced tensors would fail next are
        fixed in the same edit. A list of loss tensors (``np.mean(losses)``, a plot of the loss
        history) is fixed where it is filled: the traced locals show the list's elements, and the
        one ``losses.append(loss)`` of the function becomes ``losses.append(loss.item())``.
        An attribute, which no local names (a DQN's ``np.array(self.cost_his)`` in ``plot_cost``),
        is followed to the one ``self.cost_his.append(loss)`` of the project's files: when the
        function there calls ``loss.backward()`` (which only a one-element tensor allows) and the
        attribute is otherwise only emptied (``= []``) or counted (``len()``), it becomes
        ``self.cost_his.append(loss.item())``. An expression argument (``np.save(path, x @ a + b)``)
        is converted when one of its traced operands fails (``a`` requires grad, so ``x @ a``
        does): ``(x @ a + b).detach().cpu().numpy()``.

    Fix safety:
        Safe. ``detach()`` and ``cpu()`` change neither values nor shapes: the array holds the
        same numbers, and the training graph is untouched (the conversion was read-only).

    Not handled:
        A tensor the trace cannot name (a list filled in several places or of non-scalar
        tensors, an attribute with nothing proving its elements are numbers, or also used
        otherwise, such as ``torch.stack(self.losses).mean().backward()``, which an ``.item()``
        would break; an expression none of whose traced operands fails): declined
        with the remedy (``.item()`` or ``.detach().cpu()`` where the values are collected).
        A meta tensor (it has no data to copy). A conversion inside a library with no
        argument of the user's call traced as the tensor.
    """

    ID = "numpy-grad"
    TITLE = "NumPy conversion of a tensor that requires grad or is on a GPU"
    TAGS = frozenset({"autograd", "device", "numpy"})
    APPLICABILITY = Applicability.SAFE
    SIGNATURES = (
        signature(
            ("RuntimeError",),
            r"(?P<grad>" + phrase("Can't call numpy() on") + r"\s+(?:Tensor|Variable)\s+" + phrase("that requires grad") + ")",
        ),
        signature(
            ("TypeError",),
            phrase("can't convert") + r"\s+(?P<device>[a-z]+(?::\d+)?)\s+" + phrase("device type tensor to numpy"),
        ),
        # before torch 1.5 (and for sparse/GPU tensors of 0.4): "can't convert CUDA tensor to numpy"
        signature(("TypeError",), phrase("can't convert") + r"\s+(?P<device>CUDA)\s+" + phrase("tensor to numpy")),
    )
    EVIDENCE = frozenset({"locals"})
    BATCH_INVARIANT = True
    REWRITES = (AddDetachCpu,)

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Site | Decline:
        groups = match.groupdict()
        device = (groups.get("device") or "").lower() or None
        frame = failure.user_frame
        if frame is None:
            return self.decline("the tensor is converted inside a library, not in the project's code")
        if device is not None and device.startswith("meta"):
            return self.decline(
                "the tensor is on the meta device: it has shapes but no data, so no .cpu() can make an array of it",
                diagnosis="build the tensor (or the model) on a real device before reading its values",
                at=frame,
            )
        problem = _Problem(grad=device is None, device=device)
        path = Path(frame.file)
        wrapper = sources.metadata(path)
        module = wrapper.module
        where = place(frame)
        scope = evidence.scope(frame) if evidence else Scope()
        call = _failing_call(wrapper, frame)
        if isinstance(call, str):
            return self.decline(call, at=frame)
        node, span = call
        if _is_method_call(node, "numpy"):
            found = self._explicit(wrapper, scope, problem, node, span, where)
        else:
            found = self._implicit(
                sources, path, scope, problem, node, span, where, _via_array_protocol(failure, frame)
            )
        if isinstance(found, str):
            return self.decline(
                found,
                diagnosis=(
                    "convert each tensor where it is collected: `.item()` for a number, "
                    "`.detach().cpu().numpy()` for an array"
                ),
                at=frame,
            )
        edits = found
        first = edits[0]
        summary = _summary(edits, problem, one_line(module, node), where)
        return Site(
            pattern=self.ID,
            file=str(first.file or path),
            span=first.span,
            rewrite=AddDetachCpu(tuple(e.plan() for e in edits)),
            summary=summary,
            applicability=self.APPLICABILITY,
            evidence={
                "problem": "requires-grad" if problem.grad else "device",
                "device": problem.device,
                "call": one_line(module, node),
                "at": where,
                "conversion": "explicit" if first.mode == "explicit" else "implicit",
                "edits": [
                    {"tensor": e.code, "added": e.added, "traced": e.traced.to_json() if e.traced else None,
                     **({"filled": e.filled} if e.filled else {})}
                    for e in edits
                ],
            },
            evidence_text=_evidence_text(edits, problem, where),
            extra_spans=tuple(e.span for e in edits[1:]),
        )

    # an explicit .numpy() ----------------------------------------------------------------
    def _explicit(
        self, wrapper: MetadataWrapper, scope: Scope, problem: _Problem, call: cst.Call, span: Span, where: str
    ) -> list[_Edit] | str:
        module = wrapper.module
        first = _plan_numpy_call(module, scope, problem, call, span, failing=True)
        if first is None:
            return (
                f"`{one_line(module, call)}` at {where} already has the .detach() and .cpu() this failure asks for: "
                "the source changed since the traced run"
            )
        edits = [first]
        for sibling, sibling_span in _sibling_numpy_calls(wrapper, call):
            planned = _plan_numpy_call(module, scope, problem, sibling, sibling_span, failing=False)
            if planned is not None:
                edits.append(planned)
        return edits

    # an implicit conversion (np.array(t), plt.plot(t)) -------------------------------------
    def _implicit(
        self, sources: Sources, path: Path, scope: Scope, problem: _Problem, call: cst.Call, span: Span,
        where: str, array_protocol: bool,
    ) -> list[_Edit] | str:
        wrapper = sources.metadata(path)
        module = wrapper.module
        shown = one_line(module, call)
        edits: list[_Edit] = []
        positions = spans(wrapper)
        for arg in call.args:
            if arg.star:
                continue
            traced = _failing_operand(scope, problem, arg.value)
            if traced is None:
                continue
            converted = _with_links(arg.value, detach=True, cpu=True)
            if array_protocol:
                converted = method_call(converted, "numpy")
            edits.append(_Edit(
                mode="implicit", span=positions[arg.value], code=one_line(module, arg.value),
                detach=True, cpu=True, numpy=array_protocol, traced=traced,
                before=one_line(module, arg.value), after=one_line(module, converted),
            ))
        if not edits:
            filled = _list_fills(wrapper, scope, problem, call, span)
            if filled:
                return filled
            src = source(sources, str(path))
            attribute = _attribute_fill(sources, src, call) if src is not None else None
            if attribute is not None:
                return [attribute] if isinstance(attribute, _Edit) else attribute
            what = "requires grad" if problem.grad else f"is on {problem.device}"
            listed = _failing_tensor_list(scope, problem, call)
            if listed is not None:
                name, element = listed
                # .item() fits numbers only; a .detach() where it is filled would drop gradient
                # silently if the list also fed a loss, so a list of arrays is left to the user
                return (
                    f"`{name}` passed to `{shown}` at {where} is a list of tensors, each {tensor_text(element)}: "
                    "`.item()` fits numbers only, and the list is not rewritten where it is filled"
                )
            return (
                f"no argument of `{shown}` at {where} is a tensor the trace shows that {what}: the failing tensor "
                "is inside another object (a list of tensors, an attribute), and which one is not known"
            )
        return edits


# --------------------------------------------------------------------------------------------
# What failed and what each edit adds


@dataclass(frozen=True)
class _Problem:
    grad: bool  # "Can't call numpy() on Tensor that requires grad"
    device: str | None  # "cuda:0" of "can't convert cuda:0 device type tensor"

    def fails(self, traced: DescribedValue) -> bool:
        """Whether a traced tensor would raise this failure's error in numpy()."""
        if self.grad:
            return bool(traced.requires_grad)
        return (traced.device or "cpu") != "cpu"


@dataclass(frozen=True)
class _Traced:
    """A traced tensor an edit is backed by: a local, or the last element of a list of them."""

    name: str
    value: DescribedValue
    list_length: int | None = None
    in_list: bool = False

    def to_json(self) -> dict[str, Any]:
        listed = {"list_length": self.list_length} if self.in_list else {}
        return {"name": self.name, **self.value.to_json(), **listed}


@dataclass(frozen=True)
class _Edit:
    mode: str  # "explicit": a .numpy() call; "implicit": a tensor argument
    span: Span
    code: str  # the tensor expression, for the report
    detach: bool
    cpu: bool
    numpy: bool = False  # implicit: also add .numpy() (the callee converts through __array__)
    traced: _Traced | None = None
    before: str = ""  # the edited expression, before and after, for the report
    after: str = ""
    file: Path | None = None  # another file than the failing call's (an attribute filled there)
    filled: str = ""  # an attribute's one fill: what proves its elements are numbers

    @property
    def added(self) -> str:
        if self.mode == "item":
            return ".item()"
        parts = [".detach()"] * self.detach + [".cpu()"] * self.cpu + [".numpy()"] * self.numpy
        return "".join(parts)

    def plan(self) -> Conversion:
        return Conversion(self.mode, self.detach, self.cpu, self.numpy)


def _plan_numpy_call(
    module: cst.Module, scope: Scope, problem: _Problem, call: cst.Call, span: Span, failing: bool
) -> _Edit | None:
    """What one ``.numpy()`` call needs: the failing one by the message, a sibling by its trace."""
    assert isinstance(call.func, cst.Attribute)
    receiver = call.func.value
    links = _links(receiver)
    detached = any(link in _DETACHING or link == "data" for link in links)
    on_host = any(link in _TO_HOST for link in links)
    traced = _failing_operand(scope, problem, receiver) or _traced_tensor(scope, _tensor_root(receiver))
    if not failing and (traced is None or not problem.fails(traced.value)):
        return None
    requires_grad = problem.grad or bool(traced and traced.value.requires_grad)
    needs_host = problem.device is not None or bool(traced and (traced.value.device or "cpu") != "cpu")
    detach = requires_grad and not detached
    cpu = needs_host and not on_host
    if not detach and not cpu:
        return None
    fixed = call.with_changes(func=call.func.with_changes(value=_with_links(receiver, detach=detach, cpu=cpu)))
    return _Edit(
        mode="explicit", span=span, code=one_line(module, receiver), detach=detach, cpu=cpu, traced=traced,
        before=one_line(module, call), after=one_line(module, fixed),
    )


# --------------------------------------------------------------------------------------------
# Source


def _is_method_call(node: cst.CSTNode, method: str) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == method


def _failing_call(wrapper: MetadataWrapper, frame: Frame) -> tuple[cst.Call, Span] | str:
    """The call the frame was executing: exact with traced columns, else the one ``.numpy()`` of its line."""
    where = place(frame)
    if frame.col is not None:
        located = call_at(wrapper, frame.line, frame.col, frame.end_line, frame.end_col)
        if located is None:
            return f"no call at the traced position {where}:{frame.col}: the source changed since the run"
        return cst.ensure_type(located.node, cst.Call), located.span
    explicit = [c for c in calls_on_line(wrapper, frame.line) if _is_method_call(c.node, "numpy")]
    if len(explicit) == 1:
        return cst.ensure_type(explicit[0].node, cst.Call), explicit[0].span
    return (
        f"{'several' if explicit else 'no'} .numpy() calls on {where} and no traced columns to tell which "
        "conversion failed (a traceback from Python < 3.11)"
    )


def _sibling_numpy_calls(wrapper: MetadataWrapper, call: cst.Call) -> list[tuple[cst.Call, Span]]:
    """The other ``.numpy()`` calls of the failing call's statement, in source order."""
    parents = wrapper.resolve(ParentNodeProvider)
    statement: cst.CSTNode | None = parents.get(call)
    while statement is not None and not isinstance(statement, cst.SimpleStatementLine | cst.BaseCompoundStatement):
        statement = parents.get(statement)
    if not isinstance(statement, cst.SimpleStatementLine):
        return []
    positions = spans(wrapper)
    found = [
        (node, positions[node]) for node in _descendants(statement)
        if node is not call and isinstance(node, cst.Call) and _is_method_call(node, "numpy")
    ]
    return sorted(found, key=lambda item: (item[1].line, item[1].col))


def _descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    for child in node.children:
        if isinstance(child, cst.Lambda):
            continue  # runs later, maybe never
        found.append(child)
        found.extend(_descendants(child))
    return found


def _links(receiver: cst.BaseExpression) -> list[str]:
    """``x.detach().cpu()`` -> ["detach", "cpu"]: the detaching and host-copying steps right
    before ``.numpy()``, from the tensor outward (``.data`` counts as detaching)."""
    links: list[str] = []
    node = receiver
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in (*_DETACHING, *_TO_HOST):
            links.append(node.func.attr.value)
            node = node.func.value
        elif isinstance(node, cst.Attribute) and node.attr.value == "data":
            links.append("data")
            node = node.value
        else:
            return list(reversed(links))


def _with_links(receiver: cst.BaseExpression, detach: bool, cpu: bool) -> cst.BaseExpression:
    """The receiver with ``.detach()`` right after the tensor (before any ``.cpu()``) and
    ``.cpu()`` at the end, as asked."""
    if detach:
        receiver = _insert_detach(receiver)
    if cpu:
        receiver = method_call(receiver, "cpu")
    return receiver


def _insert_detach(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _TO_HOST:
        return node.with_changes(func=node.func.with_changes(value=_insert_detach(node.func.value)))
    return method_call(node, "detach")


def _tensor_root(node: cst.BaseExpression) -> str | None:
    """The local a tensor expression reads, when what is done to it keeps the traced tensor's
    autograd and device: ``x``, ``x[0]``, ``x.squeeze(1)``, ``x.T`` (not ``x.argmax()``, whose
    integer result no longer requires grad, nor an expression of several operands)."""
    roots = _operand_roots(node, operators=False)
    return roots[0] if roots else None


# Operators whose result requires grad (and is on a device) when an operand does: ``x @ a``.
_ARITHMETIC = (
    cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply, cst.Power, cst.FloorDivide, cst.Modulo,
)


def _operand_roots(node: cst.BaseExpression, operators: bool = True) -> list[str]:
    """The locals an expression reads through what keeps the traced tensor's autograd and
    device: ``x`` of ``x.squeeze(1)``, and (through ``operators``) ``x`` and ``a`` of
    ``(x @ a + b).T``."""
    while True:
        if operators and isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
            return _operand_roots(node.left) + _operand_roots(node.right)
        if operators and isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            node = node.expression
        elif isinstance(node, cst.Subscript) or (isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT")):
            node = node.value
        elif (
            isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in (*_DETACHING, *_TO_HOST, *_KEEPS_KIND)
        ):
            node = node.func.value
        else:
            return [node.value] if isinstance(node, cst.Name) else []


def _failing_operand(scope: Scope, problem: _Problem, node: cst.BaseExpression) -> _Traced | None:
    """The first local of an expression traced as a tensor that fails this way: the expression
    fails too (``x @ a`` requires grad when ``a`` does; an extra ``.detach()`` on an operand
    that does not is a no-op)."""
    for name in _operand_roots(node):
        traced = _traced_tensor(scope, name)
        if traced is not None and problem.fails(traced.value):
            return traced
    return None


def _attribute_fill(sources: Sources, src: Source, call: cst.Call) -> _Edit | str | None:
    """For an argument that is an attribute (``self.cost_his``, also as an element of a list or
    tuple argument): the one ``obj.attr.append(value)`` of the project's files that fills it,
    when ``value`` is proven a number (the function calls ``value.backward()`` with no
    gradient, which only a one-element tensor allows) and the attribute is otherwise only
    emptied (``= []``), counted (``len()``) or passed to this call: ``.item()`` there. A reason
    naming the attribute where one of these does not hold; None for no attribute argument."""
    named = [
        element.value
        for arg in call.args if not arg.star
        for element in (arg.value.elements if isinstance(arg.value, cst.List | cst.Tuple) else [arg])
    ]
    attributes = [n for n in named if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name)]
    if len(attributes) != 1:
        return None
    passed = attributes[0]
    attr = passed.attr.value
    shown = src.code(passed)
    fills: list[tuple[Source, cst.Call]] = []
    for each in project_sources(sources, src):
        parents = each.wrapper.resolve(ParentNodeProvider)
        for node in _descendants(each.module):
            if not isinstance(node, cst.Attribute) or node.attr.value != attr or node is passed:
                continue
            use = _attribute_use(parents, node)
            if use == "fill":
                fill = parents[parents[node]]
                assert isinstance(fill, cst.Call)
                fills.append((each, fill))
            elif use is None:
                statement: cst.CSTNode = node
                while not isinstance(statement, cst.BaseSmallStatement | cst.BaseCompoundStatement) and statement in parents:
                    statement = parents[statement]
                return (
                    f"`{shown}` holds the failing tensors, but `{_statement_text(each, statement)}` at "
                    f"{place_in(each.path, each.line(node))} uses it otherwise than collecting them and passing them "
                    f"to `{src.code(call)}`: what its elements must stay is not known"
                )
    if len(fills) != 1:
        return f"`{shown}` holds the failing tensors and is filled in {len(fills) or 'no'} places: which one is not known"
    filled, fill = fills[0]
    value = fill.args[0].value
    where = place_in(filled.path, filled.line(fill))
    if _is_method_call(value, "item"):
        return None
    proof = _backward_on(filled, fill, value)
    if proof is None:
        return (
            f"`{shown}` is filled at {where} (`{filled.code(fill)}`), but nothing there shows its elements are numbers "
            "(`.item()`) rather than arrays (`.detach().cpu()`)"
        )
    after = filled.code(fill.with_changes(args=[fill.args[0].with_changes(value=method_call(value, "item"))]))
    return _Edit(
        mode="item", span=filled.positions[value], code=filled.code(value), detach=False, cpu=False,
        before=filled.code(fill), after=after, file=filled.path if filled.path != src.path else None,
        filled=f"`{shown}` is filled only at {where}; `{proof}` there is called on the same tensor, so it is a number",
    )


def _statement_text(src: Source, statement: cst.CSTNode) -> str:
    """A statement for a report line: a compound one by its header."""
    if isinstance(statement, cst.BaseCompoundStatement):
        return src.code(statement).split(":", 1)[0]
    return src.code(statement)


def _attribute_use(parents: Any, node: cst.Attribute) -> str | None:
    """How one mention of the attribute uses it: ``fill`` (``.append(x)``), ``kept`` (emptied with
    ``= []``, counted with ``len()``), or None for any other use."""
    above = parents.get(node)
    if isinstance(above, cst.Attribute) and above.value is node:
        call = parents.get(above)
        if above.attr.value == "append" and isinstance(call, cst.Call) and call.func is above \
                and len(call.args) == 1 and not call.args[0].star and call.args[0].keyword is None:
            return "fill"
        return None
    if isinstance(above, cst.AssignTarget):
        assign = parents.get(above)
        if isinstance(assign, cst.Assign) and isinstance(assign.value, cst.List) and not assign.value.elements:
            return "kept"
        return None
    if isinstance(above, cst.Arg):
        call = parents.get(above)
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len":
            return "kept"
    return None


def _backward_on(src: Source, fill: cst.Call, value: cst.BaseExpression) -> str | None:
    """``loss.backward()`` when the function that appends ``value`` (a name bound there once)
    calls it on that name with no gradient: only a one-element tensor allows that."""
    if not isinstance(value, cst.Name):
        return None
    functions = src.around(src.line(fill), cst.FunctionDef)
    scope: cst.CSTNode = functions[0] if functions else src.module
    nodes = _descendants(scope)
    bindings = [
        n for n in nodes
        if isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name) and n.target.value == value.value
    ]
    backward = [
        n for n in nodes
        if _is_method_call(n, "backward") and isinstance(n, cst.Call) and not n.args
        and isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) and n.func.value.value == value.value
    ]
    if len(bindings) != 1 or not backward:
        return None
    return src.code(backward[0])


# --------------------------------------------------------------------------------------------
# Evidence


def _list_fills(
    wrapper: MetadataWrapper, scope: Scope, problem: _Problem, call: cst.Call, span: Span
) -> list[_Edit]:
    """For an argument that is a traced list of tensors (``np.mean(losses)``, also as an element of a
    list or tuple argument), the one place in
    the function that fills it (``losses.append(loss)``): the fix converts each element where it
    is collected. Only a list of numbers (0-d tensors) is fixed (``.item()``); a list filled in
    more than one place, or by anything but ``append``, is not."""
    module = wrapper.module
    positions = spans(wrapper)
    functions = [
        (s, n) for n, s in positions.items()
        if isinstance(n, cst.FunctionDef) and s.line <= span.line <= s.end_line
    ]
    scope_node: cst.CSTNode = max(functions, key=lambda item: item[0].line)[1] if functions else module
    edits: list[_Edit] = []
    # a list passed itself, or inside a list or tuple literal (np.array([train_losses, test_losses]))
    named = [
        element.value
        for arg in call.args if not arg.star
        for element in (arg.value.elements if isinstance(arg.value, cst.List | cst.Tuple) else [arg])
    ]
    for listed in named:
        if not isinstance(listed, cst.Name):
            continue
        name = listed.value
        traced = scope.locals.get(name)
        if traced is None or traced.kind != "tensor-list":
            continue
        element = traced.element
        if element is None or not problem.fails(element) or element.shape != ():
            continue
        fills = [
            n for n in _descendants(scope_node)
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and isinstance(n.func.value, cst.Name) and n.func.value.value == name
            and n.func.attr.value in ("append", "extend", "insert", "__setitem__")
        ]
        rebinds = [
            n for n in _descendants(scope_node)
            if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value == name
        ]
        fill = fills[0] if len(fills) == 1 else None
        if fill is None or rebinds or not _is_method_call(fill, "append") or len(fill.args) != 1:
            continue
        value = fill.args[0].value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "item":
            continue
        edits.append(_Edit(
            mode="item", span=positions[value], code=one_line(module, value), detach=False, cpu=False,
            traced=_Traced(name, element, list_length=traced.length, in_list=True),
            before=one_line(module, fill), after=f"{name}.append({one_line(module, method_call(value, 'item'))})",
        ))
    return edits


def _failing_tensor_list(
    scope: Scope, problem: _Problem, call: cst.Call
) -> tuple[str, DescribedValue] | None:
    """The first argument of ``call`` that the trace shows as a list of tensors that fail, with
    its traced element (for a diagnosis that names it)."""
    for arg in call.args:
        if arg.star or not isinstance(arg.value, cst.Name):
            continue
        traced = scope.locals.get(arg.value.value)
        if traced is None or traced.kind != "tensor-list":
            continue
        element = traced.element
        if element is not None and problem.fails(element):
            return arg.value.value, element
    return None


def _traced_tensor(scope: Scope, name: str | None) -> _Traced | None:
    if name is None:
        return None
    value = scope.locals.get(name)
    if value is not None and value.is_tensor:
        return _Traced(name, value)
    return None


def _via_array_protocol(failure: Failure, frame: Frame) -> bool:
    """Whether the conversion went through ``Tensor.__array__`` (NumPy asked for an array), rather
    than a library calling ``.numpy()`` itself."""
    frames = list(failure.frames)
    below = frames[frames.index(frame) + 1 :] if frame in frames else []
    return not below or any(f.function == "__array__" for f in below)


def _summary(edits: Sequence[_Edit], problem: _Problem, call: str, where: str) -> str:
    first = edits[0]
    requires_grad = problem.grad or any(e.detach for e in edits)
    reasons = []
    if problem.device is not None:
        reasons.append(f"it is on {problem.device} and numpy() reads host memory only")
    if requires_grad:
        traced = "" if problem.grad else " (traced)"
        reasons.append(f"it requires grad{traced} and numpy() refuses a tensor autograd is tracking")
    why = "; ".join(reasons)
    changed = f"`{first.before}` to `{first.after}`" if len(first.after) <= 70 else f"the conversion with {first.added}"
    if first.mode == "item" and first.traced is None:
        return (
            f"Changed `{first.before}` to `{first.after}`: {first.filled}, and numpy() refuses the tensors "
            f"collected there at {call.split('(', 1)[0]}(...) at {where}; `.item()` keeps the number only"
        )
    if first.mode == "item":
        assert first.traced is not None
        return (
            f"Changed {changed}, where the list `{first.traced.name}` passed to {call.split('(', 1)[0]}(...) "
            f"at {where} is filled: its elements are numbers that {why}; `.item()` keeps the number only"
        )
    if first.mode == "explicit":
        text = f"Changed {changed} at {where}: {why}"
    else:
        callee = call.split("(", 1)[0]
        text = f"Changed {changed} where it is passed to {callee}(...) at {where}: {why}"
    if len(edits) > 1:
        others = ", ".join(f"`{e.before}`" for e in edits[1:])
        text += f"; also {others} in the same statement, traced alike, so it does not fail next"
    return text


def _evidence_text(edits: Sequence[_Edit], problem: _Problem, where: str) -> str:
    message = "Can't call numpy() on Tensor that requires grad" if problem.grad else (
        f"can't convert {problem.device} device type tensor to numpy"
    )
    described = {
        e.traced.name: (
            f"a list of {e.traced.list_length if e.traced.in_list else '?'} tensors, each {tensor_text(e.traced.value)}"
            if e.mode == "item" else tensor_text(e.traced.value)
        )
        for e in edits if e.traced is not None
    }
    traced = "; ".join(f"`{name}` traced as {text}" for name, text in described.items())
    filled = "; ".join(e.filled for e in edits if e.filled)
    return f"{message} at {where}" + (f"; {traced}" if traced else "") + (f"; {filled}" if filled else "")
