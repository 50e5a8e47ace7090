"""no-grad-graph: backward() on a loss that autograd never recorded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from repairbot.analysis import (
    Source,
    frame_at,
    grad_off_around,
    last_binding,
    place,
    place_in,
    reads,
    recorded_local,
    scope_of,
    source,
    tensor_text,
    walk,
)
from repairbot.evidence import Evidence
from repairbot.pattern import Pattern, signature
from repairbot.sources import Sources
from repairbot.types import Applicability, Decline, Failure, Frame

# Calls that turn a tensor into something autograd cannot follow, with what to say about them.
_TO_NUMBER = ("item", "tolist", "numpy")
_NEW_TENSOR = (
    "torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor",
    "torch.LongTensor", "torch.from_numpy", "torch.scalar_tensor",
)
_INDICES = ("argmax", "argmin", "argsort")
_MAX_NAMES = 12  # names followed back from the loss before giving up


@dataclass(frozen=True)
class Cut:
    """Where the loss's history leaves autograd."""

    line: int
    kind: str  # "number", "new-tensor", "detach", "indices", "data", "grad-off"
    what: str  # for the diagnosis: what happens there
    remedy: str


class NoGradGraph(Pattern):
    """Explains a loss without a graph and finds where autograd lost track of it.

    What it fixes:
        Diagnoses (never edits) ``loss.backward()`` on a tensor that autograd never recorded:
        the loss was rebuilt from a Python number (``.item()`` then ``torch.tensor(...)``),
        detached, computed from ``argmax`` indices, produced under ``torch.no_grad()`` /
        ``torch.inference_mode()``, or computed by a model whose parameters are all frozen.

    Why it fails:
        ``RuntimeError: element 0 of tensors does not require grad and does not have a
        grad_fn`` (0.3: ``element 0 of variables ...``; 0.1/0.2: ``there are no graph nodes
        that require computing gradients``). The traceback only shows ``backward()``. The
        diagnosis follows the loss back through the assignments of the failing function (and
        into a loss function of the same file) to the first place that leaves autograd, using
        the recorded ``requires_grad`` of the locals.

    Example:
        ``loss = torch.tensor(criterion(out, y).item())`` then ``loss.backward()``: diagnosed
        at the assignment, with the remedy to compute the loss from ``out`` directly and keep
        ``.item()`` for logging.

    Fix safety:
        Never edited automatically: whether a ``.detach()``, a ``no_grad`` block or a frozen
        parameter is intended (a frozen backbone, a metric that is not meant to train) is the
        user's decision, and removing one changes what trains.

    Not handled:
        A graph cut inside another project file's helper or inside a library (the diagnosis
        then names the loss and its recorded ``requires_grad``); ``torch.autograd.grad`` on
        inputs that do not require grad (another message).
    """

    ID = "no-grad-graph"
    TITLE = "backward() on a loss that has no autograd graph"
    TAGS = frozenset({"autograd"})
    APPLICABILITY = Applicability.DISPLAY_ONLY
    FIXES = False
    BATCH_INVARIANT = True
    EVIDENCE = frozenset({"locals"})
    REMEDY = (
        "Compute the loss from the model's output without leaving autograd: no `.detach()`, no "
        "`.item()` turned back into `torch.tensor(...)`, no argmax in the loss path, no "
        "`torch.no_grad()`/`inference_mode()` around the training forward pass, and at least one "
        "parameter with requires_grad=True."
    )
    SIGNATURES = (
        signature("RuntimeError", r"element (?P<index>\d+) of (?:tensors|variables) does not require grad and does not have a grad_fn"),
        signature("RuntimeError", r"there are no graph nodes that require computing gradients"),
    )

    def locate(
        self, failure: Failure, match: re.Match[str], evidence: Evidence | None, sources: Sources
    ) -> Decline:
        frame = failure.user_frame
        if frame is None:
            return self.decline(
                "a library called backward() on a tensor without a graph; no frame of the project's "
                "code shows where", diagnosis=self.REMEDY,
            )
        src = source(sources, frame.file)
        loss = src.backward_target(src.call_on_line(frame.line, "backward")) if src else None
        recorded = recorded_local(evidence, frame, loss) if loss else None
        named = f"`{loss}` ({tensor_text(recorded)})" if loss and recorded else f"`{loss}`" if loss else "the loss"
        if src is not None and loss is not None:
            cut = _trace_back(src, loss, frame, evidence)
            if cut is not None:
                return self.decline(
                    f"{named} has no autograd history: {cut.what}, so the backward() at "
                    f"{place(frame)} has nothing to differentiate",
                    diagnosis=cut.remedy,
                    at=frame_at(str(src.path), cut.line),
                )
        if src is not None:
            frozen = _frozen_parameters(sources, src, evidence)
            if frozen is not None:
                where, code = frozen
                return self.decline(
                    f"{named} has no autograd history although nothing in its computation detaches "
                    f"it; parameters are frozen at {place(where)} (`{code}`), and a loss computed only "
                    "from frozen parameters and data has no graph",
                    diagnosis=(
                        f"Freeze only what should stay fixed: after the freeze at {place(where)}, set "
                        "requires_grad=True on the parameters that must train (a new head: "
                        "`for p in model.head.parameters(): p.requires_grad = True`), or build the new "
                        "layers after freezing."
                    ),
                    at=where,
                )
        return self.decline(
            f"{named} has no autograd history at the backward() at {place(frame)}",
            diagnosis=self.REMEDY,
            at=frame,
        )


def _trace_back(src: Source, loss: str, frame: Frame, evidence: Evidence | None) -> Cut | None:
    """The first place, going back from the loss, where its computation leaves autograd.

    The loss's own computation is judged strictly; tensors it is computed from only count when
    a module produced them (the data going in is no graph to begin with, and a detached input
    is harmless).
    """
    modules = _module_names(evidence, frame)
    queue: list[tuple[str, int, int]] = [(loss, frame.line, 0)]
    seen: set[str] = set()
    while queue and len(seen) < _MAX_NAMES:
        name, before, depth = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        recorded = recorded_local(evidence, frame, name) if depth else None
        if recorded is not None and (not recorded.is_tensor or recorded.requires_grad):
            continue  # a module, a number, or a tensor that does have a graph
        binding = last_binding(src, name, before)
        if binding is None or binding.value is None:
            continue
        line = src.line(binding.statement)
        value = binding.value
        produced_by_model = _calls_module(value, modules)
        off = grad_off_around(src, line)
        if off is not None and (depth == 0 or produced_by_model):
            block = src.code(off.items[0].item) if isinstance(off, cst.With) else src.code(off)
            return Cut(
                line, "grad-off",
                f"`{src.code(binding.statement)}` at {place_in(src.path, line)} runs under "
                f"`{block}` ({place_in(src.path, src.line(off))}), where autograd records nothing",
                f"Run the training forward pass with autograd on: move `{src.code(binding.statement)}` "
                f"out of the `{block}` block at {place_in(src.path, src.line(off))} (keep no_grad for "
                "evaluation and for steps that must not train).",
            )
        if depth == 0 or produced_by_model:
            for expression in (value, *_returns_of_called(src, value)):
                cut = _cut_in(src, expression)
                if cut is not None:
                    return _with_numbers(src, cut)
        for read in reads(value):
            queue.append((read, line, depth + 1))
    return None


def _with_numbers(src: Source, cut: Cut) -> Cut:
    """A new tensor made from numbers: name the ``.item()`` calls of its function too."""
    functions = src.around(cut.line, cst.FunctionDef)
    if cut.kind != "new-tensor" or not functions:
        return cut
    lines = sorted({
        src.line(node) for node in walk(functions[0])
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in _TO_NUMBER and src.line(node) != cut.line
    })
    if not lines:
        return cut
    where = ", ".join(f"{place_in(src.path, line)}" for line in lines)
    return Cut(cut.line, cut.kind, cut.what, f"{cut.remedy} The Python numbers it is made from ({where}) must stay tensors too.")


def _module_names(evidence: Evidence | None, frame: Frame) -> set[str]:
    scope = scope_of(evidence, frame)
    names = {"self"}
    for described in (scope.locals, scope.globals):
        names |= {n for n, v in described.items() if v.is_module}
    return names


def _calls_module(value: cst.BaseExpression, modules: set[str]) -> bool:
    """Whether an expression calls a module (``model(x)``, ``self.head(h)``)."""
    for node in walk(value):
        if isinstance(node, cst.Call):
            root = node.func
            while isinstance(root, cst.Attribute):
                root = root.value
            if isinstance(root, cst.Name) and root.value in modules:
                return True
    return False


def _returns_of_called(src: Source, value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What the project's own functions called in ``value`` return (a hand-written loss)."""
    called = {node.func.value for node in walk(value) if isinstance(node, cst.Call) and isinstance(node.func, cst.Name)}
    returned: list[cst.BaseExpression] = []
    for node in src.positions:
        if isinstance(node, cst.FunctionDef) and node.name.value in called:
            returned += [r.value for r in walk(node.body) if isinstance(r, cst.Return) and r.value is not None]
    return returned


def _cut_in(src: Source, value: cst.BaseExpression) -> Cut | None:
    """A call or attribute in ``value`` that leaves autograd, with the line it is on."""
    found: list[tuple[int, Cut]] = []
    for node in walk(value):
        line = src.line(node) if node in src.positions else None
        if line is None:
            continue
        at = f"{place_in(src.path, line)}"
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in _TO_NUMBER:
                found.append((0, Cut(
                    line, "number", f"`{src.code(node)}` at {at} turns a tensor into a Python value",
                    f"Compute the loss from tensors: drop the `.{method}()` at {at} from the loss "
                    "path and keep `.item()` for logging only.",
                )))
            elif method in ("detach", "detach_"):
                found.append((1, Cut(
                    line, "detach", f"`{src.code(node)}` at {at} detaches it from the graph",
                    f"Remove the `.{method}()` at {at} from the loss path (detach only what must not "
                    "train, such as a target network's output).",
                )))
            elif method in _INDICES:
                found.append((2, Cut(
                    line, "indices", f"`{src.code(node)}` at {at} gives integer indices, which have no gradient",
                    f"Compute the loss from the scores, not from `.{method}()` at {at}: "
                    "F.cross_entropy(logits, target) for classes, a soft or straight-through "
                    "relaxation when a hard choice must train.",
                )))
        if src.is_call_of(node, *_NEW_TENSOR) and isinstance(node, cst.Call):
            found.append((0, Cut(
                line, "new-tensor", f"`{src.code(node)}` at {at} makes a new tensor from plain values, with no history",
                f"Return the tensor computed from the model's output instead of "
                f"`{src.code(node.func)}(...)` at {at}; convert to a number only for logging.",
            )))
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            found.append((3, Cut(
                line, "data", f"`{src.code(node)}` at {at} reads the tensor's data outside autograd",
                f"Use the tensor itself instead of `.data` at {at}.",
            )))
    return min(found, key=lambda pair: pair[0])[1] if found else None


def _frozen_parameters(sources: Sources, src: Source, evidence: Evidence | None) -> tuple[Frame, str] | None:
    """The first ``.requires_grad = False`` / ``.requires_grad_(False)`` in the project's files."""
    files = [str(src.path), *(f for f in (evidence.imported_files if evidence else ()) if Path(f) != src.path)]
    for file in files:
        other = src if file == str(src.path) else source(sources, file)
        if other is None:
            continue
        hits = []
        for node, span in other.positions.items():
            if _freezes(node):
                hits.append((span.line, other.code(node)))
        if hits:
            line, code = min(hits)
            return frame_at(str(other.path), line), code
    return None


def _freezes(node: cst.CSTNode) -> bool:
    """``p.requires_grad = False`` or ``p.requires_grad_(False)``."""
    if isinstance(node, cst.Assign):
        return isinstance(node.value, cst.Name) and node.value.value == "False" and any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" for t in node.targets
        )
    return (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "requires_grad_" and bool(node.args)
        and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == "False"
    )
